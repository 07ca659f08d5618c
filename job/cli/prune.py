"""`python -m job prune --finished-before DURATION [--dry-run] [--batch N]`: the queue's history
kept bounded (the daily CronJob k8s/prune-cronjob.yaml runs it): finished jobs with their events,
and the ticks' record, older than the retention."""

from __future__ import annotations

import argparse
import time

from job import log
from job.cli.output import iso
from job.cli.parsing import command, database
from job.core.errors import BadInput
from job.core.units import format_duration, parse_duration
from job.store import prune as prune_rows
from job.store import ticks

DEFAULT_BATCH = 5000
# A transaction of more rows would hold their locks and delay vacuum for long, for no gain.
MAX_BATCH = 100_000


def register(sub) -> None:
    p = command(sub, "prune", prune)
    p.add_argument("--finished-before", metavar="DURATION", required=True,
                   help="delete jobs that finished longer ago than this, e.g. 30d")
    p.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
    p.add_argument("--batch", metavar="N", default=str(DEFAULT_BATCH),
                   help=f"jobs deleted per transaction (default {DEFAULT_BATCH})")


def _retention(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise BadInput(f"--finished-before: {exc}") from None
    if seconds <= 0:
        raise BadInput("--finished-before: must be more than 0 (e.g. 30d)")
    return seconds


def _batch(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_BATCH:
        raise BadInput(f"--batch: expected a whole number from 1 to {MAX_BATCH}, got {text!r}")
    return int(text)


def prune(args: argparse.Namespace) -> int:
    older_than, batch = _retention(args.finished_before), _batch(args.batch)
    with database() as conn:
        before = prune_rows.cutoff(conn, older_than)
        conn.commit()
        what = f"finished job(s) that finished before {iso(before)} (older than {format_duration(older_than)})"
        if args.dry_run:
            print(f"would delete {prune_rows.count_finished_before(conn, before)} {what}")
            print(f"would delete {ticks.count_before(conn, before)} tick record(s) from before {iso(before)}")
            return 0
        started = time.monotonic()
        deleted, batches, after = 0, 0, 0
        while True:
            ids = prune_rows.delete_finished_before(conn, before, after, batch)
            conn.commit()
            if ids:
                deleted, batches, after = deleted + len(ids), batches + 1, max(ids)
            if len(ids) < batch:
                break
        deleted_ticks = 0
        while True:
            count = ticks.delete_before(conn, before, batch)
            conn.commit()
            deleted_ticks += count
            if count < batch:
                break
    log.event("pruned", deleted=deleted, batches=batches, ticks=deleted_ticks, before=iso(before),
              seconds=round(time.monotonic() - started, 1))
    print(f"deleted {deleted} {what}, in {batches} batch(es) of at most {batch}")
    print(f"deleted {deleted_ticks} tick record(s) from before {iso(before)}")
    return 0
