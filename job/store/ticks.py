"""Statements on the ticks' record: each group's tick summary (ticks) and the running totals the
metrics count from (tick_totals), written in one statement; old ticks pruned with the jobs."""

from __future__ import annotations

from datetime import datetime

import msgspec
from psycopg.types.json import Jsonb

from job.store import DictConnection, one

# Columns of a tick's row, in the order of `record`'s arrays, with their types.
_COLUMNS = (("group_name", "text"), ("outcome", "text"), ("cause", "text"), ("seconds", "float8"),
            ("steps", "jsonb"), ("ray_seconds", "float8"), ("placed", "int"), ("preempted", "int"), ("running", "int"),
            ("finished", "int"), ("waiting", "jsonb"), ("reasons_written", "int"), ("statements", "int"),
            ("nodes", "jsonb"))
COLUMNS = tuple(name for name, _ in _COLUMNS)
# A tick's nodes, each with its resources and free amounts, are about 300 bytes of JSON a node:
# msgspec writes 10,000 of them in a fifth of json.dumps's time.
_text = msgspec.json.encode


def record(conn: DictConnection, rows: list[dict]) -> None:
    """One row per group ticked (each a dict of COLUMNS; steps: name -> seconds), and each group's
    totals per outcome and per step ('' for the whole tick) raised by it. A successful tick's nodes
    replace those of the group's earlier ticks, whose lists are emptied (sql/0030): only the last
    is read."""
    if not rows:
        return
    names = ", ".join(COLUMNS)
    # The JSON columns go in binary: as text, psycopg would escape every quote of their array's
    # literal, some 800,000 a tick of 10,000 nodes (0.7 s of CPU).
    arrays = ", ".join(f"%{'b' if sql_type == 'jsonb' else 's'}::{sql_type}[]" for _, sql_type in _COLUMNS)
    values = [[Jsonb(row[name], dumps=_text) if sql_type == "jsonb" else row[name] for row in rows]
              for name, sql_type in _COLUMNS]
    conn.execute(
        f"""WITH tick AS (
                INSERT INTO ticks ({names}) SELECT * FROM unnest({arrays})
                RETURNING id, group_name, outcome, seconds, steps, at),
            emptied AS (
                UPDATE ticks SET nodes = '[]' FROM tick
                WHERE tick.outcome = 'ticked' AND ticks.group_name = tick.group_name
                  AND ticks.nodes <> '[]' AND ticks.id < tick.id)
            INSERT INTO tick_totals AS t (group_name, outcome, step, ticks, seconds, last_at)
            SELECT group_name, outcome, '', 1, seconds, at FROM tick
            UNION ALL
            SELECT group_name, outcome, s.key, 1, s.value::float8, at FROM tick, jsonb_each_text(tick.steps) s
            ON CONFLICT (group_name, outcome, step) DO UPDATE
                SET ticks = t.ticks + excluded.ticks, seconds = t.seconds + excluded.seconds,
                    last_at = greatest(t.last_at, excluded.last_at)""",
        values,
    )


def delete_before(conn: DictConnection, before: datetime, limit: int) -> int:
    """Deletes up to `limit` ticks older than `before`, oldest first; returns how many."""
    return conn.execute(
        "DELETE FROM ticks WHERE id IN (SELECT id FROM ticks WHERE at < %s ORDER BY at LIMIT %s)", (before, limit),
    ).rowcount


def count_before(conn: DictConnection, before: datetime) -> int:
    return one(conn.execute("SELECT count(*) AS n FROM ticks WHERE at < %s", (before,)))["n"]
