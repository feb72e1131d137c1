"""Broker registration, heartbeats, fencing and controlled shutdown (Kafka's ClusterControlManager
and BrokerHeartbeatManager).

Sessions are the active controller's memory, not the log: the time of each broker's last heartbeat.
A new active controller gives every registered broker a fresh session. States and transitions, as
Kafka's BrokerHeartbeatManager computes them on each heartbeat::

    FENCED               want_shutdown -> SHUTDOWN_NOW (nothing to move)
                         caught up (metadata offset >= its registration offset) and not
                         want_fence -> UNFENCED (leaderless partitions it is in the ISR of elect it)
    UNFENCED             want_fence -> FENCED; want_shutdown -> CONTROLLED_SHUTDOWN (leaderships
                         moved, removed from ISRs), then SHUTDOWN_NOW once it leads nothing
    CONTROLLED_SHUTDOWN  leads nothing -> SHUTDOWN_NOW (fenced)
    any unfenced         no heartbeat for session_timeout_ms -> FENCED (tick)

Fencing moves the broker's leaderships and removes it from ISRs (``topics_control.move_off``)
before the BrokerRegistrationChangeRecord, as Kafka orders them.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Optional

from quorum.controller import api, registration_bounds, topics_control
from quorum.controller.broker_epochs import check_broker_epoch
from quorum.controller.index import bits, masks_of
from quorum.controller.levels import cordoning_enabled, directories_enabled
from quorum.controller.settings import CONTROLLER_ONLY, MV_ELR
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import change_block
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.versions import release
from quorum.uuids import validate_uuid

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext

_Endpoint = pb.RegisterBrokerRecord.BrokerEndpoint
_Feature = pb.RegisterBrokerRecord.BrokerFeature


def protocol_code(name: str) -> int:
    """Kafka's SecurityProtocol code of ``name`` (PLAINTEXT, SSL, ...); INVALID_REQUEST if none."""
    try:
        return pb.SecurityProtocol.Code.Value(name.upper())
    except ValueError:
        raise SparkraftError(Errors.INVALID_REQUEST, f"Unknown security protocol {name}") from None


def register(ctx: "ControllerContext", req: api.RegisterBrokerRequest, now_ms: int):
    """(records, reply_fn): the RegisterBrokerRecord comes first so its offset is known."""
    if req.cluster_id != ctx.cluster_id:
        raise SparkraftError(Errors.INCONSISTENT_CLUSTER_ID, f"Expected cluster ID {ctx.cluster_id}, but "
                                                             f"got cluster ID {req.cluster_id}")
    why = registration_bounds.refusal(req)  # checked where the request arrived too: cheap here
    if why is not None:
        raise SparkraftError(Errors.INVALID_REQUEST, why)
    existing = ctx.spec.cluster.broker(req.broker_id)
    if (existing is not None and existing.incarnation_id != req.incarnation_id and not existing.fenced
            and ctx.sessions.valid(req.broker_id, now_ms)):
        raise SparkraftError(Errors.DUPLICATE_BROKER_REGISTRATION,
                             f"Another broker is registered with that broker id ({req.broker_id}).")
    mv = ctx.spec.features.metadata_version
    if mv is not None and not req.min_metadata_version <= mv <= req.max_metadata_version:
        raise SparkraftError(Errors.UNSUPPORTED_VERSION, f"Unable to register because the broker does not "
                             f"support version {mv} ({release(mv)}) of metadata.version. It wants a version "
                             f"between {req.min_metadata_version} and {req.max_metadata_version}, inclusive.")
    ranges = {name: (lo, hi) for name, lo, hi in req.features}
    for name, level in sorted(ctx.spec.features.levels.items()):
        lo, hi = ranges.get(name, (0, 0))
        if name != METADATA_VERSION and name not in CONTROLLER_ONLY and not lo <= level <= hi:
            raise SparkraftError(Errors.UNSUPPORTED_VERSION, f"Unable to register because the broker does not "
                                 f"support finalized version {level} of {name}. The broker wants a version "
                                 f"between {lo} and {hi}, inclusive.")
    try:
        validate_uuid(req.incarnation_id, "incarnation id")
    except ValueError as e:
        raise SparkraftError(Errors.INVALID_REQUEST, str(e)) from None
    record = pb.RegisterBrokerRecord(
        broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=0,
        endpoints=[_Endpoint(name=e.name, host=e.host, port=e.port,
                             security_protocol=protocol_code(e.security_protocol)) for e in req.endpoints],
        features=[_Feature(name=METADATA_VERSION, min_supported_version=req.min_metadata_version,
                           max_supported_version=req.max_metadata_version)]
        + [_Feature(name=name, min_supported_version=lo, max_supported_version=hi)
           for name, lo, hi in sorted(req.features) if name != METADATA_VERSION],
        rack=req.rack, fenced=True, in_controlled_shutdown=False,
        log_dirs=req.log_dirs if directories_enabled(ctx.spec) else ())  # as Kafka's record below 3.7-IV2
    records: list = [record]
    new_incarnation = existing is None or existing.incarnation_id != req.incarnation_id
    if new_incarnation and (mv or 0) >= MV_ELR:
        # A restarted process: out of its ISRs and ELRs (Kafka's unclean-shutdown handling)
        records += topics_control.restarted(ctx, req.broker_id)
    elif existing is not None and not existing.fenced:
        # The old incarnation still leads and sits in ISRs: take it out, as if fenced.
        records += topics_control.move_off(ctx, req.broker_id)
    epoch = ctx.first_record_offset(len(records))
    record.broker_epoch = epoch
    reply = api.RegisterBrokerReply(epoch)
    return records, reply


