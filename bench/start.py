"""Benchmark of a command's start: `python -m job --help`, and `jobs` on an empty queue, each as
its own process from nothing, as a person types it.

    python bench/start.py                  # 15 rounds
    python bench/start.py --rounds 31

Each round runs the bare interpreter (`python -c pass`, the floor no command can go below) and
then each command, one after the other, so that the load of the machine weighs on all alike.
Printed per command: the median wall time and the median CPU time of its process (user + system,
from the child's rusage: what the command itself costs, which a shared machine's load does not
inflate), their ratio to the bare interpreter's, and the budget (BUDGET_S: bench/README.md).

PostgreSQL: JOB_DATABASE_URL's server (a fresh database `bench_start` is made there), else an
embedded one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tick import fresh_database  # noqa: E402

# A command's start, to its answer.
BUDGET_S = 0.3


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process running `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with ExitStack() as stack:
        server_url = os.environ.get("JOB_DATABASE_URL")
        if not server_url:
            from job.devtools.local_postgres import start_embedded

            server_url, server = start_embedded(Path(tempfile.mkdtemp(prefix="jobbench-pg")) / "data")
            stack.callback(server.cleanup)
        env = {**os.environ, "JOB_DATABASE_URL": fresh_database(server_url, "bench_start"),
               "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
        commands = {"python -c pass": [sys.executable, "-c", "pass"],
                    "python -m job --help": [sys.executable, "-m", "job", "--help"],
                    "python -m job jobs (empty queue)": [sys.executable, "-m", "job", "jobs"]}
        figures: dict[str, list[tuple[float, float]]] = {label: [] for label in commands}
        for _ in range(args.rounds):
            for label, argv in commands.items():
                figures[label].append(timed(argv, env))
    medians = {label: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
               for label, runs in figures.items()}
    _, bare_cpu = medians["python -c pass"]
    print(f"median of {args.rounds} rounds; budget {BUDGET_S:g} s")
    print(f"{'command':<34} {'wall s':>7} {'CPU s':>7} {'x bare (CPU)':>12} {'budget':>7}")
    for label, (wall, cpu) in medians.items():
        verdict = "" if label == "python -c pass" else ("within" if max(wall, cpu) <= BUDGET_S else
                                                          "CPU within" if cpu <= BUDGET_S else "over")
        print(f"{label:<34} {wall:>7.3f} {cpu:>7.3f} {cpu / bare_cpu:>12.1f} {verdict:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
