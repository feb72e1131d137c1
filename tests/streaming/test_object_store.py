"""The warehouse on object storage, against a real S3 API server (moto's server mode on 127.0.0.1):
the materialiser's tables there equal the controller's image, read back by a second engine
(DataFusion, through `sparkraft sql` in another process); a store that does not refuse conditional
writes is refused in one line; a store paused in the middle of a micro-batch (a write that fails
half way) loses and doubles nothing once the batch is replayed; maintenance commits beside the
materialiser."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from test_materializer import as_batch, busy_controller, log_rows, table_rows

from delta_tables import storage
from delta_tables.bootstrap import image_from_cut
from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import IMAGE_TABLES, PARTITIONS, RECORDS
from delta_tables.storage import StorageError
from delta_tables.writer import DeltaRsWriter
from streaming.materializer import Materializer

sys.path.insert(0, str(Path(__file__).parent.parent))
from s3_server import NoConditionalWritesProxy, S3Server  # noqa: E402

pytestmark = pytest.mark.slow

BUCKET = "sparkraft-warehouse"


@pytest.fixture(scope="module")
def s3():
    server = S3Server()
    server.create_bucket(BUCKET)
    yield server
    server.close()


@pytest.fixture
def warehouse(s3):
    """A fresh s3:// warehouse, with this process's storage options pointing at the server."""
    storage.set_options(s3.options())
    yield f"s3://{BUCKET}/{uuid.uuid4().hex}"
    storage.set_options({})


