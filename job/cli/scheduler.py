"""The commands that run the scheduler: tick, loop, logs."""

from __future__ import annotations

import argparse
import json
import sys

from job.adapters.ray_cluster import cluster_of
from job.cli.output import terminal_log
from job.cli.parsing import command, database, job_id, positive_duration
from job.core.errors import NotFound
from job.scheduler.config import TickConfig
from job.scheduler.loop import exit_status, loop
from job.scheduler.tick import run_tick
from job.settings import settings
from job.store import groups, jobs


def register(sub) -> None:
    p = command(sub, "tick", tick)
    p.add_argument("--group", help="only this group")
    p.add_argument("--dry-run", action="store_true", help="plan and print; change nothing, submit nothing")

    p = command(sub, "loop", run_loop)
    p.add_argument("--for", dest="for_", metavar="DURATION", required=True, help="stop starting ticks after this long, e.g. 75s")
    p.add_argument("--every", metavar="DURATION", required=True,
                   help="tick at least this often, e.g. 5s; the loop also ticks at once on a submit, "
                   "a cancel, a group's or user's change and a job's start or end in Ray")
    p.add_argument("--group", help="only this group")

    p = command(sub, "logs", logs)
    p.add_argument("id", metavar="ID")


def tick_config() -> TickConfig:
    """The tick's settings, from the environment."""
    config = settings()
    return TickConfig(database_url=config.require_database_url(), submit_concurrency=config.submit_concurrency,
                      ray_timeout_s=config.ray_timeout_s, failpoint=config.failpoint)


def tick(args: argparse.Namespace) -> int:
    results = run_tick(tick_config(), args.group, dry_run=args.dry_run)
    if args.dry_run:
        for result in results:
            print(json.dumps({"group": result.group, "status": result.status, "cause": result.cause or None,
                              **(result.plan or {})}, separators=(",", ":")))
    return exit_status(results)


def run_loop(args: argparse.Namespace) -> int:
    run_for, every = positive_duration(args.for_, "--for"), positive_duration(args.every, "--every")
    return loop(tick_config(), run_for, every, args.group)


def logs(args: argparse.Namespace) -> int:
    with database() as conn:
        job = jobs.get_job(conn, job_id(args.id))
        group = groups.get_group(conn, job.group_name)
    if job.submission_id is None:
        raise NotFound(f"job {job.id} has not been submitted to Ray yet ({job.state})")
    text = cluster_of(group.cluster(job.cluster).address, settings().ray_timeout_s).logs(job.submission_id)
    # Into a file or a pipe, the log as the job wrote it.
    print(terminal_log(text) if sys.stdout.isatty() else text, end="")
    return 0
