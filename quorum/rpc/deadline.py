"""How long a servicer may wait for its node on a call's behalf: what is left of the caller's
deadline, or DEFAULT_WAIT_S when the caller set none."""
from __future__ import annotations

import grpc

DEFAULT_WAIT_S = 30.0


def time_left(context: grpc.ServicerContext) -> float:
    remaining = context.time_remaining()
    return DEFAULT_WAIT_S if remaining is None else max(0.0, remaining)
