"""`python -m job share` and `python -m job serve` on the real PostgreSQL, after a real tick (against
the fake Ray of tests/fake_ray.py): the share table, /metrics parsed as Prometheus parses it,
/healthz, the read-only role, the status page in a real headless Chromium, and the example alert
rules and Grafana dashboard of k8s/monitoring held against the metrics actually served."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import psycopg
import pytest
import yaml
from cli_helpers import run_cli, run_process
from fake_ray import FakeRay
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql
from psycopg.types.json import Jsonb

from job import api
from job.devtools.local_postgres import with_database
from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.serve.server import Source, make_server
from job.store.connection import connect, read_only

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "k8s" / "monitoring"
FAKE = "http://fake-ray.invalid:8265"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.fixture
def demo(conn, database_url, monkeypatch):
    """Two groups; alice (1 share) and bob (3) with jobs in `cpu`, carol with usage only; one real
    tick placed what fits on the fake Ray's two nodes of 4 CPUs and gave the rest their reasons."""
    conn.execute("INSERT INTO resource_groups (name, clusters, policy) "
                 "VALUES ('cpu', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 'fairshare'), "
                 "('idle', jsonb_build_array(jsonb_build_object('name', 'c', 'address', %s::text)), 'fifo')", (FAKE, FAKE))
    conn.execute("INSERT INTO users (name, shares) VALUES ('alice', 1), ('bob', 3), ('carol', 1)")
    conn.execute("INSERT INTO user_usage (group_name, user_name, usage) VALUES ('cpu', 'carol', 120)")
    ids = [api.submit(user=user, group="cpu", entrypoint="true", resources={"CPU": cpus}, database_url=database_url)
           for user, cpus in [("alice", 2), ("alice", 2), ("alice", 2), ("bob", 2), ("bob", 2), ("bob", 4)]]
    ray = FakeRay()
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: ray)
    results = tick.run_tick(TickConfig(database_url=database_url, submit_concurrency=2, ray_timeout_s=5.0), "cpu")
    assert [r.status for r in results] == ["ticked"]
    return ids


