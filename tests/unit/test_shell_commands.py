"""The shell's commands over a small hand-made tree: ``find`` with its tests, and bad arguments."""
from __future__ import annotations

import pytest

from quorum.shell.commands import Shell, ShellError
from quorum.shell.tree import Dir, File


def tree() -> Dir:
    orders = Dir(lambda: {"id": File("t1"), "name": File("orders"), "0": File("{}")})
    audit = Dir(lambda: {"id": File("t2"), "name": File("audit"), "0": File("{}")})
    topics = Dir(lambda: {"byName": Dir(lambda: {"orders": orders, "audit": audit})})
    image = Dir(lambda: {"topics": topics, "provenance": File("7")})
    return Dir(lambda: {"image": image})


def test_find_lists_every_path_below_a_directory():
    assert Shell(tree()).run("find /image/topics/byName/audit").splitlines() == [
        "/image/topics/byName/audit", "/image/topics/byName/audit/id", "/image/topics/byName/audit/name",
        "/image/topics/byName/audit/0"]


def test_find_name_matches_the_last_component_by_glob():
    shell = Shell(tree())
    assert shell.run("find /image -name orders") == "/image/topics/byName/orders"
    assert shell.run("find -name 'ord*'") == "/image/topics/byName/orders"
    assert shell.run("find /image -name nothing") == ""
    assert shell.run("find /image/topics -name id").splitlines() == [
        "/image/topics/byName/orders/id", "/image/topics/byName/audit/id"]


def test_find_type_keeps_directories_or_files():
    shell = Shell(tree())
    assert shell.run("find /image/topics -type d").splitlines() == [
        "/image/topics", "/image/topics/byName", "/image/topics/byName/orders", "/image/topics/byName/audit"]
    assert shell.run("find /image -name 'o*' -type f") == ""


@pytest.mark.parametrize("line, message", [
    ("find /image -size 3", "find: unknown option -size"),
    ("find /image -name", "find: -name needs a value"),
    ("find /image -type x", "find: -type takes d or f"),
    ("find /image /image/topics", "find: one PATH at most"),
    ("find /nowhere -name x", "find: /nowhere: no such file or directory"),
])
def test_bad_find_arguments_are_one_error(line, message):
    with pytest.raises(ShellError, match=message):
        Shell(tree()).run(line)


def test_the_image_tree_shows_scram_users_without_their_secrets():
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.metadata.delta import MetadataDelta
    from quorum.metadata.image import MetadataImage
    from quorum.security.scram import MECHANISMS
    from quorum.shell.tree import image_tree

    m = MECHANISMS["SCRAM-SHA-256"]
    c = m.new_credential("pw", 8192)
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(pb.UserScramCredentialRecord(name="alice", mechanism=m.code, salt=c.salt, stored_key=c.stored_key,
                                              server_key=c.server_key, iterations=c.iterations))
    shell = Shell(image_tree(delta.apply()))
    assert shell.run("find /image/scramCredentials") == ("/image/scramCredentials\n/image/scramCredentials/alice\n"
                                                         "/image/scramCredentials/alice/SCRAM-SHA-256")
    assert shell.run("cat /image/scramCredentials/alice/SCRAM-SHA-256") == '{"iterations": 8192}'