def heartbeat(ctx: "ControllerContext", req: api.BrokerHeartbeatRequest, now_ms: int):
    reg = check_broker_epoch(ctx, req.broker_id, req.broker_epoch)
    ctx.sessions.touch(req.broker_id, now_ms)
    ctx.sessions.reported_offsets[req.broker_id] = req.current_metadata_offset
    caught_up = req.current_metadata_offset >= reg.broker_epoch
    records: list = directories_offline(ctx, reg, req.offline_log_dirs) if req.offline_log_dirs else []
    if not records and req.cordoned_log_dirs is not None and cordoning_enabled(ctx.spec):
        cordoned = tuple(d for d in req.cordoned_log_dirs if d in reg.log_dirs)
        if cordoned != reg.cordoned_log_dirs:  # KIP-1066: where it takes no new replicas now
            records.append(_change(reg, cordoned_log_dirs=list(cordoned)))
    if records:  # a failed or cordoned log directory is this heartbeat's one change; the next does the rest
        return records, api.BrokerHeartbeatReply(is_caught_up=caught_up, is_fenced=reg.fenced, should_shutdown=False)
    fenced, shutdown = reg.fenced, False
    if reg.fenced:
        if req.want_shutdown:
            shutdown = True
        elif caught_up and not req.want_fence:
            records.append(_change(reg, fenced=False, in_controlled_shutdown=False))
            records += topics_control.elect_leaderless(ctx, req.broker_id)
            fenced = False
    elif req.want_fence:
        records += fence_records(ctx, req.broker_id)
        fenced = True
    elif req.want_shutdown or reg.in_controlled_shutdown:
        if not reg.in_controlled_shutdown:
            records.append(_change(reg, in_controlled_shutdown=True))
        moves = topics_control.move_off(ctx, req.broker_id)
        records += moves
        if not _still_leads(ctx.index.led_masks(req.broker_id), moves):
            records.append(_change(reg, fenced=True))
            fenced, shutdown = True, True
    return records, api.BrokerHeartbeatReply(is_caught_up=caught_up, is_fenced=fenced,
                                             should_shutdown=shutdown)


