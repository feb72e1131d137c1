"""The one rule for a client command given addresses where nothing listens (nothing_listens.py),
without its 10 s wait (the CLI's own cases, one per protocol, are in tests/cli/test_cli_contract.py):
it gives up only once every address has refused and none has ever answered, and only when on."""
from __future__ import annotations

import pytest

from quorum.errors import Errors, SparkraftError
from quorum.rpc import nothing_listens


def test_gives_up_once_every_address_refused_and_none_answered(monkeypatch):
    monkeypatch.setattr(nothing_listens, "give_up_s", 0.0)
    clock = nothing_listens.RefusalClock(["127.0.0.1:1", "127.0.0.1:2"])
    clock.note_refused("127.0.0.1:1")
    clock.check()  # one address has not refused yet: go on
    clock.note_refused("127.0.0.1:2")
    with pytest.raises(SparkraftError) as e:
        clock.check()
    assert e.value.error is Errors.NETWORK_EXCEPTION
    assert e.value.message.startswith("nothing listens at 127.0.0.1:1,127.0.0.1:2: every connection was refused")


def test_an_address_that_ever_answered_or_a_server_never_gives_up(monkeypatch):
    monkeypatch.setattr(nothing_listens, "give_up_s", 0.0)
    clock = nothing_listens.RefusalClock(["127.0.0.1:1"])
    clock.note_answered()
    clock.note_refused("127.0.0.1:1")
    clock.check()  # it answered once: a controller restarting, not a wrong address
    monkeypatch.setattr(nothing_listens, "give_up_s", None)  # the rule is off (servers, library use)
    off = nothing_listens.RefusalClock(["127.0.0.1:1"])
    off.note_refused("127.0.0.1:1")
    off.check()
