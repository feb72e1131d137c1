"""``sparkraft console`` as a process over a real warehouse (a busy history materialised in several
micro-batches by the real materialiser): each page's figures equal the tables read independently
at the same cut, at every cut; bad input is a clear message and changes nothing; the SQL box runs
reads only and its CSV equals DataFusion's answer; a new cut reaches an open event stream; the
console listens beyond loopback only over TLS with a client certificate."""
from __future__ import annotations

import csv
import io
import json
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "streaming"))
from conftest import free_ports, sparkraft_cmd, wait_for  # noqa: E402
from test_materializer import as_batch, busy_controller, log_rows  # noqa: E402

from delta_tables.changes import changes  # noqa: E402
from delta_tables.cut import latest_cut, read_table, tables_at  # noqa: E402
from delta_tables.schemas import SNAPSHOTS  # noqa: E402
from delta_tables.sql import query_datafusion  # noqa: E402
from delta_tables.writer import DeltaRsWriter  # noqa: E402
from quorum.controller import api  # noqa: E402
from streaming.materializer import Materializer  # noqa: E402

pytestmark = pytest.mark.slow


def materialised(wh: Path):
    """The busy controller, its materialiser, and the warehouse it wrote in batches of 7 records."""
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(wh))
    for i in range(0, len(rows), 7):
        m.process(as_batch(rows[i:i + 7]))
    return c, m, len(rows)


