"""The store: PostgreSQL's statements, one module per table or purpose (connection.py connects)."""

from typing import TypeAlias, TypeVar

import psycopg
from psycopg.rows import DictRow

# Every connection of the store reads rows as dicts (connection.connect); psycopg's bare Connection
# means tuple rows to a type checker, so signatures name this one. Declared here, not in
# connection.py, which imports migrations.py, which imports jobs.py, which needs the name.
DictConnection: TypeAlias = psycopg.Connection[DictRow]

Row = TypeVar("Row")


def one(cursor: psycopg.Cursor[Row]) -> Row:
    """The row of a statement that always returns one (an aggregate, a SELECT without FROM, an
    INSERT ... VALUES ... RETURNING): psycopg's fetchone allows for none, which such a statement
    never gives."""
    row = cursor.fetchone()
    assert row is not None, "the statement returned no row"
    return row
