"""`python -m job`: the command line. Each family of commands declares its own commands and
options (`register`) and carries them out; this module puts them together and runs one, importing
only the family of the command that runs (cli/commands.py lists them all for `--help`)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Collection

from job.cli.commands import FAMILIES, FAMILY_OF
from job.cli.parsing import parser_of, refused
from job.core.errors import JobError

DEFAULT_COMMAND = "tick"


def build_parser(families: Collection[str] = FAMILIES) -> argparse.ArgumentParser:
    """The parser of the commands of the `families` named (each imported here), declared in full;
    with none named, of every command by name and help only (`--help`, a command misspelt). A
    command's run declares its own family alone: argparse's help texts cost a lookup of their
    translation each, about 0.25 ms a command."""
    parser = argparse.ArgumentParser(
        prog="python -m job",
        description="Fair-share batch scheduler for Ray. With no command, runs one tick.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for family, commands in FAMILIES.items():
        if family in families:
            importlib.import_module(f"job.cli.{family}").register(sub)
        elif not families:
            for name in commands:
                parser_of(sub, name)
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The command `argv` names: its first word that is not an option (the top level has no option
    but --help)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv) or [DEFAULT_COMMAND]
    command = _command_of(argv)
    args = build_parser({FAMILY_OF[command]} if command in FAMILY_OF else ()).parse_args(argv)
    try:
        from job import log
        from job.settings import settings

        config = settings()
        log.configure(config.log_format, config.log_level)
        return args.handler(args) or 0
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader left (`jobs | head`): the rest is nobody's. Python flushes stdout again as it
        # exits, and would fail again there: it is pointed at nothing first. 141: a shell's SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        # psycopg is imported by the commands that reach the database only: an error of it is
        # possible only once it is.
        psycopg = sys.modules.get("psycopg")
        if psycopg is None or not isinstance(exc, psycopg.errors.InsufficientPrivilege):
            raise
        # What the command's database role may not do (sql/0005_roles.sql): one line, no traceback.
        error = refused(args, exc)
        print(f"error: {error}", file=sys.stderr)
        return error.exit_status