class Console:
    """``sparkraft console`` on a free port of ``host``, reached at 127.0.0.1."""

    def __init__(self, wh: Path, *extra: str, host: str = "127.0.0.1", scheme: str = "http", context=None):
        self.port = free_ports(1)[0]
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.context = context
        self.proc = subprocess.Popen(sparkraft_cmd("console", "--warehouse", str(wh), "--listen", f"{host}:{self.port}",
                                                   *extra),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(self._up, 60, "the console to answer")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the console exited {self.proc.returncode}: {self.proc.stdout.read().decode()}")
        try:
            return self.get("/")[0] in (200, 400)
        except (urllib.error.URLError, ConnectionError, ssl.SSLError):
            return False

    def get(self, path: str, timeout: float = 30) -> tuple[int, str, dict]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout, context=self.context) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def post(self, path: str, timeout: float = 30, headers: dict | None = None, **form: str) -> tuple[int, str, dict]:
        """A form posted as the console's own page posts it (an Origin of the console's own)."""
        data = urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(self.url + path, data=data, method="POST", headers={
            "Origin": self.url, "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.context) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def close(self) -> str:
        self.proc.terminate()
        try:
            code = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        out = self.proc.stdout.read().decode()
        assert code == 0, f"the console's exit after SIGTERM: {code}\n{out}"
        assert out.rstrip().endswith("Stopped (SIGTERM)"), out
        return out


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    wh = tmp_path_factory.mktemp("console") / "wh"
    c, _, _ = materialised(wh)
    console = Console(wh)
    yield console, wh, c
    out = console.close()
    assert "Traceback" not in out, out


def cell_texts(html: str, table_id: str) -> list[list[str]]:
    """The text of each body row's cells of table ``table_id``."""
    body = re.search(rf'<table id="{table_id}"[^>]*>.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body, f"no table {table_id}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body[1], re.S)
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in rows]


def value(html: str, element_id: str) -> str:
    m = re.search(rf'id="{element_id}"[^>]*>(.*?)</', html, re.S)
    assert m, f"no element {element_id}"
    return re.sub(r"\s+", " ", m[1]).strip()


def partition_rows(html: str) -> dict[int, list[str]]:
    """A page's partition rows: partition id -> its cells' text."""
    return {int(name.rsplit("-", 1)[1]): [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for name, row in re.findall(r'<tr data-partition="([^"]+)"[^>]*>(.*?)</tr>', html, re.S)}


def cut_offsets(wh: Path) -> list[int]:
    return sorted(read_table(tables_at(str(wh), None)[SNAPSHOTS]).column("offset").to_pylist())


def test_every_page_at_every_cut_shows_what_the_tables_hold_at_that_cut(served):
    console, wh, _ = served
    for offset in cut_offsets(wh):
        tables = {name: read_table(t).to_pylist() for name, t in tables_at(str(wh), latest_cut(str(wh), offset)).items()}
        status, html, headers = console.get(f"/?at={offset}")
        assert status == 200, html
        assert "default-src 'self'" in headers["content-security-policy"]
        parts = tables["partitions"]
        assert value(html, "topic-count") == str(len(tables["topics"]))
        assert value(html, "partition-count") == str(len(parts))
        assert value(html, "urp-count") == str(sum(len(p["isr"]) < len(p["replicas"]) for p in parts))
        assert value(html, "offline-count") == str(sum(p["leader"] == -1 for p in parts))
        shown = {row[0]: row[1] for row in cell_texts(html, "brokers") if len(row) > 1}
        expected = {str(b["broker_id"]): "fenced" if b["fenced"] else
                    ("controlled shutdown" if b["in_controlled_shutdown"] else "active") for b in tables["brokers"]}
        assert shown == expected, offset

        status, html, _ = console.get(f"/topics?at={offset}")
        assert status == 200
        assert sorted(row[0] for row in cell_texts(html, "topics")) == sorted(t["name"] for t in tables["topics"])
        for t in tables["topics"]:
            status, html, _ = console.get(f"/topics/{t['name']}?at={offset}")
            assert status == 200
            shown = {pid: (cells[1], cells[3]) for pid, cells in partition_rows(html).items()}
            assert shown == {p["partition"]: (str(p["leader"]) if p["leader"] >= 0 else "none",
                                              ", ".join(map(str, p["isr"])) or "—")
                             for p in parts if p["topic_id"] == t["topic_id"]}, (offset, t["name"])


def test_the_partitions_page_searches_and_filters_what_the_tables_hold(served):
    console, wh, _ = served
    for offset in cut_offsets(wh):
        parts = read_table(tables_at(str(wh), latest_cut(str(wh), offset))["partitions"]).to_pylist()
        cases = {
            "": parts,
            "q=ORD": [p for p in parts if "ord" in p["topic_name"].lower()],
            "leader=1": [p for p in parts if p["leader"] == 1],
            "only=under_replicated": [p for p in parts if len(p["isr"]) < len(p["replicas"])],
            "only=offline&q=pay": [p for p in parts if p["leader"] == -1 and "pay" in p["topic_name"]],
        }
        for query, expected in cases.items():
            status, html, _ = console.get(f"/partitions?at={offset}&{query}")
            assert status == 200, html
            shown = re.findall(r'<tr data-partition="([^"]+)"', html)
            assert shown == [f"{p['topic_name']}-{p['partition']}" for p in
                             sorted(expected, key=lambda p: (p["topic_name"], p["partition"]))], (offset, query)


def test_a_topic_page_shows_its_partitions_configs_and_links_each_row_to_its_record(served):
    console, wh, _ = served
    status, html, _ = console.get("/topics/orders")
    assert status == 200
    cut = latest_cut(str(wh))
    parts = sorted((p for p in read_table(tables_at(str(wh), cut)["partitions"]).to_pylist() if p["topic_name"] == "orders"),
                   key=lambda p: p["partition"])
    rows = partition_rows(html)
    assert sorted(rows) == [p["partition"] for p in parts]
    for p in parts:
        assert rows[p["partition"]][1] == (str(p["leader"]) if p["leader"] >= 0 else "none")
        assert rows[p["partition"]][-1] == str(p["last_offset"])  # the record that last wrote it, linked
        assert f'href="/records/{p["last_offset"]}"' in html
    assert [r[:3] for r in cell_texts(html, "configs")] == [["cleanup.policy", "compact", "topic"]]
    status, record, _ = console.get(f"/records/{parts[0]['last_offset']}")
    assert status == 200 and "PARTITION" in value(record, "record-json") + record


def test_the_diff_of_two_cuts_names_each_change_and_counts_what_the_change_feed_holds(served):
    console, wh, _ = served
    cuts = cut_offsets(wh)
    a, b = cuts[0], cuts[-1]
    status, html, _ = console.get(f"/diff?from={a}&to={b}")
    assert status == 200, html
    feed = changes(str(wh), a, b)
    created = [r["name"] for r in feed["topics"].to_pylist() if r["_change_type"] == "insert"]
    kinds = {}
    for row in cell_texts(html, "diff-changes"):
        kinds.setdefault(row[1], []).append(row[2])
    # (which topics a diff of these cuts shows created depends on where the batches of 7 records end)
    assert sorted(kinds["topic created"]) == sorted(created) and {"orders", "payments"} <= set(created)
    # a created topic links to its TopicRecord
    linked = re.findall(r'<tr data-kind="topic created">.*?href="/records/(\d+)"', html, re.S)
    assert [json.loads(console.get(f"/records/{o}")[1].split('id="record-json">')[1].split("</pre>")[0]
                       .replace("&#34;", '"'))["name"] for o in linked] == kinds["topic created"]
    before = {(r["topic_name"], r["partition"], r["_commit_offset"]): r["leader"]
              for r in feed["partitions"].to_pylist() if r["_change_type"] == "update_preimage"}
    moved = {f"{r['topic_name']}-{r['partition']}" for r in feed["partitions"].to_pylist()
             if r["_change_type"] == "update_postimage"
             and before[(r["topic_name"], r["partition"], r["_commit_offset"])] != r["leader"]}
    assert "topic orders: retention.ms" in kinds["config deleted"]
    assert kinds["broker fenced"] == ["broker 0 (epoch 3)"]  # its registration's offset, after the two feature records
    leader_moves = {w.split(":")[0] for w in kinds["leader moved"]}
    assert leader_moves == moved == {"orders-0", "orders-2", "payments-0", "payments-2"}
    # the same two cuts asked the other way round give the same answer
    assert cell_texts(console.get(f"/diff?from={b}&to={a}")[1], "diff-changes") == cell_texts(html, "diff-changes")


def test_sql_answers_as_datafusion_does_downloads_csv_and_runs_reads_only(served, tmp_path):
    console, wh, _ = served
    sql = 'SELECT name, partition_count FROM topics ORDER BY name'
    status, html, _ = console.post("/sql", q=sql)
    assert status == 200, html
    expected = query_datafusion(str(wh), sql).to_pylist()
    assert cell_texts(html, "sql-result") == [[r["name"], str(r["partition_count"])] for r in expected]
    status, body, headers = console.post("/sql.csv", q='SELECT * FROM partitions ORDER BY topic_name, "partition"')
    assert status == 200 and headers["content-type"].startswith("text/csv")
    assert "attachment" in headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(body)))
    table = query_datafusion(str(wh), 'SELECT * FROM partitions ORDER BY topic_name, "partition"').to_pylist()
    assert [(r["topic_name"], int(r["partition"]), json.loads(r["replicas"])) for r in rows] == \
        [(r["topic_name"], r["partition"], r["replicas"]) for r in table]
    # writes and file reads are refused before DataFusion sees them: no file appears
    target = tmp_path / "copied.csv"
    for refused in (f"COPY (SELECT 1) TO '{target}'", f"CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '{target}'",
                    "SELECT 1; SELECT 2", "DROP TABLE topics"):
        status, html, _ = console.post("/sql", q=refused)
        assert status == 400 and ("reads only" in html or "one statement" in html), (refused, html)
        status, _, _ = console.post("/sql.csv", q=refused)
        assert status == 400
    assert not target.exists()


BAD_INPUT = [
    ("/?at=999999", 400, "is past the newest cut"),
    ("/?at=0", 400, "no consistent cut at or below offset 0"),
    ("/?at=-3", 400, "negative"),
    ("/?at=soon", 400, "is not a number"),
    ("/?time=yesterday", 400, "is not an ISO 8601 time"),
    ("/?time=1960-01-01T00:00:00Z", 400, "no cut at 1960-01-01"),
    ("/?at=10&time=1970-01-01T00:00:00Z", 400, "not both"),
    ("/topics/no-such-topic", 404, "no topic &#39;no-such-topic&#39;"),
    ("/brokers/77", 404, "no broker 77"),
    ("/brokers/x", 400, "broker id &#39;x&#39; is not a number"),
    ("/records/999999", 404, "no record at offset 999999"),
    ("/topics?only=broken", 400, "no such filter"),
    ("/partitions?only=broken", 400, "no such filter"),
    ("/partitions?leader=abc", 400, "leader &#39;abc&#39; is not a number"),
    ("/topics?start=-5", 400, "start -5 is negative"),
    ("/diff?from=1", 400, "a diff needs two offsets"),
    ("/records/99999999999999999999999", 400, "is past 9,223,372,036,854,775,807"),
    ("/partitions?leader=99999999999999999999", 400, "is past 2,147,483,647"),
    ("/brokers/99999999999999999999", 400, "is past 2,147,483,647"),
    ("/no/such/page", 404, "no page /no/such/page"),
]
BAD_QUERIES = [
    ("SELEC name FROM topics", "SELEC"),
    ("SELECT nope FROM topics", "nope"),
    ("SELECT * FROM missing", "the tables here"),
    ("SELECT * FROM table_changes('topics', 0, 99999999999999999999999)", "offsets are at most"),
]


def test_bad_input_is_a_clear_message_and_leaves_the_server_as_it_was(served):
    console, wh, _ = served
    before = console.get("/")[1]
    for path, status, message in BAD_INPUT:
        got, html, _ = console.get(path)
        assert got == status, (path, got, html[-500:])
        assert message in value(html, "error"), (path, html[-800:])
        assert "Traceback" not in html
    for sql, message in BAD_QUERIES:
        got, html, _ = console.post("/sql", q=sql)
        assert got == 400 and message in value(html, "error"), (sql, got, html[-800:])
    # a request far too large is refused by the server, not read
    got, _, _ = console.post("/sql", q="SELECT " + "1+" * 20_000 + "1")
    assert got == 400
    after = console.get("/")[1]
    assert value(after, "topic-count") == value(before, "topic-count") and console.proc.poll() is None


@pytest.mark.slow  # a query stopped at its 20 s limit
def test_queries_are_bounded_in_memory_and_time_and_run_off_the_pages_way(tmp_path):
    """A query that would take gigabytes (SELECT * FROM range(300000000) took the console to 2.1 GB)
    or run for minutes (a cross join) is stopped at the console's limits, in a child process of its
    own, with a one-line reason; the overview answers while a query runs, the console's own memory
    stays where it was, and no answer names the warehouse's path on the server's disk."""
    wh = tmp_path / "wh"
    materialised(wh)
    console = Console(wh, "--query-timeout", "20", "--query-memory", "300")
    try:
        before = _rss_mb(console.proc.pid)
        status, html, _ = console.post("/sql", 120, q="SELECT * FROM range(300000000)")
        assert status == 400 and "more than 300 MB of memory" in value(html, "error"), html[-800:]
        with ThreadPoolExecutor(1) as pool:
            long = pool.submit(console.post, "/sql", 120, None,
                               q="SELECT sum(a.value * b.value) FROM range(1000000) a, range(1000000) b")
            wait_for(lambda: _children(console.proc.pid), 30, "the query's process")
            status, _, _ = console.get("/")
            assert status == 200 and not long.done(), "the overview answered while the query ran"
            status, html, _ = long.result()
        assert status == 400 and "ran past 20 s" in value(html, "error"), html[-800:]
        # a browser that gives up (closes the connection) takes its query down with it
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            console.post("/sql", 2, None, q="SELECT sum(a.value * b.value) FROM range(1000000) a, range(1000000) b")
        wait_for(lambda: not _children(console.proc.pid), 10, "the abandoned query stopped")
        assert _rss_mb(console.proc.pid) < before + 100
        status, html, _ = console.post("/sql", q="EXPLAIN SELECT * FROM topics")
        assert status == 200 and "&lt;warehouse&gt;" in html, html[-2000:]
        assert str(wh) not in html, "the warehouse's path on the server's disk is not shown"
    finally:
        console.close()


def _children(pid: int) -> list[int]:
    """The query processes of console ``pid``: the children of its forkserver (sql_runner.py)."""
    def children(p: int) -> list[int]:
        return [int(c) for task in Path(f"/proc/{p}/task").iterdir() for c in (task / "children").read_text().split()]

    servers = [c for c in children(pid) if b"forkserver" in Path(f"/proc/{c}/cmdline").read_bytes()]
    return [q for server in servers for q in children(server)]


def test_only_its_own_pages_run_queries_and_only_its_own_names_are_served(served):
    """A query is a POST from the console's own pages: a GET shows it unrun, and a post from another
    site's page (its Origin, or Sec-Fetch-Site) is refused; a Host that is not one the console
    serves (DNS rebinding) gets 421."""
    console, _, _ = served
    status, html, _ = console.get("/sql?q=" + urllib.parse.quote("SELECT name FROM topics"))
    assert status == 200 and "sql-result" not in html and "SELECT name FROM topics" in html
    status, html, _ = console.post("/sql", headers={"Origin": "http://evil.example.com"}, q="SELECT 1")
    assert status == 403 and "sql-result" not in html
    status, html, _ = console.post("/sql", headers={"Sec-Fetch-Site": "cross-site"}, q="SELECT 1")
    assert status == 403
    request = urllib.request.Request(console.url + "/", headers={"Host": f"evil.example.com:{console.port}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 421
    request = urllib.request.Request(console.url + "/", headers={"Host": f"localhost:{console.port}"})
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.status == 200


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_new_cut_reaches_an_open_event_stream(tmp_path):
    wh = tmp_path / "wh"
    c, m, done = materialised(wh)
    console = Console(wh)
    try:
        stream = urllib.request.urlopen(console.url + "/events", timeout=30)
        first = json.loads(_next_event(stream))
        assert first == {"offset": latest_cut(str(wh)).offset}
        c.request(api.CreateTopicsRequest((api.CreatableTopic("appeared", 1, 2),)))
        m.process(as_batch(log_rows(c, start=done)))
        new = latest_cut(str(wh)).offset
        assert new > first["offset"]
        assert json.loads(_next_event(stream)) == {"offset": new}
        stream.close()
        status, html, _ = console.get("/topics")
        assert "appeared" in [row[0] for row in cell_texts(html, "topics")]
    finally:
        console.close()


def _next_event(stream) -> str:
    """The data of the next ``cut`` event (keepalive comments skipped)."""
    event = None
    while True:
        line = stream.readline().decode()
        assert line, "the event stream ended"
        if line.startswith("event: "):
            event = line[7:].strip()
        elif line.startswith("data: ") and event == "cut":
            return line[6:].strip()


def test_beyond_loopback_it_serves_only_https_to_holders_of_a_client_certificate(tmp_path):
    from pki import Pki

    wh = tmp_path / "wh"
    materialised(wh)
    port = free_ports(1)[0]
    refused = subprocess.run(sparkraft_cmd("console", "--warehouse", str(wh), "--listen", f"0.0.0.0:{port}"),
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "only over TLS with a login" in refused.stderr and "Traceback" not in refused.stderr
    pki = Pki(tmp_path / "pki")
    config = tmp_path / "console-tls.properties"
    config.write_text(f"ssl.keystore.location={pki.keystore('console')}\nssl.truststore.location={pki.truststore}\n"
                      f"ssl.client.auth=required\n")
    trusting = ssl.create_default_context(cafile=str(pki.truststore))
    holder = ssl.create_default_context(cafile=str(pki.truststore))
    holder.load_cert_chain(str(pki.keystore("operator")))
    console = Console(wh, "--tls-config", str(config), host="0.0.0.0", scheme="https", context=holder)
    try:
        status, html, _ = console.get("/")
        assert status == 200 and 'id="topic-count"' in html
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(console.url + "/", timeout=10, context=trusting).read()
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(console.url.replace("https", "http") + "/", timeout=10).read()
    finally:
        console.close()


def test_a_taken_port_is_one_line_and_exit_1_without_claiming_to_listen(served):
    console, wh, _ = served
    taken = subprocess.run(sparkraft_cmd("console", "--warehouse", str(wh), "--listen", f"127.0.0.1:{console.port}"),
                           capture_output=True, text=True, timeout=60)
    assert taken.returncode == 1, (taken.returncode, taken.stdout, taken.stderr)
    assert "Console at" not in taken.stdout, taken.stdout
    assert taken.stderr.count("\n") == 1 and "the port is taken" in taken.stderr, taken.stderr
    assert f"127.0.0.1:{console.port}" in taken.stderr
    assert console.get("/")[0] == 200  # the console that holds the port is untouched


def test_the_audit_page_says_who_changed_what_filtered(tmp_path):
    """Entries of three principals (one refused) materialised by the real materialiser: the page
    lists them, each filter narrows them as ``sparkraft audit`` does, and a bad filter is a clear
    400 that changes nothing."""
    wh = tmp_path / "wh"
    c = _audited_controller()
    Materializer(DeltaRsWriter(wh)).process(as_batch(log_rows(c)))
    console = Console(wh)
    try:
        status, html, _ = console.get("/audit")
        assert status == 200 and "User:alice" in html and "User:bob" in html and "User:mallory" in html
        _, bobs, _ = console.get("/audit?principal=User:bob")
        assert "User:bob" in bobs and "User:alice" not in bobs and "DeleteTopics" in bobs
        _, denied, _ = console.get("/audit?outcome=denied")
        assert denied.count('data-outcome="denied"') == 1 and "User:mallory" in denied
        _, orders, _ = console.get("/audit?resource=TOPIC:orders")
        assert orders.count("<tr data-outcome") == 2  # created by alice, deleted by bob
        status, bad, _ = console.get("/audit?since=yesterday")
        assert status == 400 and "is not an ISO 8601 time" in bad
    finally:
        console.close()


def _audited_controller():
    """A controller that handled alice's creations (orders, payments), bob's deletion of orders and
    mallory's refused creation."""
    from quorum.controller import registry
    from quorum.controller.audit import AuditContext
    from quorum.controller.local import LocalController
    from quorum.errors import Errors, SparkraftError

    c = LocalController()
    epoch = c.request(api.RegisterBrokerRequest(0, c.cluster_id, "Inc000xxxxxxxxxxxxx000", ())).broker_epoch
    c.request(api.BrokerHeartbeatRequest(0, epoch, c.end_offset))
    alice = AuditContext("User:alice", "10.0.0.7", "CONTROLLER", ("apache-kafka-java", "4.4.0"))
    bob, mallory = AuditContext("User:bob", "10.0.0.8", "grpc"), AuditContext("User:mallory", "10.6.6.6", "wire")
    c.propose(c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("orders", 1, 1),)), c.now, alice))
    c.propose(c.core.handle(api.DeleteTopicsRequest(("orders",)), c.now, bob))
    c.propose(c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("payments", 1, 1),)), c.now, alice))
    create = api.CreateTopicsRequest((api.CreatableTopic("evil", 1, 1),))
    c.propose(c.core.refused(registry.row_of(create), create, SparkraftError(
        Errors.TOPIC_AUTHORIZATION_FAILED, "User:mallory may not CREATE topic evil"), c.now, mallory))
    return c


