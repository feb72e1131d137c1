"""The active controller's timers, a role ControllerCore takes on: activation records still to
go out, fencing a broker whose session expired, Kafka's leader balance, refusals summarised in the
audit trail (quorum/controller/audit.py), the idle NoOp. Needs the core's ``_emit``, ``_spec``,
``settings``, ``sessions`` and the fields named below."""
from __future__ import annotations

import logging

from quorum.controller import brokers_control, topics_control
from quorum.controller.operation import Operation
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb

log = logging.getLogger("quorum.controller.core")

NO_DEADLINE = 1 << 62


class Timers:
    def tick(self, now_ms: int) -> list[Operation]:
        """Timers: activation records, fencing brokers whose session expired, the leader balance,
        the idle NoOp."""
        if not self.is_active or self._diverged:
            return []
        ops = []
        broker = brokers_control.first_expired(self, now_ms)
        if broker is not None:
            # One per tick (Kafka's maybeFenceOneStaleBroker): fencing a big broker takes seconds,
            # and the driver handles the heartbeats that arrived meanwhile before the next tick.
            log.info("controller %d: fencing broker %d (no heartbeat for %d ms)", self.node_id, broker,
                     self.settings.session_timeout_ms)
            ops.append(self._emit(self.decided(brokers_control.fence_records(self, broker), now_ms, "FenceBroker",
                                               [f"BROKER:{broker}"]), now_ms, None, "FenceBroker"))
            self.timed_out_heartbeats += 1
        if now_ms >= self._next_balance_ms and not ops:
            ops += self._balance_leaders(now_ms)
        summaries = self.refusal_summaries(now_ms)
        if summaries:
            ops.append(self._emit(summaries, now_ms, None, "RefusalSummaries"))
        if self._pending_batches:
            ops.insert(0, self._emit([], now_ms, None, "Activation"))
        if not ops and now_ms >= self._last_write_ms + self.settings.idle_interval_ms:
            ops.append(self._emit([pb.NoOpRecord()], now_ms, None, "NoOp"))
        return ops

    def _balance_leaders(self, now_ms: int) -> list[Operation]:
        """Kafka's auto leader rebalance: preferred elections for imbalanced brokers, one batch's
        worth at a time; the next round at once while more remain, else after the check interval."""
        records, more = topics_control.balance_leaders(self, self.settings.max_records_per_batch)
        self._next_balance_ms = now_ms if more else now_ms + self.settings.leader_imbalance_check_interval_ms
        if not records:
            return []
        log.info("controller %d: leader balance: %d preferred election(s)%s", self.node_id, len(records),
                 ", more to come" if more else "")
        return [self._emit(self.decided(records, now_ms, "BalanceLeaders", ["CLUSTER:"]), now_ms, None,
                           "BalanceLeaders")]

    def next_deadline_ms(self) -> int:
        if not self.is_active:
            return NO_DEADLINE
        if self._pending_batches:
            return 0
        deadline = min(self._last_write_ms + self.settings.idle_interval_ms, self._next_balance_ms)
        expiry = brokers_control.next_expiry(self)
        return deadline if expiry is None else min(deadline, expiry)

