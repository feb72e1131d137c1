"""When a Spark driver is started with the class archive (delta_tables/jvm_archive.py): mapped where
it exists, never while another process makes it, made again by one builder when its maker died."""
from __future__ import annotations

import os
import time

import pytest

from delta_tables import jvm_archive


@pytest.fixture
def builders(monkeypatch):
    """The builders this process would start (counted here, never started: the slow test starts one)."""
    started = []
    monkeypatch.setattr(jvm_archive, "_start_builder", lambda: started.append(1))
    monkeypatch.delenv("SPARKRAFT_JVM_ARCHIVE", raising=False)
    return started


def test_an_archive_that_exists_is_mapped_quietly(tmp_path, builders):
    path = jvm_archive.archive_path("/a.jar", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    options = jvm_archive.java_options("/a.jar", tmp_path)
    assert options.split() == [f"-XX:SharedArchiveFile={path}", "-Xlog:cds*=off"]
    assert builders == []


def test_another_class_path_is_another_archive(tmp_path):
    assert jvm_archive.archive_path("/a.jar", tmp_path) != jvm_archive.archive_path("", tmp_path)
    assert jvm_archive.archive_path("", tmp_path) == jvm_archive.archive_path("", tmp_path)


def test_without_an_archive_one_builder_is_started_and_the_driver_starts_as_before(tmp_path, builders):
    assert jvm_archive.java_options("", tmp_path) == ""
    assert builders == [1]


def test_no_builder_while_another_is_at_work_and_one_when_it_died(tmp_path, builders):
    lock = jvm_archive.archive_path("", tmp_path).with_suffix(".building")
    lock.parent.mkdir(parents=True)
    lock.touch()
    assert jvm_archive.java_options("", tmp_path) == ""
    assert builders == []
    assert not jvm_archive.take_lock(lock)
    old = time.time() - jvm_archive.STALE_LOCK_S - 1
    os.utime(lock, (old, old))  # its builder was SIGKILLed long ago
    assert jvm_archive.java_options("", tmp_path) == ""
    assert builders == [1]
    assert jvm_archive.take_lock(lock)  # the builder's own claim
    assert not jvm_archive.take_lock(lock)


def test_off_means_no_archive_and_no_builder(tmp_path, builders, monkeypatch):
    path = jvm_archive.archive_path("", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    monkeypatch.setenv("SPARKRAFT_JVM_ARCHIVE", "off")
    assert jvm_archive.java_options("", tmp_path) == ""
    path.unlink()
    assert jvm_archive.java_options("", tmp_path) == ""
    assert builders == []
