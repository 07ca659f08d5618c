"""`python -m job plan FILE|-`: the planner on a snapshot file, the plan on standard output."""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from job.cli.parsing import MIB, command, read_input
from job.core import collection
from job.core.errors import BadInput
from job.core.planner import Snapshot, plan
from job.core.planner.snapshot import describe_error

# A snapshot of 1,000,000 pending jobs, the planner's budget (bench/README.md), is about 150 MiB.
MAX_SNAPSHOT_FILE = 1024 * MIB


def register(sub) -> None:
    p = command(sub, "plan", run)
    p.add_argument("snapshot", metavar="FILE|-", help="snapshot JSON, or - for standard input")


def run(args: argparse.Namespace) -> int:
    data = read_input(args.snapshot, MAX_SNAPSHOT_FILE)
    # A million jobs validated and planned are millions of objects, none of them cyclic garbage.
    with collection.paused():
        try:
            snapshot = Snapshot.from_json(data)
        except ValidationError as exc:
            raise BadInput(describe_error(exc)) from None
        sys.stdout.write(plan(snapshot).model_dump_json(indent=2, exclude_none=True) + "\n")
    return 0
