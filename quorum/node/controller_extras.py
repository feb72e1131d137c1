"""What a ControllerNode adds around its core's answer (controller_node.py), for the requests whose
registry row names a function here (``RequestRow.around``): kraft.version, which the Raft log holds
rather than the metadata (an UpdateFeatures naming it, DescribeFeatures reporting it), and the
migration driver's status in DescribeMigration, and DescribeAudit's entries (audit_reads.py).

A write's function takes (node, request, check) and returns the reply's future, or None when the
core answers it as usual; a read's takes (node, request, the core's answer's future) and returns
the future of the answer to give."""
from __future__ import annotations

import concurrent.futures
from dataclasses import replace
from typing import Optional

from quorum.controller.api import ItemResult, UpdateFeaturesRequest
from quorum.controller.features_control import KRAFT_VERSION
from quorum.errors import Errors, NotLeaderError, SparkraftError
from quorum.node.audit_reads import audit_entries  # noqa: F401  (DescribeAudit's: the log holds the entries)
from quorum.node.pending_replies import not_controller


def update_features_with_kraft(node, req: UpdateFeaturesRequest, check) -> Optional[concurrent.futures.Future]:
    """UpdateFeatures naming kraft.version (else None). That feature lives in the Raft log
    (KRAFT_VERSION control records), so the Raft leader upgrades it (RaftCore.upgrade_kraft_version),
    once ``check`` (authorization) allows; the other features go to the core as usual; the results
    keep the request's order."""
    if not any(n == KRAFT_VERSION for n, _ in req.updates):
        return None
    out: concurrent.futures.Future = concurrent.futures.Future()
    denied = check() if check is not None else None
    if denied is not None:
        out.set_exception(denied)
        return out
    level = next(lvl for n, lvl in req.updates if n == KRAFT_VERSION)
    others = tuple(u for u in req.updates if u[0] != KRAFT_VERSION)

    def finish(kraft: ItemResult, rest: Optional[concurrent.futures.Future]) -> None:
        if rest is not None and rest.exception() is not None:
            out.set_exception(rest.exception())
            return
        rest_results = iter(rest.result() if rest is not None else ())
        results, seen = [], False
        for name, _ in req.updates:
            if name != KRAFT_VERSION:
                results.append(next(rest_results))
            elif seen:
                results.append(ItemResult(Errors.INVALID_REQUEST, f"Feature {name} appears more than once"))
            else:
                results.append(kraft)
                seen = True
        out.set_result(tuple(results))

    def after_raft(upgrade: concurrent.futures.Future) -> None:
        e = upgrade.exception()
        if isinstance(e, NotLeaderError):
            out.set_exception(not_controller(node.node_id, e.leader_id))
            return
        if e is not None and not isinstance(e, SparkraftError):
            out.set_exception(e)
            return
        kraft = ItemResult() if e is None else ItemResult(e.error, e.message)
        if others:
            node.submit(UpdateFeaturesRequest(others, req.validate_only, req.upgrade_type)).add_done_callback(
                lambda rest: finish(kraft, rest))
        else:
            finish(kraft, None)

    node.raft.change_voters(lambda core, now: core.upgrade_kraft_version(level, now, req.validate_only)
                            ).add_done_callback(after_raft)
    return out


def with_migration_status(node, req, described: concurrent.futures.Future) -> concurrent.futures.Future:
    """DescribeMigration with the driver's claim and lag (only the active controller's driver has them)."""
    if node.migration is None:
        return described
    out: concurrent.futures.Future = concurrent.futures.Future()

    def finish(_) -> None:
        if described.exception() is not None:
            out.set_exception(described.exception())
            return
        if node.active_epoch is None:
            out.set_result(described.result())
            return
        status = node.migration.status(node.core.last_committed_offset)
        out.set_result(replace(status, state=described.result().state))

    described.add_done_callback(finish)
    return out


def with_kraft_version(node, req, described: concurrent.futures.Future) -> concurrent.futures.Future:
    """DescribeFeatures with kraft.version, which the Raft log holds rather than the metadata."""
    out: concurrent.futures.Future = concurrent.futures.Future()

    def finish(level: concurrent.futures.Future) -> None:
        d = described.result()
        if level.exception() is None and level.result():
            d = replace(d, finalized=d.finalized + ((KRAFT_VERSION, level.result()),))
        out.set_result(d)

    def after(_) -> None:
        if described.exception() is not None:
            out.set_exception(described.exception())
        else:
            node.raft.kraft_version().add_done_callback(finish)

    described.add_done_callback(after)
    return out
