"""Schema migrations: the files NNNN_name.sql of the package job.migrations, applied in name order,
once each, recorded in schema_migrations, under an advisory lock so that two pods migrating at once
do not race.

The files live in sql/ at the top of the repository; pyproject.toml maps that folder to the package
job.migrations, so the wheel carries them (and the editable install finds them in sql/), and the
image copies sql/ to job/migrations. They are read through importlib.resources, wherever the
package was installed."""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable

from job import log
from job.core.errors import IncompleteInstall, NotMigrated
from job.store import DictConnection, one
from job.store.jobs import submit_columns

MIGRATIONS_PACKAGE = "job.migrations"
_NAME = re.compile(r"[0-9]{4}_.+\.sql")
# Any constant shared by every migrating process; pg_advisory_lock takes a bigint.
MIGRATION_LOCK = 0x6A6F625F6D6967  # "job_mig"


def migration_files(package: str = MIGRATIONS_PACKAGE) -> list[Traversable]:
    """The migrations in name order, each with `.name` and `.read_text()`. None found is an
    incomplete installation, never a current schema."""
    try:
        folder = resources.files(package)
    except ModuleNotFoundError:
        raise IncompleteInstall(f"no migration files found: the package {package} is missing from the installation") from None
    found = sorted((item for item in folder.iterdir() if _NAME.fullmatch(item.name) and item.is_file()),
                   key=lambda item: item.name)
    if not found:
        raise IncompleteInstall(f"no migration files found in package {package}: the package is incomplete")
    return found


def applied(conn: DictConnection) -> set[str]:
    exists = one(conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists"))["exists"]
    if not exists:
        return set()
    return {row["name"] for row in conn.execute("SELECT name FROM schema_migrations")}


def pending(conn: DictConnection) -> list[Traversable]:
    done = applied(conn)
    return [path for path in migration_files() if path.name not in done]


def ensure_current(conn: DictConnection) -> None:
    """Raises NotMigrated unless every migration is applied; the check's transaction is ended, for
    a connection kept idle after it (the gateway's and the metrics server's)."""
    check_current(conn)
    conn.commit()


def check_current(conn: DictConnection) -> None:
    """The same check, inside the caller's first transaction: a connection per command, or per
    tick, then costs PostgreSQL no transaction of its own for it (an idle minute of the loop)."""
    missing = pending(conn)
    if missing:
        names = ", ".join(path.name for path in missing)
        raise NotMigrated(f"the database schema is not current (pending: {names}): run `python -m job migrate`")


def _grant_submit_columns(conn: DictConnection) -> None:
    """Submitters insert the columns a submit writes and no other (sql/0005_roles.sql): granted
    from the submit's own list, so that a new field of a job needs no GRANT of its own."""
    columns = ", ".join(submit_columns())
    conn.execute(f"GRANT INSERT ({columns}) ON jobs TO job_submitter")


def migrate(conn: DictConnection) -> list[str]:
    """Apply pending migrations; returns the names applied. `conn` must be in autocommit mode."""
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations"
            " (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        names = []
        for path in pending(conn):
            with conn.transaction():
                conn.execute(path.read_text())
                conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (path.name,))
            log.event("migration_applied", name=path.name)
            names.append(path.name)
        if names:
            _grant_submit_columns(conn)
        return names
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