@pytest.fixture
def served(demo, database_url):
    """`python -m job serve` as a real process on the demo's database."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "job", "serve", "--port", str(port), "--host", "127.0.0.1",
                                "--cache", "1s"], env={**os.environ, "JOB_DATABASE_URL": database_url},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if get(base + "/healthz")[0] == 200:
                break
        except OSError:
            pass
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "serve did not answer /healthz within 30 s"
        time.sleep(0.2)
    yield base, process
    process.send_signal(signal.SIGINT)
    process.wait(timeout=10)


def samples(text: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def test_share_table_and_json(demo, capsys):
    table = run_cli(capsys, "share")
    assert table.status == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == ["GROUP", "USER", "SHARES", "NORM_SHARES", "USAGE", "NORM_USAGE", "DOMINANT", "SCORE",
                                "ENTITLED", "RUNNING", "PENDING", "WAITING"]
    rows = {line.split()[1]: line.split() for line in lines[1:]}
    assert sorted(rows) == ["alice", "bob", "carol"]
    shown = run_cli(capsys, "share", "--group", "cpu", "--json")
    by_user = {row["user"]: row for row in json.loads(shown.out)}
    # 8 CPUs: the plan took bob 2, alice 2, bob 2, alice 2 (lowest score first); bob's 4-CPU one and
    # alice's third wait.
    assert (by_user["alice"]["running"], by_user["alice"]["pending"]) == (2, 1)
    assert (by_user["bob"]["running"], by_user["bob"]["pending"]) == (2, 1)
    assert by_user["alice"]["entitlement"] == pytest.approx(0.25) and by_user["bob"]["entitlement"] == pytest.approx(0.75)
    assert by_user["carol"]["entitlement"] == 0 and by_user["carol"]["normalized_usage"] == 1
    assert by_user["alice"]["normalized_shares"] == pytest.approx(0.2)
    assert by_user["alice"]["dominant_share"] == pytest.approx(0.5) and by_user["alice"]["held"] == {"CPU": 4}
    assert by_user["bob"]["score"] == pytest.approx(0.5 / 3)
    assert sum(by_user["bob"]["waiting"].values()) == 1 and rows["bob"][-1].startswith("Resources=1")
    unknown = run_cli(capsys, "share", "--group", "nope")
    assert unknown.status == 2 and unknown.err.startswith("error: group 'nope' does not exist")


def test_metrics_as_prometheus_reads_them(served, demo):
    base, _ = served
    status, content_type, text = get(base + "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    found = samples(text)
    assert value(found, "job_pending_jobs", group="cpu", user="bob", reason="Resources", **{"class": "default"}) == 1
    assert value(found, "job_active_jobs", group="cpu", user="alice", state="SUBMITTED", **{"class": "default"}) == 2
    assert value(found, "job_oldest_pending_age_seconds", group="cpu") > 0
    assert value(found, "job_oldest_pending_age_seconds", group="idle") == 0
    assert value(found, "job_user_entitlement_ratio", group="cpu", user="bob") == pytest.approx(0.75)
    assert value(found, "job_user_usage_dominant_share_seconds", group="cpu", user="carol") == pytest.approx(120)
    assert value(found, "job_ticks_total", group="cpu", outcome="ticked") == 1
    assert value(found, "job_placements_total", group="cpu") == 4
    assert value(found, "job_submitted_total", group="cpu") == 6
    assert value(found, "job_group_resource_total", group="cpu", resource="CPU") == 8
    assert value(found, "job_group_resource_held", group="cpu", resource="CPU") == 8
    # Its one cluster, named `c`, holds the four drivers placed.
    assert value(found, "job_cluster_active_jobs", group="cpu", cluster="c") == 4
    assert time.time() - value(found, "job_last_successful_tick_timestamp_seconds", group="cpu") < 120
    assert {labels for name, labels in found if name == "job_tick_step_seconds_total"} == {
        (("group", "cpu"), ("step", step)) for step in ("observe", "reconcile", "schedules", "plan", "commit", "submit")}
    # Prometheus' conventions: counters end in _total, units are base units.
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("job_")
        if family.type == "counter":
            assert any(s.name == family.name + "_total" for s in family.samples) or not family.samples
        assert not re.search(r"_(ms|milliseconds|minutes|percent)\b", family.name), family.name


def test_healthz_404_and_the_role(served):
    base, process = served
    assert get(base + "/healthz")[:3:2] == (200, "ok\n")
    assert get(base + "/nope")[0] == 404
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=10)
    assert "event=serving" in err and "role=job_reader" in err


def test_a_reader_session_writes_nothing(demo, database_url, pg_server_url):
    # The tests' owner login takes job_reader's rights; a real job_reader login reads all the same.
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute("""DO $$ BEGIN CREATE ROLE job_reader_login LOGIN IN ROLE job_reader;
                         EXCEPTION WHEN duplicate_object THEN NULL; END $$""")
        dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
        admin.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO job_reader_login").format(sql.Identifier(dbname)))
    reader_url = with_database(pg_server_url.replace("postgres@", "job_reader_login@"), dbname)
    for url in (database_url, reader_url):
        with connect(url) as conn:
            assert read_only(conn) == "job_reader"
            with pytest.raises((psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege)):
                conn.execute("UPDATE users SET shares = 100")
            conn.rollback()
        source = Source(url, 60)
        report, _ = source.report()
        assert sorted(report.shares) == ["cpu", "idle"] and len(report.queue) == 2
        source.close()


def test_an_unreachable_database_is_503_and_one_line(unused_tcp_port_url):
    source = Source(unused_tcp_port_url, 5)
    server = make_server(source, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for path in ("/healthz", "/metrics", "/"):
            status, _, body = get(base + path)
            assert status == 503 and body.startswith("unavailable: PostgreSQL at ") and body.count("\n") == 1
    finally:
        server.shutdown()
        server.server_close()
    refused = run_process("serve", "--port", str(free_port()), env={"JOB_DATABASE_URL": unused_tcp_port_url})
    assert refused.status != 0 and refused.err.startswith("error: PostgreSQL at ") and refused.err.count("\n") == 1


@pytest.fixture
def unused_tcp_port_url() -> str:
    return f"postgresql://nobody@127.0.0.1:{free_port()}/nothing"


@pytest.mark.parametrize("args, message", [
    (["--port", "70000"], "error: --port: expected a TCP port from 1 to 65535, got '70000'"),
    (["--port", "x"], "error: --port: expected a TCP port from 1 to 65535, got 'x'"),
    (["--cache", "soon"], "error: --cache: "),
])
def test_bad_options_are_one_line(args, message, capsys, database_url):
    result = run_cli(capsys, "serve", *args)
    assert result.status == 2 and result.err.startswith(message) and result.err.count("\n") == 1


def test_one_read_whatever_the_number_of_jobs_and_scrapes(demo, database_url):
    source = Source(database_url, 60)
    first, _ = source.report()
    few = source.statements
    assert source.report()[0] is first, "a second read within the cache sent statements"
    source.close()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO users (name) SELECT 'u' || i FROM generate_series(1, 200) i")
        conn.execute("""INSERT INTO jobs (user_name, group_name, entrypoint, resources, reason)
                        SELECT 'u' || (1 + i % 200), 'cpu', 'true', '{"CPU": 1}', 'Resources'
                        FROM generate_series(1, 5000) i""")
    source = Source(database_url, 60)
    report, _ = source.report()
    assert source.statements == few and sum(row["jobs"] for row in report.counts if row["state"] == "PENDING") == 5002
    source.close()


# --- the status page in a real browser -----------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is needed: apt-get install chromium (Debian's package)"
    return found


def browse(url: str, *flags: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--user-data-dir=" + os.environ.get("TMPDIR", "/tmp") + f"/chromium-{os.getpid()}",
                           *flags, url], capture_output=True, text=True, timeout=timeout)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_the_status_page_in_a_real_browser(served, conn, tmp_path, request):
    base, _ = served
    dom = browse(base + "/", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert "<title>job: queue status</title>" in html
    assert "id=\"group-cpu\"" in html and "id=\"group-idle\"" in html
    # The chart: one bar per user with jobs, each saying its share against its entitlement.
    bars = re.findall(r"<title>(\w+): dominant share ([\d.]+)%, entitled to ([\d.]+)%", html)
    assert sorted(bars) == [("alice", "50.0", "25.0"), ("bob", "50.0", "75.0")]
    # The queue: alice's third job and bob's 4-CPU one, in plan order as the tick stored it, with
    # their reasons and estimated starts: unknown, as the jobs ahead have no max runtime and the
    # group no finished job yet, and the title says so.
    queue = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td><td>(\w+)</td>", html)
    line = conn.execute("SELECT queue_position::text AS pos, id::text, user_name FROM jobs WHERE state = 'PENDING' "
                        "ORDER BY queue_position").fetchall()
    assert queue == [(row["pos"], row["id"], row["user_name"]) for row in line]
    assert [pos for pos, _, _ in queue] == ["1", "2"] and sorted(user for _, _, user in queue) == ["alice", "bob"]
    assert len(re.findall(r"<td title=\"unknown: waits on job \d+, whose run time is not known [^\"]*\">unknown</td>",
                          html)) == 2
    assert "Resources: needs CPU 4" in html and "Nothing pending." in html
    assert "node-a" in html and "CPU 4" in html
    assert "<script" not in html

    for name, size in (("phone", (390, 844)), ("desktop", (1280, 900))):
        shot = tmp_path / f"status-{name}.png"
        taken = browse(base + "/", f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}")
        assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
        assert png_size(shot) == size and shot.stat().st_size > 10_000
    kept = os.environ.get("JOB_STATUS_SCREENSHOTS")
    if kept:  # a directory to keep them in, to look at
        for name in ("phone", "desktop"):
            shutil.copy(tmp_path / f"status-{name}.png", Path(kept) / f"status-{name}.png")


# --- alert rules and the Grafana dashboard -------------------------------------------------------


def served_names(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def expression_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(job_[a-z_]+)\b", expr))


def test_alert_rules_parse_and_use_served_metrics(served, tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is needed: apt-get install prometheus (Debian's package)"
    rules = MONITORING / "alert-rules.yaml"
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 4 rules found" in checked.stdout
    names = served_names(get(served[0] + "/metrics")[2])
    alerts = {rule["alert"]: rule for group in yaml.safe_load(rules.read_text())["groups"] for rule in group["rules"]}
    for alert, rule in alerts.items():
        assert expression_names(rule["expr"]) <= names, (alert, expression_names(rule["expr"]) - names)
        assert {"summary", "description"} <= set(rule["annotations"]) and rule["labels"]["severity"]
    assert "job_last_successful_tick_timestamp_seconds > 120" in alerts["JobSchedulerNoTick"]["expr"]
    # The check catches a broken expression.
    broken = tmp_path / "broken.yaml"
    broken.write_text(rules.read_text().replace("> 120", "> > 120"))
    assert subprocess.run([promtool, "check", "rules", str(broken)], capture_output=True).returncode != 0


# What a Grafana dashboard of this shape must hold (Grafana's own model, the parts used here).
DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "refresh": {"type": "string"},
        "time": {"type": "object", "required": ["from", "to"]},
        "templating": {"type": "object", "required": ["list"], "properties": {"list": {"type": "array", "items": {
            "type": "object", "required": ["name", "type"]}}}},
        "panels": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["id", "type", "title", "gridPos", "targets", "datasource"],
            "properties": {
                "id": {"type": "integer"},
                "type": {"enum": ["timeseries", "stat", "table", "bargauge", "gauge"]},
                "gridPos": {"type": "object", "required": ["x", "y", "w", "h"], "properties": {
                    "x": {"type": "integer", "minimum": 0, "maximum": 23},
                    "w": {"type": "integer", "minimum": 1, "maximum": 24},
                    "y": {"type": "integer", "minimum": 0}, "h": {"type": "integer", "minimum": 1}}},
                "targets": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["refId", "expr"],
                    "properties": {"expr": {"type": "string", "minLength": 1}}}},
            }}},
    },
}


def test_the_grafana_dashboard_is_valid_and_uses_served_metrics(served):
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    jsonschema.validate(dashboard, DASHBOARD_SCHEMA)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
    names = served_names(get(served[0] + "/metrics")[2])
    used = set().union(*(expression_names(t["expr"]) for p in dashboard["panels"] for t in p["targets"]))
    # Preemptions appear once a job is preempted; every other metric is served by the demo.
    assert used - names <= {"job_preemptions_total", "job_requeues_total", "job_finished_total"}, used - names
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**dashboard, "panels": [{**dashboard["panels"][0], "gridPos": {"x": 30}}]},
                            DASHBOARD_SCHEMA)


@pytest.fixture
def array_waiting(demo, conn, database_url) -> int:
    """An array of four tasks, one at a time, waiting in a group of its own (before `served` starts)."""
    conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('arrays', %s)",
                 (Jsonb([{"name": "c", "address": FAKE}]),))
    return api.submit(user="alice", group="arrays", entrypoint="true", array="0-3%1", database_url=database_url)


def test_the_status_page_shows_an_array_on_one_line(array_waiting, served):
    base, _ = served
    dom = browse(base + "/", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    section = dom.stdout.split('id="group-arrays"', 1)[1]
    rows = re.findall(r"<tr><td>[^<]*</td><td>([^<]*)</td>", section.split("</table>", 1)[0])
    assert rows == [f"{array_waiting} (array)"]
    assert "array 0-3%1: PENDING 4" in section
