"""Connections to PostgreSQL, and the check that the schema is current."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, cast, overload

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import DictRow, dict_row

from job.core.errors import DatabaseUnavailable
from job.core.redact import redact_url
from job.store import DictConnection, one
from job.store.migrations import check_current

CONNECT_TIMEOUT_S = 5


class CountingConnection(psycopg.Connection[DictRow]):
    """Counts the statements a tick sends, for its summary line and the benchmark."""

    statements = 0


class _CountingCursor(psycopg.Cursor[DictRow]):
    # Connection.execute sends through a cursor too, as the store's typed reads do with their own
    # row factories: counted here, every statement is counted once.
    def execute(self, *args: Any, **kwargs: Any):
        # psycopg types a cursor's connection as any Connection; only a CountingConnection makes
        # this cursor (connect).
        cast(CountingConnection, self.connection).statements += 1
        return super().execute(*args, **kwargs)


@overload
def connect(url: str, *, autocommit: bool = False, counting: Literal[False] = False) -> DictConnection: ...


@overload
def connect(url: str, *, autocommit: bool = False, counting: Literal[True]) -> CountingConnection: ...


def connect(url: str, *, autocommit: bool = False, counting: bool = False) -> DictConnection:
    """A connection with dict rows; `counting` makes one that counts its statements (the tick's).
    Its session reads times in UTC: psycopg then gives every timestamptz the one tzinfo it keeps
    for UTC, where a server's zone (even Etc/UTC) costs a zone lookup per value, half the time of
    reading the submit times of 100k pending jobs. The URL's own `options` are kept."""
    factory: type[DictConnection] = CountingConnection if counting else psycopg.Connection
    cursors: type[psycopg.Cursor[DictRow]] = _CountingCursor if counting else psycopg.Cursor
    try:
        options = f"{conninfo_to_dict(url).get('options') or ''} -c TimeZone=UTC".strip()
        return factory.connect(url, autocommit=autocommit, row_factory=dict_row, connect_timeout=CONNECT_TIMEOUT_S,
                               cursor_factory=cursors, options=options)
    except psycopg.OperationalError as exc:
        # psycopg's message names host and port, never the password; the URL is redacted all the same.
        raise DatabaseUnavailable(f"PostgreSQL at {redact_url(url)} unreachable: {_first_line(exc)}") from None


def answers(url: str) -> None:
    """Returns once the database answers a query; raises DatabaseUnavailable if it does not."""
    try:
        with connect(url, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"PostgreSQL at {redact_url(url)} unreachable: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@contextmanager
def session(url: str) -> Iterator[DictConnection]:
    """A connection to a migrated database, checked in its first transaction; commits on success,
    rolls back on error."""
    with connect(url) as conn:
        check_current(conn)
        yield conn


READER_ROLE = "job_reader"


def read_only(conn: DictConnection) -> str:
    """Make the session read only: every transaction READ ONLY, and the rights of job_reader
    (sql/0005_roles.sql) where that role exists and the login may take it, whatever else the login
    may do. Returns the role the session reads as."""
    conn.execute("SET default_transaction_read_only = on")
    row = one(conn.execute(
        """SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %(role)s)
                       THEN pg_has_role(current_user, %(role)s, 'MEMBER') ELSE false END AS may""",
        {"role": READER_ROLE},
    ))
    if row["may"]:
        conn.execute(f"SET ROLE {READER_ROLE}")
    conn.commit()
    return one(conn.execute("SELECT current_user AS name"))["name"]
