"""A broker's request speaks for its current registration only: the broker epoch it names must be
the one its registration has (Kafka's STALE_BROKER_EPOCH otherwise)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.errors import Errors, SparkraftError

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext


def check_broker_epoch(ctx: "ControllerContext", broker_id: int, broker_epoch: int):
    """The broker's registration, if ``broker_epoch`` is its epoch; else SparkraftError."""
    reg = ctx.spec.cluster.broker(broker_id)
    if reg is None:
        raise SparkraftError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
    if reg.broker_epoch != broker_epoch:
        raise SparkraftError(Errors.STALE_BROKER_EPOCH, f"Expected broker epoch {reg.broker_epoch}, but "
                                                        f"got broker epoch {broker_epoch}")
    return reg
