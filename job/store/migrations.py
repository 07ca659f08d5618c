"""Schema migrations: the files sql/NNNN_name.sql, applied in name order, once each, recorded in
schema_migrations, under an advisory lock so that two pods migrating at once do not race."""

from __future__ import annotations

from pathlib import Path

import psycopg

from job import log
from job.core.errors import NotMigrated

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
# Any constant shared by every migrating process; pg_advisory_lock takes a bigint.
MIGRATION_LOCK = 0x6A6F625F6D6967  # "job_mig"


def migration_files() -> list[Path]:
    return sorted(SQL_DIR.glob("[0-9][0-9][0-9][0-9]_*.sql"))


def applied(conn: psycopg.Connection) -> set[str]:
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists").fetchone()["exists"]
    if not exists:
        return set()
    return {row["name"] for row in conn.execute("SELECT name FROM schema_migrations")}


def pending(conn: psycopg.Connection) -> list[Path]:
    done = applied(conn)
    return [path for path in migration_files() if path.name not in done]


def ensure_current(conn: psycopg.Connection) -> None:
    missing = pending(conn)
    conn.commit()
    if missing:
        names = ", ".join(path.name for path in missing)
        raise NotMigrated(f"the database schema is not current (pending: {names}): run `python -m job migrate`")


def migrate(conn: psycopg.Connection) -> list[str]:
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
        return names
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