def _audited_warehouse(wh):
    """_audited_controller's log materialised in two cuts: up to alice's creation of orders, then
    the rest (bob's deletion of it, alice's payments); the first cut's offset."""
    rows = log_rows(_audited_controller())
    created = next(i for i, r in enumerate(rows) if r[3] == "AUDIT_RECORD" and "CreateTopics" in r[5]) + 1
    m = Materializer(DeltaRsWriter(wh))
    m.process(as_batch(rows[:created]))
    first = latest_cut(str(wh)).offset
    m.process(as_batch(rows[created:]))
    return first


def test_the_changes_say_who_made_each_one_deletions_too(tmp_path):
    """``changes(..., who=True)`` (``sparkraft changes --who``): each change's principal, a
    deletion's from the entry that named the deleted row's resource after its last writer."""
    wh = tmp_path / "wh"
    first = _audited_warehouse(wh)
    topics = changes(str(wh), first, latest_cut(str(wh)).offset, ("topics",), who=True)["topics"]
    by = {(r["name"], r["_change_type"]): r["_changed_by"] for r in topics.to_pylist()}
    assert by == {("orders", "delete"): "User:bob", ("payments", "insert"): "User:alice"}
    partitions = changes(str(wh), first, latest_cut(str(wh)).offset, ("partitions",), who=True)["partitions"]
    assert sorted((r["topic_name"], r["_changed_by"]) for r in partitions.to_pylist()) == [
        ("orders", "User:bob"), ("payments", "User:alice")]
    plain = changes(str(wh), first, latest_cut(str(wh)).offset, ("topics",))["topics"]
    assert "_changed_by" not in plain.column_names  # the contract's columns unless asked


