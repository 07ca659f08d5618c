"""Connections to PostgreSQL, and the check that the schema is current."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg.rows import dict_row

from job.errors import Unavailable
from job.settings import redact_url, settings

CONNECT_TIMEOUT_S = 5


def connect(url: str | None = None, *, autocommit: bool = False, counting: bool = False) -> psycopg.Connection:
    """A connection with dict rows; `counting` makes one that counts its statements (the tick's)."""
    url = url or settings().require_database_url()
    if counting:
        from job.tick_store import CountingConnection

        factory = CountingConnection
    else:
        factory = psycopg.Connection
    try:
        return factory.connect(url, autocommit=autocommit, row_factory=dict_row, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        # psycopg's message names host and port, never the password; the URL is redacted all the same.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unavailable(f"PostgreSQL at {redact_url(url)} unreachable: {reason}") from None


@contextmanager
def session(url: str | None = None) -> Iterator[psycopg.Connection]:
    """A connection to a migrated database; commits on success, rolls back on error."""
    from job.migrate import ensure_current

    with connect(url) as conn:
        ensure_current(conn)
        yield conn
