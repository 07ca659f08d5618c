"""Connections to PostgreSQL, and the check that the schema is current."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import psycopg
from psycopg.rows import dict_row

from job.core.errors import Unavailable
from job.core.redact import redact_url
from job.store.migrations import ensure_current

CONNECT_TIMEOUT_S = 5


class CountingConnection(psycopg.Connection):
    """Counts the statements a tick sends, for its summary line and the benchmark."""

    statements = 0

    def execute(self, *args: Any, **kwargs: Any):
        self.statements += 1
        return super().execute(*args, **kwargs)


def connect(url: str, *, autocommit: bool = False, counting: bool = False) -> psycopg.Connection:
    """A connection with dict rows; `counting` makes one that counts its statements (the tick's)."""
    factory = CountingConnection if counting else psycopg.Connection
    try:
        return factory.connect(url, autocommit=autocommit, row_factory=dict_row, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        # psycopg's message names host and port, never the password; the URL is redacted all the same.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unavailable(f"PostgreSQL at {redact_url(url)} unreachable: {reason}") from None


@contextmanager
def session(url: str) -> Iterator[psycopg.Connection]:
    """A connection to a migrated database; commits on success, rolls back on error."""
    with connect(url) as conn:
        ensure_current(conn)
        yield conn