def sparkraft(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkraft", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def flags(s3) -> list[str]:
    return [arg for k, v in s3.options().items() for arg in ("--storage-option", f"{k}={v}")]


def test_tables_on_s3_equal_the_image_and_another_engine_reads_them(s3, warehouse, tmp_path):
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(warehouse))
    m.process(as_batch(rows[: len(rows) // 2]))
    m.process(as_batch(rows[len(rows) // 2:]))
    image, next_offset = image_from_cut(warehouse)
    assert image == c.core.image and next_offset == c.end_offset

    # the same tables on a local disk, for a row-by-row comparison through the same reader
    local = tmp_path / "local"
    Materializer(DeltaRsWriter(local)).process(as_batch(rows))
    for table in IMAGE_TABLES:
        assert table_rows(warehouse, table) == table_rows(local, table), table

    # a second engine in another process, configured only by --storage-option
    result = sparkraft("sql", 'SELECT name, partition_count FROM topics ORDER BY name', "--warehouse", warehouse,
                       "--json", *flags(s3))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"name": t.name, "partition_count": len(t.partitions)}
                                         for t in sorted(c.core.image.topics.by_id.values(), key=lambda t: t.name)]
    result = sparkraft("sql", "SELECT 1 FROM topics", "--warehouse", warehouse)  # no options: not this server
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr


def test_a_store_without_conditional_writes_is_refused_in_one_line(s3, tmp_path):
    proxy = NoConditionalWritesProxy(s3.port)
    try:
        storage.set_options(s3.options(proxy.endpoint))
        warehouse = f"s3://{BUCKET}/{uuid.uuid4().hex}"
        with pytest.raises(StorageError, match="does not refuse a conditional write"):
            DeltaRsWriter(warehouse).ensure_tables()
        proxied = [arg.replace(s3.endpoint, proxy.endpoint) for arg in flags(s3)]
        result = subprocess.run([sys.executable, "jobs/maintenance.py", "--warehouse", warehouse, *proxied],
                                capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().startswith("ERROR: the object store of") and \
            len(result.stderr.strip().splitlines()) == 1, result.stderr
        storage.set_options({**s3.options(proxy.endpoint), storage.UNSAFE_OPT_IN: "true"})  # accepted, one writer
        DeltaRsWriter(warehouse).ensure_tables()
    finally:
        storage.set_options({})
        proxy.close()


def test_a_store_paused_in_the_middle_of_a_batch_loses_and_doubles_nothing(s3, warehouse, monkeypatch):
    """The store stops answering after ``records`` is committed and before ``partitions`` is: the
    batch fails half way (short timeouts, no retries). The replayed batch completes the tables it
    had not reached and adds nothing twice."""
    storage.set_options({**s3.options(), "timeout": "2s", "connect_timeout": "1s", "max_retries": "0"})
    c = busy_controller()
    rows = log_rows(c)
    writer = DeltaRsWriter(warehouse)
    real_merge = writer.merge_state

    def pause_at_partitions(table, *args, **kwargs):
        if table == PARTITIONS:
            s3.proc.send_signal(signal.SIGSTOP)
            threading.Timer(4.0, s3.proc.send_signal, (signal.SIGCONT,)).start()
        return real_merge(table, *args, **kwargs)

    monkeypatch.setattr(writer, "merge_state", pause_at_partitions)
    with pytest.raises(Exception):
        Materializer(writer).process(as_batch(rows))
    monkeypatch.undo()
    threading.Event().wait(4.5)  # the store is back
    storage.set_options(s3.options())
    Materializer(DeltaRsWriter(warehouse)).process(as_batch(rows))  # the job restarted: the batch replayed
    cut = latest_cut(warehouse)
    assert cut.offset == c.end_offset - 1
    offsets = read_table(tables_at(warehouse, cut)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(c.end_offset))
    assert image_from_cut(warehouse)[0] == c.core.image


def test_maintenance_commits_beside_the_materialiser_on_s3(s3, warehouse):
    from jobs.maintenance import maintain

    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(warehouse))
    errors = []

    def maintain_meanwhile():
        try:
            for _ in range(3):
                maintain(warehouse, retention_hours=1)  # nothing a running writer reads is vacuumed
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=maintain_meanwhile)
    m.process(as_batch(rows[:8]))
    t.start()
    for i in range(8, len(rows), 8):
        m.process(as_batch(rows[i:i + 8]))
    t.join(120)
    assert not errors, errors
    assert image_from_cut(warehouse)[0] == c.core.image
    offsets = read_table(tables_at(warehouse, latest_cut(warehouse))[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(c.end_offset))


def test_spark_reads_an_s3_warehouse_with_deltas_reader_over_s3a(s3, warehouse):
    """`sql --engine spark` on an s3:// warehouse: Delta's Spark reader through Hadoop's s3a file
    system (hadoop-aws, resolved with Delta's jars), configured from the same --storage-option
    keys as delta-rs; the rows DataFusion reads, the change feed included."""
    from delta_tables.spark_session import delta_jars

    if delta_jars() is None:
        pytest.skip("Delta's Spark connector is not resolved (python scripts/fetch_jars.py; .ci/run does it)")
    rows = log_rows(busy_controller())
    m = Materializer(DeltaRsWriter(warehouse))
    m.process(as_batch(rows[: len(rows) // 2]))
    m.process(as_batch(rows))
    for sql in ('SELECT topic_name, "partition", leader, isr FROM partitions ORDER BY topic_name, "partition"',
                "SELECT _change_type, name, _commit_offset FROM table_changes('topics', 0, 1000000) "
                "ORDER BY _commit_offset, name, _change_type"):
        on_spark = sparkraft("sql", sql, "--warehouse", warehouse, "--engine", "spark", "--json", *flags(s3),
                             timeout=600)  # a JVM's start, on a loaded machine
        assert on_spark.returncode == 0, on_spark.stderr[-3000:]
        on_datafusion = sparkraft("sql", sql, "--warehouse", warehouse, "--json", *flags(s3))
        assert on_datafusion.returncode == 0, on_datafusion.stderr
        assert json.loads(on_spark.stdout) == json.loads(on_datafusion.stdout) != [], sql
    assert s3.options()["AWS_SECRET_ACCESS_KEY"] not in on_spark.stdout + on_spark.stderr
