"""Statements on a job's history (job_events). The events themselves are written by triggers on
jobs (sql/0008_observability.sql), in the transaction of each change; the tick adds to a placement
the policy's figures, which the row does not hold."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from job.store import DictConnection


def events_of(conn: DictConnection, job_id: int) -> list[dict]:
    return conn.execute(
        """SELECT id, at, kind, from_state, state, reason, message, node, attempt, details
           FROM job_events WHERE job_id = %s ORDER BY id""",
        (job_id,),
    ).fetchall()


def note_placements(conn: DictConnection, figures: dict[int, tuple[int, dict]]) -> None:
    """The figures (job id -> (attempt, details)) on the `placed` event of that attempt."""
    if not figures:
        return
    ids = list(figures)
    conn.execute(
        """UPDATE job_events SET details = f.details
           FROM unnest(%s::bigint[], %s::int[], %s::jsonb[]) AS f(job_id, attempt, details)
           WHERE job_events.job_id = f.job_id AND job_events.kind = 'placed' AND job_events.attempt = f.attempt""",
        (ids, [figures[i][0] for i in ids], [Jsonb(figures[i][1]) for i in ids]),
    )


def fold_counts(conn: DictConnection) -> None:
    """One row per key again in the counts the triggers keep (job_counts, job_event_totals)."""
    conn.execute("SELECT job_fold_counts()")
