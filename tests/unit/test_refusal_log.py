"""RefusalLog: a client's refusals of one kind are logged once per interval, each counted, and the
next line says how many were not logged; another client or kind is logged at once."""
from __future__ import annotations

import logging

from quorum.refusal_log import RefusalLog


def test_refusals_are_logged_once_per_client_and_kind_per_interval(caplog):
    now = [0.0]
    refusals = RefusalLog(logging.getLogger("test.refusals"), every_s=30, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="test.refusals"):
        logged = [refusals.note("10.0.0.1", "fetch", logging.WARNING, "refused %s", "a fetch") for _ in range(1000)]
        assert logged.count(True) == 1
        assert refusals.note("10.0.0.2", "fetch", logging.WARNING, "refused %s", "a fetch")  # another client
        assert refusals.note("10.0.0.1", "registration", logging.WARNING, "refused a registration")  # another kind
        now[0] = 31.0
        assert refusals.note("10.0.0.1", "fetch", logging.WARNING, "refused %s", "a fetch")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["refused a fetch", "refused a fetch", "refused a registration",
                     "refused a fetch (999 more like it from this client not logged)"]
    assert refusals.refused == 1003
