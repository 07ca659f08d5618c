"""Benchmark of an array's submit: 10,000 tasks through `job.api.submit(array=...)`, committed.

    python bench/arrays.py                 # 7 rounds of 10,000 tasks
    python bench/arrays.py --rounds 3 --tasks 2000

Each round submits one array (`0-9999%10`) on a connection of its own that counts its statements,
and commits: the time from the call to the commit's return, and the statements sent (one: every
task is written by one INSERT, whatever their number). Between rounds the tasks are deleted, so
that each round meets the same table. Printed: the median and the slowest round against the budget
(BUDGET_S: bench/README.md), the statements, and a verdict.

PostgreSQL: JOB_DATABASE_URL's server (a fresh database `bench_arrays` is made there), else an
embedded one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tick import fresh_database  # noqa: E402
from job import api  # noqa: E402
from job.store.connection import connect  # noqa: E402

# A 10,000-task array, from the call to its commit.
BUDGET_S = 1.0


def one_round(url: str, tasks: int) -> tuple[float, int]:
    """Seconds and statements of one array's submit."""
    with connect(url, counting=True) as conn:
        began = time.perf_counter()
        array_id = api.submit(conn=conn, user="alice", group="bench", entrypoint="python sweep.py",
                              resources={"CPU": 1}, array=f"0-{tasks - 1}%10")
        conn.commit()
        seconds, statements = time.perf_counter() - began, conn.statements
        made = conn.execute("SELECT count(*) AS n FROM jobs WHERE array_id = %s", (array_id,)).fetchone()["n"]
        assert made == tasks, (made, tasks)
        conn.execute("DELETE FROM jobs")
        conn.commit()
    return seconds, statements


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tasks", type=int, default=10_000)
    args = parser.parse_args()
    with ExitStack() as stack:
        server_url = os.environ.get("JOB_DATABASE_URL")
        if not server_url:
            from job.devtools.local_postgres import start_embedded

            server_url, server = start_embedded(Path(tempfile.mkdtemp(prefix="jobbench-pg")) / "data")
            stack.callback(server.cleanup)
        url = fresh_database(server_url, "bench_arrays")
        with connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('bench', '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:8265\"}]')")
            conn.execute("INSERT INTO users (name) VALUES ('alice')")
        runs = [one_round(url, args.tasks) for _ in range(args.rounds)]
    seconds = [s for s, _ in runs]
    statements = {n for _, n in runs}
    median, slowest = statistics.median(seconds), max(seconds)
    verdict = "within" if slowest <= BUDGET_S and statements == {1} else "OVER"
    print(f"submit of a {args.tasks}-task array, {args.rounds} rounds; budget {BUDGET_S:g} s and one statement")
    print(f"median {median:.3f} s, slowest {slowest:.3f} s, statements {sorted(statements)}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
