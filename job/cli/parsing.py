"""What every command family shares: declaring a command, reading repeatable and JSON options, and
the database the command works on."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from job.cli.commands import HELP
from job.core.errors import BadInput, PermissionDenied, quoted
from job.core.units import parse_duration, parse_pairs

if TYPE_CHECKING:
    import psycopg

    from job.store import DictConnection


def parser_of(subparsers, name: str, description: str | None = None) -> argparse.ArgumentParser:
    """The parser of a command of `python -m job`, with its line of `--help` (cli/commands.py), which
    is also its own help's description unless it has a longer one."""
    return subparsers.add_parser(name, help=HELP[name], description=description or HELP[name])


def command(subparsers, name: str, handler: Callable[[argparse.Namespace], int], help: str | None = None,
            json_output: bool = False) -> argparse.ArgumentParser:
    """A command carried out by `handler`: a command of `python -m job` (its help from
    cli/commands.py), or an action of one (`group add`) with its own `help`."""
    parser = subparsers.add_parser(name, help=help, description=help) if help else parser_of(subparsers, name)
    parser.set_defaults(handler=handler)
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def database() -> AbstractContextManager[DictConnection]:
    """A session on JOB_DATABASE_URL's migrated database."""
    # Imported here: psycopg and the settings are for the commands that reach the database,
    # not for every start.
    from job.settings import settings
    from job.store.connection import session

    return session(settings().require_database_url())


def refused(args: argparse.Namespace, exc: psycopg.errors.InsufficientPrivilege) -> PermissionDenied:
    """PostgreSQL refused a statement to the command's database role (a privilege it lacks, or
    row-level security): one line naming the command, the role and what was refused."""
    name = " ".join(filter(None, (args.command, getattr(args, f"{args.command}_command", None)))) or "job"
    from job.settings import settings

    what = exc.diag.message_primary or (str(exc).strip().splitlines() or ["permission denied"])[0]
    try:
        role = urlsplit(settings().database_url or "").username
    except ValueError:
        role = None
    who = f" to the database role {role!r}" if role else ""
    return PermissionDenied(f"{name}: refused{who}: {what} (what each role may do: docs/operations/roles-and-logins.md)")


def pairs(items: list[str] | None, option: str) -> dict[str, str]:
    """['k=v', ...] from a repeatable command-line option, as a map."""
    try:
        return parse_pairs(items or [], "=", "NAME=VALUE")
    except ValueError as exc:
        raise BadInput(f"{option}: {exc}") from None


def bundles(items: list[str] | None, option: str) -> list[dict[str, str]] | None:
    """`--bundle [Nx]NAME=AMOUNT,...` repeated, as one map per bundle (`4xGPU=1,CPU=8`: four of
    them); None when none is given. The amounts are JobSpec's to read, as `--resource`'s are."""
    if not items:
        return None
    from job.core.specs import expand_bundles  # pydantic's models, for `submit` only

    try:
        return expand_bundles(items, "=", "4xGPU=1,CPU=8")
    except ValueError as exc:
        raise BadInput(f"{option}: {exc}") from None


MIB = 2**20


def read_input(name: str, limit: int, option: str | None = None) -> bytes:
    """The bytes of the file `name` (`-`: standard input), at most `limit` of them: a larger file,
    or one that never ends (`/dev/zero`), is refused, not read into memory whole. A refusal begins
    with the file's name, or with `option` and what it could not read."""
    refusal = f"{option}: cannot read {name}" if option else name
    try:
        if name == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(name, "rb") as file:
                data = file.read(limit + 1)
    except OSError as exc:
        raise BadInput(f"{refusal}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise BadInput(f"{refusal}: larger than {limit // MIB} MiB")
    return data


def json_object(text: str, option: str) -> dict:
    """A JSON object given inline or as @FILE (at most 1 MiB: what it may hold is less)."""
    source: str | bytes = read_input(text[1:], MIB, option) if text.startswith("@") else text
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{option}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise BadInput(f"{option}: nested too deeply") from None
    except ValueError as exc:  # a number of more digits than Python reads
        raise BadInput(f"{option}: not valid JSON: {str(exc).partition(';')[0]}") from None
    if not isinstance(value, dict):
        raise BadInput(f"{option}: must be a JSON object, got {type(value).__name__}")
    return value


def positive_number(text: str, field: str, kind: str = "a positive whole number") -> int:
    """A whole number above 0 that a bigint holds, in ASCII digits: str.isdigit() takes '²', which
    int() does not read, and int() reads at most 4,300 digits."""
    if not re.fullmatch(r"[0-9]{1,19}", text) or not 0 < int(text) < 2**63:
        raise BadInput(f"{field}: {quoted(text)} is not {kind}")
    return int(text)


def job_id(text: str) -> int:
    return positive_number(text, "job id", "a job id (a positive whole number)")


def positive_duration(text: str, option: str) -> float:
    """Seconds from a duration option that must be above zero (`--every 5s`)."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise BadInput(f"{option}: {exc}") from None
    if seconds <= 0:
        raise BadInput(f"{option}: must be more than 0")
    return seconds
