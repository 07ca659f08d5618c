"""Pruning the queue's history: finished jobs (states.FINISHED) whose finished_at is older than a
cutoff are deleted, a batch per transaction, so that no transaction holds many row locks or keeps
autovacuum waiting for long. Finished jobs are terminal (no write changes them), so a batch never
races with a tick or a cancel.

The batches walk the primary key upward (keyset): each one starts after the last id the previous
one deleted, so a prune reads each row of the table at most once, whatever its size, and needs no
index of its own over the history (one that every finished job would have to be written into)."""

from __future__ import annotations

from datetime import datetime

from job.core import states
from job.store import DictConnection, one


def cutoff(conn: DictConnection, older_than_s: float) -> datetime:
    """The database's now less `older_than_s`, to the second: finished_at is written with the
    database's clock."""
    return one(conn.execute("SELECT date_trunc('second', now() - make_interval(secs => %s)) AS cutoff",
                            (older_than_s,)))["cutoff"]


def count_finished_before(conn: DictConnection, before: datetime) -> int:
    return one(conn.execute(
        "SELECT count(*) AS n FROM jobs WHERE state = ANY(%s) AND finished_at < %s",
        (list(states.FINISHED), before),
    ))["n"]


def delete_finished_before(conn: DictConnection, before: datetime, after_id: int, limit: int) -> list[int]:
    """Deletes up to `limit` finished jobs with finished_at before `before` and an id above
    `after_id`, lowest ids first; returns their ids. Fewer than `limit` means none was left above
    `after_id` (rows another session deleted meanwhile, e.g. `group remove`, can only end it early)."""
    return [row["id"] for row in conn.execute(
        """DELETE FROM jobs WHERE id IN (
               SELECT id FROM jobs WHERE id > %(after)s AND state = ANY(%(finished)s) AND finished_at < %(before)s
               ORDER BY id LIMIT %(limit)s)
           RETURNING id""",
        {"after": after_id, "finished": list(states.FINISHED), "before": before, "limit": limit},
    )]