def test_the_diff_says_who_deleted_a_topic(tmp_path):
    wh = tmp_path / "wh"
    first = _audited_warehouse(wh)
    console = Console(wh)
    try:
        status, html, _ = console.get(f"/diff?from={first}&to={latest_cut(str(wh)).offset}")
        assert status == 200
        deleted = re.search(r'<tr data-kind="topic deleted">.*?</tr>', html, re.S).group(0)
        assert 'class="by"><a href="/audit?principal=User%3Abob">User:bob</a>' in deleted, deleted
    finally:
        console.close()


def test_a_topics_page_and_the_timeline_say_who_changed_it(tmp_path):
    wh = tmp_path / "wh"
    _audited_warehouse(wh)
    console = Console(wh)
    try:
        status, html, _ = console.get("/topics/payments")
        assert status == 200
        history = re.search(r'<table id="history">.*?</table>', html, re.S).group(0)
        assert history.count("<tr data-outcome") == 1 and "User:alice" in history and "CreateTopics" in history
        assert 'class="by" href="/audit?principal=User%3Aalice">User:alice</a>' in html  # the last change's
        status, html, _ = console.get("/timeline")
        data = json.loads(re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>', html,
                                    re.S).group(1))
        who = ", ".join(data["who"])
        assert "User:alice ×2" in who and "User:bob" in who and "User:mallory" not in who  # refused: no change
    finally:
        console.close()