def _still_leads(led: dict[str, int], moves: list) -> bool:
    """Does a broker leading ``led`` (topic id -> mask of partition ids) still lead a partition
    that ``moves`` gives no new leader?"""
    moved: dict[str, int] = {}
    for r in moves:
        if type(r) is change_block.ChangeColumns:
            for tid, mask in r.leader_masks().items():
                moved[tid] = moved.get(tid, 0) | mask
        elif r.HasField("leader"):
            moved[r.topic_id] = moved.get(r.topic_id, 0) | 1 << r.partition_id
    return any(mask & ~moved.get(tid, 0) for tid, mask in led.items())


def _change(reg, fenced: Optional[bool] = None, in_controlled_shutdown: Optional[bool] = None,
            log_dirs: Optional[list[str]] = None,
            cordoned_log_dirs: Optional[list[str]] = None) -> pb.BrokerRegistrationChangeRecord:
    r = pb.BrokerRegistrationChangeRecord(broker_id=reg.broker_id, broker_epoch=reg.broker_epoch)
    if fenced is not None:
        r.fenced = fenced
    if in_controlled_shutdown is not None:
        r.in_controlled_shutdown = in_controlled_shutdown
    if log_dirs is not None:
        r.log_dirs.ids.extend(log_dirs)
        r.log_dirs.SetInParent()  # present even when none is left online
    if cordoned_log_dirs is not None:
        r.cordoned_log_dirs.ids.extend(cordoned_log_dirs)
        r.cordoned_log_dirs.SetInParent()  # present even when none is cordoned any more
    return r


def directories_offline(ctx: "ControllerContext", reg, failed: Iterable[str]) -> list:
    """A broker's heartbeat names log directories that failed (Kafka's handleDirectoriesOffline):
    its replicas in them leave their ISRs and lose their leaderships, as if the broker were fenced
    for those partitions alone; its registration keeps only the directories still online. A
    directory not (or no longer) registered changes nothing."""
    failed = set(failed) & set(reg.log_dirs)
    if not failed:
        return []
    partitions = ctx.spec.topics.by_id
    hit = [(tid, pid) for tid, mask in ctx.index.isr_masks(reg.broker_id).items()
           for pid in bits(mask) if partitions[tid].partitions[pid].directory_of(reg.broker_id) in failed]
    return topics_control.move_off(ctx, reg.broker_id, masks_of(hit)) + [
        _change(reg, log_dirs=[d for d in reg.log_dirs if d not in failed])]


def fence_records(ctx: "ControllerContext", broker_id: int) -> list:
    """Move the broker's partitions off it, then mark it fenced."""
    reg = ctx.spec.cluster.broker(broker_id)
    return topics_control.move_off(ctx, broker_id) + [_change(reg, fenced=True)]


def unregister(ctx: "ControllerContext", req: api.UnregisterBrokerRequest):
    reg = ctx.spec.cluster.broker(req.broker_id)
    if reg is None:
        raise SparkraftError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker {req.broker_id} is not registered.")
    records = topics_control.move_off(ctx, req.broker_id)
    records.append(pb.UnregisterBrokerRecord(broker_id=req.broker_id, broker_epoch=reg.broker_epoch))
    return records, None


def first_expired(ctx: "ControllerContext", now_ms: int) -> Optional[int]:
    """The unfenced broker whose session ran out longest ago, if any."""
    oldest = ctx.sessions.oldest(lambda b: _unfenced(ctx, b))
    if oldest is None or now_ms <= oldest[0] + ctx.sessions.timeout_ms:
        return None
    return oldest[1]


def next_expiry(ctx: "ControllerContext") -> Optional[int]:
    oldest = ctx.sessions.oldest(lambda b: _unfenced(ctx, b))
    return None if oldest is None else oldest[0] + ctx.sessions.timeout_ms + 1


def _unfenced(ctx: "ControllerContext", broker_id: int) -> bool:
    reg = ctx.spec.cluster.broker(broker_id)
    return reg is not None and not reg.fenced


__all__ = ["register", "heartbeat", "unregister", "fence_records", "first_expired", "next_expiry"]
