"""Every dispatch table of the product is complete: each kind of input has its handler (a table
missing one would stall or crash only when that input first arrives). Checked here rather than by
``assert`` at import, which ``python -O`` removes."""
from __future__ import annotations

from delta_tables import schemas
from quorum.metadata import delta
from quorum.metadata.configs import BROKER, TOPIC, ConfigResource
from quorum.metadata.records import RecordType
from quorum.node import inbox, raft_rounds
from quorum.raft import core, messages, polls, transitions
from quorum.raft.roles import ROLES


def test_the_raft_core_handles_every_message_and_every_role():
    assert set(core._REQUEST_HANDLERS) == set(messages.REQUEST_TYPES)
    assert set(core._RESPONSE_HANDLERS) == set(messages.RESPONSE_TYPES)
    assert set(polls._POLLS) == set(ROLES)
    assert set(transitions._TRANSITIONS) == set(ROLES)


def test_the_raft_node_handles_every_inbox_item():
    assert set(raft_rounds._HANDLERS) == set(inbox.INBOX_ITEMS)


def test_the_metadata_delta_handles_every_record_type():
    assert set(delta._HANDLERS) | delta.TRANSACTION_MARKERS == set(RecordType)
    assert not set(delta._HANDLERS) & delta.TRANSACTION_MARKERS, "transaction markers are the loader's"


def test_every_table_has_its_row_description():
    assert set(schemas.ROW_OF) == set(schemas.ALL_TABLES)


def test_the_config_kinds_the_shell_names_are_the_images_own():
    """quorum/shell/tree.py names config resources by these kinds ("TOPIC", "CLUSTER")."""
    assert ConfigResource(TOPIC, "t").kind == "TOPIC" and ConfigResource(BROKER, "").kind == "CLUSTER"