def test_a_past_cut_offers_the_plan_to_return_to_it_and_applies_nothing(tmp_path):
    wh = tmp_path / "wh"
    first = _audited_warehouse(wh)
    newest = latest_cut(str(wh)).offset
    console = Console(wh)
    try:
        status, page, _ = console.get(f"/topics?at={first}")
        assert status == 200 and f'href="/revert?at={first}"' in page  # a past cut offers it
        status, live, _ = console.get("/topics")
        assert 'id="revert-link"' not in live  # the newest cut has nothing to return to
        status, page, _ = console.get(f"/revert?at={first}")
        assert status == 200
        steps = re.findall(r'<tr data-kind="([\w-]+)"><td>\d+</td><td>\w+</td><td>([^<]*)</td>', page)
        assert steps == [("create-topic", "create topic orders (1 partitions, replication factor 1)"),
                         ("delete-topic", "delete topic payments (1 partitions)")], steps
        assert "orders&#39;s data" in page or "orders's data" in page
        assert f"--to-offset {first} --plan-out plan.json" in page
    finally:
        console.close()
    assert latest_cut(str(wh)).offset == newest, "the console applied nothing"


def test_the_diff_says_who_made_each_change(tmp_path):
    """A diff across alice's creation links the topic's change to User:alice (through the audit entry
    whose records hold it)."""
    wh = tmp_path / "wh"
    c = _audited_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(wh))
    m.process(as_batch(rows[:4]))
    first = latest_cut(str(wh)).offset
    m.process(as_batch(rows[4:]))
    console = Console(wh)
    try:
        status, html, _ = console.get(f"/diff?from={first}&to={latest_cut(str(wh)).offset}")
        assert status == 200
        created = re.search(r'<tr data-kind="topic created">.*?</tr>', html, re.S).group(0)
        assert 'class="by"><a href="/audit?principal=User%3Aalice">User:alice</a>' in created, created
    finally:
        console.close()
