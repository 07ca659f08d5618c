"""The commands that run the scheduler: tick, loop, logs."""

from __future__ import annotations

import argparse
import json
import signal
import time

from job import db, log, store
from job.errors import BadInput, NotFound
from job.tick import GroupResult, run_tick
from job.units import parse_duration


def _exit_status(results: list[GroupResult]) -> int:
    return 1 if any(result.status == "failed" for result in results) else 0


def tick(args: argparse.Namespace) -> int:
    results = run_tick(args.group, dry_run=args.dry_run)
    if args.dry_run:
        for result in results:
            print(json.dumps({"group": result.group, "status": result.status, "cause": result.cause or None,
                              **(result.plan or {})}, separators=(",", ":")))
    return _exit_status(results)


def _duration(text: str, option: str, positive: bool) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise BadInput(f"{option}: {exc}") from None
    if positive and seconds <= 0:
        raise BadInput(f"{option}: must be more than 0")
    return seconds


def loop(args: argparse.Namespace) -> int:
    """Tick every `--every` until `--for` has passed. A tick is started only if it can finish
    before the deadline, judging by the longest tick so far; SIGTERM ends the loop after the
    current tick."""
    run_for = _duration(args.for_, "--for", positive=True)
    every = _duration(args.every, "--every", positive=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    start = time.monotonic()
    deadline = start + run_for
    longest = 0.0
    status = 0
    ticks = 0
    while not stopping:
        began = time.monotonic()
        if began + longest > deadline:
            break
        status = max(status, _exit_status(run_tick(args.group)))
        ticks += 1
        longest = max(longest, time.monotonic() - began)
        next_start = start + ticks * every
        while not stopping and time.monotonic() < min(next_start, deadline):
            time.sleep(min(0.2, max(0.0, next_start - time.monotonic())))
        if time.monotonic() >= deadline:
            break
    log.event("loop_finished", ticks=ticks, reason="sigterm" if stopping else "deadline",
              longest_tick_s=round(longest, 2), status=status)
    return status


def logs(args: argparse.Namespace) -> int:
    from job.tick import cluster_of

    if not args.id.isdigit():
        raise BadInput(f"job id: {args.id!r} is not a job id (a positive whole number)")
    with db.session() as conn:
        job = store.get_job(conn, int(args.id))
        group = store.get_group(conn, job["group_name"])
    if job["submission_id"] is None:
        raise NotFound(f"job {job['id']} has not been submitted to Ray yet ({job['state']})")
    print(cluster_of(group).logs(job["submission_id"]), end="")
    return 0
