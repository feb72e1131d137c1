"""Reads on a controller node: each answered on the controller thread from the committed image (its
registry row's ``read``, then the row's ``around`` function of controller_extras.py, if any), on the
active controller and on standbys alike. The answer's future carries, in ``answered_at``, the offset
of the image it read, which the reply names (docs/design/consistency.md: tests hold every read to
the committed log at that offset)."""
from __future__ import annotations

import concurrent.futures

from quorum import failpoints
from quorum.controller import registry
from quorum.node import controller_extras


def answer(node, request) -> concurrent.futures.Future:
    """``request``'s answer from ``node``'s committed image; ``future.answered_at``: [its offset] once done."""
    row = registry.row_of(request)
    answered_at: list[int] = []

    def read(core):
        answered_at.append(core.read_offset)
        if failpoints.enabled("stale-read"):
            return _stale(node, core, row, request)
        return row.read(core, request, node.leader_id())

    future = node.call(read)
    if row.around is not None:
        future = getattr(controller_extras, row.around)(node, request, future)
    future.answered_at = answered_at
    return future


def _stale(node, core, row, request):
    """The deliberate bug ``stale-read`` (quorum/failpoints.py): the answer from the image of the
    node's first read (swapped in and back on the controller thread, which alone touches it)."""
    loader = core.loader
    current, loader.image = loader.image, node.__dict__.setdefault("_stale_image", loader.image)
    try:
        return row.read(core, request, node.leader_id())
    finally:
        loader.image = current
