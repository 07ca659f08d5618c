"""The queue's statements on jobs: submit, cancel, list, show."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from job.core import states
from job.core.errors import NotFound
from job.core.specs import JobSpec


def insert_job(conn: psycopg.Connection, spec: JobSpec) -> int:
    try:
        row = conn.execute(
            """INSERT INTO jobs (state, user_name, group_name, entrypoint, resources, node_labels, runtime_env,
                                 priority, not_before, max_runtime_s, metadata, reason, message)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'Queued', 'waiting for the next tick')
               RETURNING id""",
            (states.INITIAL, spec.user, spec.group, spec.entrypoint, Jsonb(spec.resources), Jsonb(spec.node_labels),
             Jsonb(spec.runtime_env), spec.priority, spec.not_before, spec.max_runtime_s, Jsonb(spec.metadata)),
        ).fetchone()
    except psycopg.errors.ForeignKeyViolation as exc:
        conn.rollback()
        if "group_name" in str(exc.diag.message_detail or ""):
            raise NotFound(f"group: {spec.group!r} does not exist (see `python -m job group list`)") from None
        raise NotFound(f"user: {spec.user!r} does not exist (add it with `python -m job user set {spec.user}`)") from None
    return row["id"]


def cancel_jobs(conn: psycopg.Connection, ids: list[int]) -> dict[int, tuple[str | None, str | None]]:
    """Cancel at once what is pending (CANCEL_PENDING), ask the tick to stop what Ray has
    (REQUEST_CANCEL). Returns, per id, the state before and after (None, None for an unknown id)."""
    changed = conn.execute(
        """WITH target AS (SELECT id, state FROM jobs WHERE id = ANY(%(ids)s) FOR UPDATE)
           UPDATE jobs SET
               state = CASE WHEN target.state = ANY(%(cancel)s) THEN %(cancelled)s ELSE jobs.state END,
               finished_at = CASE WHEN target.state = ANY(%(cancel)s) THEN now() ELSE jobs.finished_at END,
               reason = CASE WHEN target.state = ANY(%(cancel)s) THEN 'Cancelled' ELSE jobs.reason END,
               message = CASE WHEN target.state = ANY(%(cancel)s) THEN 'cancelled before it started'
                              ELSE jobs.message END,
               cancel_requested_at = coalesce(jobs.cancel_requested_at, now()),
               updated_at = now()
           FROM target
           WHERE jobs.id = target.id AND (target.state = ANY(%(cancel)s) OR target.state = ANY(%(request)s))
           RETURNING jobs.id, target.state AS before, jobs.state AS after""",
        {"ids": ids, "cancel": states.CANCEL_PENDING.sources, "cancelled": states.CANCEL_PENDING.target,
         "request": states.REQUEST_CANCEL.sources},
    ).fetchall()
    result: dict[int, tuple[str | None, str | None]] = {row["id"]: (row["before"], row["after"]) for row in changed}
    untouched = [job_id for job_id in ids if job_id not in result]
    if untouched:
        for row in conn.execute("SELECT id, state FROM jobs WHERE id = ANY(%s)", (untouched,)):
            result[row["id"]] = (row["state"], row["state"])
    return {job_id: result.get(job_id, (None, None)) for job_id in ids}


def list_jobs(conn: psycopg.Connection, *, user: str | None, group: str | None,
              states: list[str] | None, limit: int) -> list[dict]:
    return conn.execute(
        """SELECT * FROM jobs
           WHERE (%(user)s::text IS NULL OR user_name = %(user)s)
             AND (%(group)s::text IS NULL OR group_name = %(group)s)
             AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s))
           ORDER BY id DESC LIMIT %(limit)s""",
        {"user": user, "group": group, "states": states, "limit": limit},
    ).fetchall()


def get_job(conn: psycopg.Connection, job_id: int) -> dict:
    row = conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()
    if row is None:
        raise NotFound(f"job {job_id} does not exist")
    return row
