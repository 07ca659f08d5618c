"""`python -m job`: the command line. Each family of commands declares its own commands and
options (`register`) and carries them out; this module puts them together and runs one."""

from __future__ import annotations

import argparse
import sys

import psycopg

from job import log
from job.cli import accounts, demo, gateway, groups, jobs, migrate, observe, plan, prune, scheduler, simulate, users
from job.cli.parsing import refused
from job.core.errors import JobError
from job.settings import settings

DEFAULT_COMMAND = "tick"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m job",
        description="Fair-share batch scheduler for Ray. With no command, runs one tick.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for family in (migrate, jobs, groups, users, accounts, plan, simulate, scheduler, observe, prune, gateway, demo):
        family.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([DEFAULT_COMMAND, *(argv if argv is not None else sys.argv[1:])])
    try:
        config = settings()
        log.configure(config.log_format, config.log_level)
        return args.handler(args) or 0
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    except psycopg.errors.InsufficientPrivilege as exc:
        # What the command's database role may not do (sql/0005_roles.sql): one line, no traceback.
        error = refused(args, exc)
        print(f"error: {error}", file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
