"""Certificates for the security tests: a throwaway CA (trustme) and PEM key stores in Kafka's form
(one file: private key + certificate chain), trust stores, and client config files."""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Optional

import trustme

HOSTS = ("127.0.0.1", "localhost")
MAPPING_RULES = "RULE:^CN=(.*?),.*$/$1/,DEFAULT"  # CN=alice,OU=...,O=... -> alice


class Pki:
    def __init__(self, root: Path, name: str = "ca"):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name=f"sparkraft tests {name}")
        self.truststore = root / f"{name}.pem"
        self.ca.cert_pem.write_to_path(str(self.truststore))
        self.name = name

    def keystore(self, cn: str, *, file: Optional[str] = None, not_after: Optional[datetime.datetime] = None,
                 not_before: Optional[datetime.datetime] = None) -> Path:
        """A key store for ``CN=cn`` valid for 127.0.0.1 and localhost (servers and clients alike)."""
        cert = self.ca.issue_cert(*HOSTS, common_name=cn, not_before=not_before, not_after=not_after)
        path = self.root / (file or f"{self.name}-{cn}.pem")
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(cert.private_key_pem.bytes() + b"".join(c.bytes() for c in cert.cert_chain_pems))
        tmp.replace(path)  # as an operator rotates: the new file appears whole
        return path

    def jvm_keystore(self, cn: str) -> Path:
        """The same as ``keystore`` with the private key in PKCS#8, the only PEM key form Apache
        Kafka's JVM reads (``ssl.keystore.type=PEM``)."""
        from cryptography.hazmat.primitives import serialization

        cert = self.ca.issue_cert(*HOSTS, common_name=cn)
        key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
        path = self.root / f"{self.name}-{cn}-pkcs8.pem"
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption())
                         + b"".join(c.bytes() for c in cert.cert_chain_pems))
        return path

    def expired_keystore(self, cn: str) -> Path:
        now = datetime.datetime.now(datetime.timezone.utc)
        return self.keystore(cn, file=f"{self.name}-{cn}-expired.pem", not_before=now - datetime.timedelta(days=30),
                             not_after=now - datetime.timedelta(days=1))

    def client_config(self, name: str, *, protocol: str = "SSL", keystore: Optional[Path] = None,
                      truststore: Optional[Path] = None, **sasl: str) -> Path:
        """A ``--command-config`` file."""
        props = {"security.protocol": protocol, "ssl.truststore.location": str(truststore or self.truststore)}
        if keystore is not None:
            props["ssl.keystore.location"] = str(keystore)
        props.update({f"sasl.{k}": v for k, v in sasl.items()})
        path = self.root / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path


def secure_controller_props(pki: Pki, node_id: int, **extra: str) -> dict[str, str]:
    """What makes controller ``node_id``'s listener SSL with mutual TLS and the authorizer on."""
    return {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.keystore.location": str(pki.keystore(f"controller-{node_id}")),
        "ssl.truststore.location": str(pki.truststore),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": MAPPING_RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        **extra,
    }
