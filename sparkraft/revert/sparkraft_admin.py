"""A plan's steps as sparkraft's controller requests (quorum/controller/api.py), sent with the
operator's ControllerClient: authorized as the operator, and so in the audit trail as theirs."""
from __future__ import annotations

from typing import Optional

from delta_tables.revert import Step, entity_of_label, resource_of_label
from quorum.controller import api
from quorum.errors import Errors
from sparkraft.revert.requests import config_resources


class SparkraftAdmin:
    """Applies groups of steps (sparkraft/revert/requests.py) through sparkraft's controllers."""

    name = "sparkraft's controllers"

    def __init__(self, client, bootstrap: str, security=None):
        self.client, self.bootstrap, self.security = client, bootstrap, security
        self.committed = -1  # the active controller's committed offset after the last request

    def __enter__(self) -> "SparkraftAdmin":
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def current_image(self):
        """The controllers' committed image now (the log, or the leader's snapshot and the log after it)."""
        from quorum.rpc.log_reader import read_image

        return read_image(self.bootstrap, security=self.security)

    def apply(self, group: list[Step]) -> list[Optional[str]]:
        """Apply one group (one request): per step, None if applied, else the cluster's error
        (Kafka's error name and message). A request refused as a whole raises SparkraftError."""
        request, items = _request(group)
        reply, self.committed = self.client.call_committed(request)
        outcome = {}
        for steps, (error, message) in zip(items, _results(reply)):
            for step in steps:
                outcome[id(step)] = None if error is Errors.NONE else error.name + (f": {message}" if message else "")
        return [outcome.get(id(step), "no answer for it") for step in group]


def _request(group: list[Step]) -> tuple[object, list[list[Step]]]:
    """The request carrying ``group``, and the steps each of the answer's items stands for."""
    one = [[s] for s in group]
    kind = group[0].kind
    if kind == "create-topic":
        return api.CreateTopicsRequest(tuple(
            api.CreatableTopic(s.resource, s.after["partitions"], s.after["replication_factor"],
                               configs=tuple(sorted(s.after["configs"].items()))) for s in group)), one
    if kind == "delete-topic":
        return api.DeleteTopicsRequest(tuple(s.resource for s in group)), one
    if kind == "create-partitions":
        return api.CreatePartitionsRequest(tuple(api.PartitionCountUpdate(s.resource, s.after) for s in group)), one
    if kind in ("set-config", "delete-config"):
        by_resource = config_resources(group)
        return api.IncrementalAlterConfigsRequest(tuple(
            (api.ConfigResourceKey(*resource_of_label(label)),
             tuple(api.AlterableConfig(s.name, "SET" if s.kind == "set-config" else "DELETE",
                                       s.after if s.kind == "set-config" else None) for s in steps))
            for label, steps in by_resource)), [steps for _, steps in by_resource]
    if kind == "create-acl":
        return api.CreateAclsRequest(tuple(api.AclBinding(**s.after) for s in group)), one
    if kind == "delete-acl":
        return api.DeleteAclsRequest(tuple(api.AclBinding(**s.before) for s in group)), one
    if kind in ("set-quota", "remove-quota"):
        return api.AlterClientQuotasRequest(tuple(
            api.ClientQuotaAlteration(entity_of_label(s.resource),
                                      ((s.name, s.after if kind == "set-quota" else None),)) for s in group)), one
    if kind == "delete-user":
        return api.AlterUserScramCredentialsRequest(deletions=tuple(
            api.ScramCredentialDeletion(s.resource, s.name) for s in group)), one
    if kind in ("upgrade-feature", "downgrade-feature"):
        upgrade_type = "UPGRADE" if kind == "upgrade-feature" else "SAFE_DOWNGRADE"
        return api.UpdateFeaturesRequest(tuple((s.resource, s.after) for s in group), upgrade_type=upgrade_type), one
    raise ValueError(f"not a step of a plan: {kind}")


def _results(reply) -> list[tuple[Errors, str]]:
    """(error, message) per item of the answer, in the request's order."""
    items = reply if isinstance(reply, (tuple, list)) else ()
    out = []
    for item in items:
        if isinstance(item, tuple):  # DeleteAcls: (its result, the bindings it matched)
            item = item[0]
        out.append((getattr(item, "error", Errors.NONE), getattr(item, "message", "") or ""))
    return out
