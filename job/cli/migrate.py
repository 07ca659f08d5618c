"""`python -m job migrate [--status]`."""

from __future__ import annotations

import argparse

from job.cli.parsing import command
from job.settings import settings
from job.store.connection import connect
from job.store.migrations import applied, migrate, migration_files


def register(sub) -> None:
    p = command(sub, "migrate", run)
    p.add_argument("--status", action="store_true", help="list applied and pending migrations, change nothing")


def run(args: argparse.Namespace) -> int:
    with connect(settings().require_database_url(), autocommit=True) as conn:
        if args.status:
            done = applied(conn)
            for path in migration_files():
                print(f"{'applied' if path.name in done else 'pending'}  {path.name}")
            return 0
        names = migrate(conn)
    print(f"applied {len(names)} migration(s)" + (": " + ", ".join(names) if names else ", the schema is current"))
    return 0
