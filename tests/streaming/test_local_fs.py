"""Hadoop's local file system without a process for each file (delta_tables/local_fs.py): the
session's checkpoints go through it, it behaves as Hadoop's own (modes, symbolic links), and
without a JDK sessions keep Hadoop's own."""
from __future__ import annotations

import os
import stat
import zipfile

import pytest

from delta_tables import local_fs


def _hadoop(spark):
    jvm = spark.sparkContext._jvm
    return jvm, spark.sparkContext._jsc.hadoopConfiguration()


def test_the_sessions_file_system_is_ours_through_both_of_hadoops_apis(spark, tmp_path):
    jvm, conf = _hadoop(spark)
    path = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}")
    assert path.getFileSystem(conf).getClass().getName() == local_fs.CLASS
    file_context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(path.toUri(), conf)
    assert file_context.getDefaultFileSystem().getClass().getName() == f"{local_fs.CLASS}$Fs"


def test_a_file_gets_the_mode_hadoop_gives_it(spark, tmp_path):
    """Hadoop's default mode for a new file (0666) less its umask (022): 0644, set by the JDK; an
    explicit mode is set as asked."""
    jvm, conf = _hadoop(spark)
    fs = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}").getFileSystem(conf)
    out = fs.create(jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/default"), True)
    out.write(bytearray(b"x"))
    out.close()
    assert stat.S_IMODE(os.stat(tmp_path / "default").st_mode) == 0o644
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/default"),
                     jvm.org.apache.hadoop.fs.permission.FsPermission(0o640))
    assert stat.S_IMODE(os.stat(tmp_path / "default").st_mode) == 0o640


def test_symbolic_links_are_told_as_hadoops_own_tells_them(spark, tmp_path):
    """A file, a symbolic link, a dangling one and a missing path: the same status (or the same
    error) from ours as from Hadoop's own raw local file system."""
    jvm, conf = _hadoop(spark)
    (tmp_path / "target").write_text("data")
    os.symlink(tmp_path / "target", tmp_path / "link")
    os.symlink(tmp_path / "missing", tmp_path / "dangling")
    Path = jvm.org.apache.hadoop.fs.Path
    ours = Path(f"file://{tmp_path}").getFileSystem(conf).getRawFileSystem()
    assert ours.getClass().getName() == f"{local_fs.CLASS}$Raw"
    hadoops = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    hadoops.initialize(jvm.java.net.URI("file:///"), conf)

    def told(fs, name):
        try:
            status = fs.getFileLinkStatus(Path(f"file://{tmp_path}/{name}"))
        except Exception as e:  # py4j's error, naming Java's
            return "FileNotFoundException" if "FileNotFoundException" in str(e) else str(e)
        target = status.getSymlink().toString() if status.isSymlink() else None
        return status.isSymlink(), status.isFile(), status.getLen(), target

    for name in ("target", "link", "dangling", "absent"):
        assert told(ours, name) == told(hadoops, name), name
    assert told(ours, "target") == (False, True, 4, None)
    assert told(ours, "absent") == "FileNotFoundException"


def test_a_streaming_querys_checkpoint_is_written_through_it(spark, tmp_path):
    """Three micro-batches: their offset and commit logs are there, each file with Hadoop's mode."""
    ck = tmp_path / "ck"
    query = (spark.readStream.format("rate").option("rowsPerSecond", 10).load().writeStream
             .foreachBatch(lambda df, batch: None).trigger(processingTime="100 milliseconds")
             .option("checkpointLocation", str(ck)).start())
    try:
        query.processAllAvailable()
        while (query.lastProgress or {}).get("batchId", -1) < 2:
            query.awaitTermination(0.2)
    finally:
        query.stop()
    for log in ("offsets", "commits"):
        written = [p for p in (ck / log).iterdir() if p.name.isdigit()]
        assert len(written) >= 3, (log, sorted(os.listdir(ck / log)))
        assert {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o644}


def test_the_jar_is_built_once_for_its_source_and_not_at_all_without_a_jdk(tmp_path, monkeypatch):
    jar = local_fs.build(tmp_path)
    assert jar == local_fs.jar_path(tmp_path) and jar.name.startswith("nio-local-fs-")
    with zipfile.ZipFile(jar) as z:
        assert "io/sparkraft/hadoop/NioLocalFileSystem$Fs.class" in z.namelist()
    built_at = jar.stat().st_mtime_ns
    assert local_fs.build(tmp_path) == jar and jar.stat().st_mtime_ns == built_at  # kept, not built again
    assert local_fs.spark_confs(tmp_path)["spark.driver.extraClassPath"] == str(jar)

    monkeypatch.setenv("PATH", str(tmp_path / "no-jdk"))
    assert local_fs.build(tmp_path / "elsewhere") is None
    assert local_fs.spark_confs(tmp_path / "elsewhere") == {}  # sessions keep Hadoop's own
    monkeypatch.setenv("SPARKRAFT_LOCAL_FS", "hadoop")
    assert local_fs.spark_confs(tmp_path) == {}  # the way back, though the jar is there
