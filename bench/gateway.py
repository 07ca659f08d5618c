"""Load test of `python -m job gateway`: submissions as Ray's JobSubmissionClient posts them, from
concurrent clients, each its own user with its own token.

    python bench/gateway.py                          # 1,000 submissions from 8 clients
    python bench/gateway.py --submissions 5000 --clients 16 --connections 8

A real gateway process, logged in as a login of job_gateway, answers POST /groups/bench/api/jobs/
(each with its own submission id); the clients are aiohttp sessions in this process, each sending
its share one after the other. A submission is a row (job.api.submit under the token's user's
role), never a Ray call: no Ray cluster is needed. Printed: submissions per second over the whole
run, the latency seen by the clients (median, p99, max), the gateway's peak RSS, and the check
that every submission is in the queue exactly once, as its own user's.

PostgreSQL: JOB_DATABASE_URL's server (a superuser or a login with CREATEROLE: it makes the
gateway's login), else an embedded one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from job.devtools.local_postgres import start_embedded  # noqa: E402
from job.store import tokens  # noqa: E402
from serve import free_port  # noqa: E402  (bench/serve.py)
from tick import fresh_database  # noqa: E402  (bench/tick.py)

LOGIN = "bench_gateway"


def prepare(url: str, clients: int) -> list[str]:
    """The group, a user and a token per client, the gateway's login; the tokens."""
    with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        conn.execute("INSERT INTO resource_groups (name, ray_address) VALUES ('bench', 'http://ray.invalid:8265')")
        conn.execute(sql.SQL(
            """DO $$ BEGIN CREATE ROLE {login} LOGIN IN ROLE job_gateway;
               EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$""").format(login=sql.Identifier(LOGIN)))
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(urlsplit(url).path.lstrip("/")), sql.Identifier(LOGIN)))
        found = []
        for i in range(clients):
            conn.execute("INSERT INTO users (name) VALUES (%s)", (f"bench_gw_user{i}",))
            found.append(tokens.create_token(conn, f"bench_gw_user{i}", None)[1])
        return found


def start_gateway(url: str, connections: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    parts = urlsplit(url)
    login_url = urlunsplit(parts._replace(netloc=f"{LOGIN}@{parts.netloc.rpartition('@')[2]}"))
    process = subprocess.Popen([sys.executable, "-m", "job", "gateway", "--host", "127.0.0.1", "--port", str(port),
                                "--connections", str(connections)],
                               env={**os.environ, "JOB_DATABASE_URL": login_url, "JOB_LOG_LEVEL": "WARNING"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, f"http://127.0.0.1:{port}"


async def wait_ready(base: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(base + "/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("the gateway did not start")
            await asyncio.sleep(0.2)


async def client(base: str, token: str, index: int, count: int) -> list[float]:
    """`count` submissions one after the other, as JobSubmissionClient.submit_job posts them."""
    took = []
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.get(base + "/groups/bench/api/version") as response:  # its connection, warm
            assert response.status == 200, await response.text()
        for i in range(count):
            body = {"entrypoint": f"python train.py --run {i}", "submission_id": f"bench-{index}-{i}",
                    "entrypoint_num_cpus": 1, "metadata": {"client": str(index)}, "runtime_env": {}}
            began = time.perf_counter()
            async with session.post(base + "/groups/bench/api/jobs/", json=body) as response:
                answer = await response.json()
            took.append(time.perf_counter() - began)
            assert answer["submission_id"] == f"bench-{index}-{i}", answer
    return took


async def load(base: str, tokens_: list[str], submissions: int) -> tuple[float, list[float]]:
    shares = [submissions // len(tokens_) + (1 if i < submissions % len(tokens_) else 0) for i in range(len(tokens_))]
    began = time.perf_counter()
    results = await asyncio.gather(*(client(base, token, i, n) for i, (token, n) in enumerate(zip(tokens_, shares))))
    return time.perf_counter() - began, [t for took in results for t in took]


def check(url: str, submissions: int) -> str:
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        rows = conn.execute(
            """SELECT s.submission_id, j.user_name, j.metadata ->> 'client' AS client
               FROM gateway_submissions s JOIN jobs j ON j.id = s.job_id""").fetchall()
        total = conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"]
    ids = [row["submission_id"] for row in rows]
    mismatched = [row for row in rows if row["user_name"] != f"bench_gw_user{row['client']}"
                  or not row["submission_id"].startswith(f"bench-{row['client']}-")]
    if total != submissions or len(ids) != submissions or len(set(ids)) != submissions or mismatched:
        raise SystemExit(f"NOT exactly once: {total} jobs, {len(ids)} named, {len(set(ids))} distinct, "
                         f"{len(mismatched)} under the wrong user")
    return f"{total} jobs in the queue, each submission exactly once, each as its client's user"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--connections", type=int, default=8, help="the gateway's --connections")
    args = parser.parse_args()
    server_url = os.environ.get("JOB_DATABASE_URL")
    embedded = None
    if not server_url:
        server_url, embedded = start_embedded(Path(tempfile.mkdtemp(prefix="benchpg")) / "data")
    try:
        url = fresh_database(server_url, "bench_gateway")
        client_tokens = prepare(url, args.clients)
        process, base = start_gateway(url, args.connections)
        try:
            asyncio.run(wait_ready(base, process))
            seconds, took = asyncio.run(load(base, client_tokens, args.submissions))
            peak = next(line.split()[1] for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
                        if line.startswith("VmHWM:"))
        finally:
            process.terminate()
            process.wait(timeout=10)
        verdict = check(url, args.submissions)
    finally:
        if embedded is not None:
            embedded.cleanup()
    took_ms = sorted(t * 1000 for t in took)
    p99 = took_ms[min(len(took_ms) - 1, int(len(took_ms) * 0.99))]
    print(f"{args.submissions} submissions from {args.clients} clients, gateway --connections {args.connections}:")
    print(f"  {args.submissions / seconds:.0f} submissions/s ({seconds:.2f} s)")
    print(f"  latency: median {statistics.median(took_ms):.1f} ms, p99 {p99:.1f} ms, max {took_ms[-1]:.1f} ms")
    print(f"  gateway peak RSS {int(peak) / 1024:.0f} MiB")
    print(f"  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
