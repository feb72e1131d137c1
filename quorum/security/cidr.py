"""ACL hosts that are CIDR blocks (metadata.version 4.4-IV1): ``10.0.0.0/8`` matches every client
address in it, as Kafka's authorizer matches them (an IPv4 block never matches an IPv4-mapped IPv6
address; the address bits past the prefix are ignored, ``10.1.2.3/8`` is ``10.0.0.0/8``)."""
from __future__ import annotations

import functools
import ipaddress
from typing import Optional, Union

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


def cidr_refusal(host: str) -> Optional[str]:
    """Why ``host`` (it holds a '/') is not a CIDR block, in Kafka's words, or None."""
    address, _, prefix = host.partition("/")
    try:
        limit = ipaddress.ip_address(address).max_prefixlen
    except ValueError:
        return f"Could not parse [{host}]"
    if not prefix.isdigit() or not prefix.isascii():
        return f"Could not parse [{host}]"
    if int(prefix) > limit:
        return f"Value [{int(prefix)}] not in range [0,{limit}]"
    return None


@functools.lru_cache(maxsize=4096)
def network(host: str) -> Optional[Network]:
    """The block an ACL's host names, or None if it names none."""
    if "/" not in host or cidr_refusal(host) is not None:
        return None
    return ipaddress.ip_network(host, strict=False)


def in_block(address: str, host: str) -> bool:
    """Whether a client at ``address`` is in the ACL host ``host``'s block."""
    block = network(host)
    if block is None or not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0].strip("[]"))
    except ValueError:
        return False
    return ip.version == block.version and ip in block
