"""Refusals a controller answers itself are in the audit trail too: a request carrying secrets sent
to a standby over a listener without TLS is refused there at once, and the standby passes the
refusal to the active controller, which records it (summarised when it repeats); the credential's
salt and salted password appear in no entry."""
from __future__ import annotations

import pytest
from conftest import audit_entries, wait_for

from quorum.controller import api
from quorum.errors import Errors, SparkraftError

pytestmark = pytest.mark.slow

SALT, SALTED = b"salt-4711-" * 3, b"salted-password-0815-" * 2


def test_a_standbys_own_refusal_is_recorded_by_the_active_controller(controller_processes):
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    leader = cp.wait_leader().leader_id
    standby = next(i for i in cp.voters if i != leader)
    upsert = api.AlterUserScramCredentialsRequest(upsertions=(
        api.ScramCredentialUpsertion("bob", "SCRAM-SHA-256", 8192, SALT, SALTED),))
    with ControllerClient(cp.bootstrap([standby]), timeout=10) as to_standby:
        for _ in range(3):  # the same refusal again: one entry, then a summary counting the rest
            with pytest.raises(SparkraftError) as refused:
                to_standby.call(upsert)
            assert refused.value.error is Errors.INVALID_REQUEST and "only over TLS" in refused.value.message

    def recorded():
        return [e for e in audit_entries(cp.bootstrap()) if e.request == "AlterUserScramCredentials"]

    wait_for(lambda: recorded(), 30, "the standby's refusal in the active controller's audit trail")
    (first, *rest) = recorded()
    assert (first.principal, first.client_host, first.error_code, list(first.resources)) == (
        "User:ANONYMOUS", "127.0.0.1", Errors.INVALID_REQUEST.value, ["USER:bob"]), first
    assert first.record_count == 0 and "only over TLS" in first.error_message
    assert all(SALT not in e.SerializeToString() and SALTED not in e.SerializeToString() for e in recorded())
    with ControllerClient(cp.bootstrap(), timeout=10) as admin:
        assert admin.call(api.DescribeUserScramCredentialsRequest()) == (), "a refused request changed nothing"
