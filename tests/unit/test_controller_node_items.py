"""Every kind of item a ControllerNode's queue carries has its handler: the handler table is held
to the item types controller_events.py defines (every dataclass there but Stop, which ends the
loop), so an item type added without a handler fails here rather than stalling a queue."""
from __future__ import annotations

import dataclasses

from quorum.node import controller_events, controller_node


def test_every_item_type_has_a_handler():
    defined = {v for v in vars(controller_events).values()
               if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == controller_events.__name__}
    assert set(controller_events.ITEMS) == defined - {controller_events.Stop}
    assert set(controller_node._HANDLERS) == set(controller_events.ITEMS)
