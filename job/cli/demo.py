"""`python -m job demo`: the scheduler on a local PostgreSQL and a local Ray cluster (the `demo`
extra brings what it needs)."""

from __future__ import annotations

import argparse
import os

from job.cli.output import print_table
from job.cli.parsing import command
from job.core.errors import BadInput
from job.settings import settings


def register(sub) -> None:
    p = command(sub, "demo", run)
    p.add_argument("--jobs", default="12", help="how many demo jobs")


def run(args: argparse.Namespace) -> int:
    if not args.jobs.isdigit() or not 1 <= int(args.jobs) <= 200:
        raise BadInput(f"--jobs: {args.jobs!r} is not a whole number from 1 to 200")
    try:
        from job.devtools import demo
    except ImportError as exc:
        # Without the `demo` extra, or in the image, which leaves the development helpers out.
        raise BadInput(f"demo: {exc}") from None

    config = settings()
    outcome = demo.run(int(args.jobs), config.database_url, os.environ.get("RAY_ADDRESS"), config.submit_concurrency,
                       config.ray_timeout_s)
    if outcome is None:
        return 1
    per_user, elapsed_s = outcome
    print(f"\nAll {sum(user['jobs'] for user in per_user)} jobs finished in {elapsed_s:.0f} s.\n")
    print_table(per_user, ["user", "shares", "jobs", "succeeded", "cpu_seconds", "share", "mean_wait_s"])
    return 0
