"""The store: PostgreSQL's statements, one module per table or purpose (connection.py connects)."""

from typing import TypeAlias

import psycopg
from psycopg.rows import DictRow

# Every connection of the store reads rows as dicts (connection.connect); psycopg's bare Connection
# means tuple rows to a type checker, so signatures name this one. Declared here, not in
# connection.py, which imports migrations.py, which imports jobs.py, which needs the name.
DictConnection: TypeAlias = psycopg.Connection[DictRow]
