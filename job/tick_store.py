"""The SQL of a tick. Each function is one statement over a whole group, whatever the number of
jobs, so that a tick's round trips stay flat from a thousand pending jobs to a hundred thousand."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

# Advisory lock namespace of the per-group tick lock: pg_try_advisory_lock(int, int).
TICK_LOCK_CLASS = 0x6A6F62  # "job"


class CountingConnection(psycopg.Connection):
    """Counts the statements a tick sends, for its summary line and the benchmark."""

    statements = 0

    def execute(self, *args: Any, **kwargs: Any):
        self.statements += 1
        return super().execute(*args, **kwargs)


def installation_id(conn: psycopg.Connection) -> str:
    return conn.execute("SELECT id FROM installation").fetchone()["id"]


def groups(conn: psycopg.Connection, name: str | None) -> list[dict]:
    return conn.execute(
        "SELECT * FROM resource_groups WHERE %(name)s::text IS NULL OR name = %(name)s ORDER BY name", {"name": name}
    ).fetchall()


def try_lock(conn: psycopg.Connection, group: str) -> bool:
    return conn.execute(
        "SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS locked", (TICK_LOCK_CLASS, group)
    ).fetchone()["locked"]


def unlock(conn: psycopg.Connection, group: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (TICK_LOCK_CLASS, group))


def active_jobs(conn: psycopg.Connection, group: str) -> list[dict]:
    return conn.execute(
        """SELECT id, user_name, state, resources, node, attempt, submission_id, ray_status, ray_message,
                  reason, message, started_at, finished_at, exit_code, max_runtime_s, cancel_requested_at
           FROM jobs WHERE group_name = %s AND state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING')
           ORDER BY id""",
        (group,),
    ).fetchall()


def pending_jobs(conn: psycopg.Connection, group: str) -> list[tuple]:
    """(id, user, resources JSON text, node_labels JSON text, priority, submitted_at, not_before,
    reason, message) per pending job. Tuples, and JSON as text, because with 100k jobs decoding a
    jsonb and building a dict per row costs more than the rest of the read: the few distinct
    requests are decoded once each by the caller."""
    return conn.cursor(row_factory=tuple_row).execute(
        """SELECT id, user_name, resources::text, node_labels::text, priority, submitted_at, not_before, reason, message
           FROM jobs WHERE group_name = %s AND state = 'PENDING' ORDER BY id""",
        (group,),
    ).fetchall()


def users_of_group(conn: psycopg.Connection, group: str) -> list[dict]:
    """Every user with jobs waiting or active in the group, or with usage there."""
    return conn.execute(
        """SELECT u.name, u.shares, u.max_running, u.max_resources, coalesce(uu.usage, 0) AS usage
           FROM users u LEFT JOIN user_usage uu ON uu.user_name = u.name AND uu.group_name = %(group)s
           WHERE uu.usage > 0 OR EXISTS (
               SELECT 1 FROM jobs j WHERE j.user_name = u.name AND j.group_name = %(group)s
                 AND j.state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING'))""",
        {"group": group},
    ).fetchall()


def group_state(conn: psycopg.Connection, group: str) -> dict[str, dict]:
    return {row["name"]: row["document"]
            for row in conn.execute("SELECT name, document FROM group_state WHERE group_name = %s", (group,))}


def fail_pending_timeouts(conn: psycopg.Connection, group: str, timeout_s: float, now: datetime) -> list[dict]:
    return conn.execute(
        """UPDATE jobs SET state = 'FAILED', reason = 'PendingTimeout', finished_at = %(now)s, updated_at = now(),
                  message = 'waited longer than the group''s pending timeout of ' || %(timeout)s || ' s'
           WHERE group_name = %(group)s AND state = 'PENDING'
             AND submitted_at < %(now)s - make_interval(secs => %(timeout)s)
           RETURNING id, user_name""",
        {"group": group, "timeout": timeout_s, "now": now},
    ).fetchall()


# Columns the reconciliation may change, in the order of `update_jobs` rows.
JOB_UPDATE_COLUMNS = ("state", "node", "ray_status", "ray_message", "reason", "message", "started_at",
                      "finished_at", "exit_code")
_UPDATE_TYPES = ("text", "text", "text", "text", "text", "text", "timestamptz", "timestamptz", "int")


def update_jobs(conn: psycopg.Connection, updates: dict[int, dict[str, Any]], *, from_states: tuple[str, ...]) -> list[int]:
    """Write each job's new fields (all of JOB_UPDATE_COLUMNS) in one statement, only where the job is
    still in one of `from_states`; returns the ids written."""
    if not updates:
        return []
    ids = list(updates)
    columns = [[updates[job_id][column] for job_id in ids] for column in JOB_UPDATE_COLUMNS]
    assignments = ", ".join(f"{column} = u.{column}" for column in JOB_UPDATE_COLUMNS)
    arrays = ", ".join(f"%s::{sql_type}[]" for sql_type in _UPDATE_TYPES)
    rows = conn.execute(
        f"""UPDATE jobs SET {assignments}, updated_at = now()
            FROM unnest(%s::bigint[], {arrays}) AS u(id, {', '.join(JOB_UPDATE_COLUMNS)})
            WHERE jobs.id = u.id AND jobs.state = ANY(%s)
            RETURNING jobs.id""",
        [ids, *columns, list(from_states)],
    ).fetchall()
    return [row["id"] for row in rows]


def return_to_pending(conn: psycopg.Connection, outcomes: dict[int, tuple[str, str, str]], max_attempts: int) -> list[dict]:
    """Jobs whose attempt did not start (id -> (from_state, reason, message)): back to PENDING, or
    FAILED once the group's attempts are spent. Returns id, state for each."""
    if not outcomes:
        return []
    ids = list(outcomes)
    return conn.execute(
        """UPDATE jobs SET
               state = CASE WHEN jobs.attempt >= %(max)s THEN 'FAILED' ELSE 'PENDING' END,
               finished_at = CASE WHEN jobs.attempt >= %(max)s THEN now() END,
               reason = u.reason,
               message = u.message || CASE WHEN jobs.attempt >= %(max)s
                   THEN ' (attempt ' || jobs.attempt || ' of ' || %(max)s || ', no attempt left)'
                   ELSE ' (attempt ' || jobs.attempt || ' of ' || %(max)s || ')' END,
               node = NULL, ray_status = NULL, updated_at = now()
           FROM unnest(%(ids)s::bigint[], %(from)s::text[], %(reasons)s::text[], %(messages)s::text[])
                AS u(id, from_state, reason, message)
           WHERE jobs.id = u.id AND jobs.state = u.from_state
           RETURNING jobs.id, jobs.state, jobs.user_name""",
        {"max": max_attempts, "ids": ids, "from": [outcomes[i][0] for i in ids],
         "reasons": [outcomes[i][1] for i in ids], "messages": [outcomes[i][2] for i in ids]},
    ).fetchall()


def cancel_absent(conn: psycopg.Connection, ids: list[int]) -> list[int]:
    """Jobs with a cancel request that Ray does not know (never received, or forgot): CANCELLED."""
    if not ids:
        return []
    return [row["id"] for row in conn.execute(
        """UPDATE jobs SET state = 'CANCELLED', reason = 'Cancelled', message = 'cancelled; Ray had not started it',
                  finished_at = now(), node = NULL, updated_at = now()
           WHERE id = ANY(%s) AND state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING') RETURNING id""",
        (ids,),
    )]


def mark_stop_reason(conn: psycopg.Connection, reasons: dict[int, tuple[str, str]]) -> None:
    """Remember why we asked Ray to stop a job (Cancelled, RuntimeLimit), for when it has stopped."""
    if not reasons:
        return
    ids = list(reasons)
    conn.execute(
        """UPDATE jobs SET reason = u.reason, message = u.message, updated_at = now()
           FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS u(id, reason, message) WHERE jobs.id = u.id""",
        (ids, [reasons[i][0] for i in ids], [reasons[i][1] for i in ids]),
    )


def charge_usage(conn: psycopg.Connection, group: str, usage: dict[str, float], now: datetime) -> None:
    conn.execute(
        """WITH charged AS (
               INSERT INTO user_usage (group_name, user_name, usage)
               SELECT %(group)s, u.name, u.usage FROM unnest(%(names)s::text[], %(usage)s::float8[]) AS u(name, usage)
               ON CONFLICT (group_name, user_name) DO UPDATE SET usage = excluded.usage)
           UPDATE resource_groups SET usage_charged_at = %(now)s WHERE name = %(group)s""",
        {"group": group, "names": list(usage), "usage": list(usage.values()), "now": now},
    )


def commit_intents(conn: psycopg.Connection, placements: list[tuple[int, str]], installation: str) -> list[dict]:
    """The write-ahead intent: chosen node, next attempt and its submission_id, for jobs still
    PENDING and not cancelled meanwhile. Returns what to submit."""
    if not placements:
        return []
    return conn.execute(
        """UPDATE jobs SET state = 'SUBMITTING', node = p.node, attempt = jobs.attempt + 1,
                  submission_id = %(installation)s || '-' || jobs.id || '-' || (jobs.attempt + 1),
                  reason = 'Submitting', message = 'placed on node ' || p.node || ', being submitted to Ray',
                  ray_status = NULL, ray_message = NULL, updated_at = now()
           FROM unnest(%(ids)s::bigint[], %(nodes)s::text[]) AS p(id, node)
           WHERE jobs.id = p.id AND jobs.state = 'PENDING'
           RETURNING jobs.id, jobs.user_name, jobs.group_name, jobs.entrypoint, jobs.runtime_env, jobs.metadata,
                     jobs.resources, jobs.node, jobs.attempt, jobs.submission_id""",
        {"installation": installation, "ids": [job_id for job_id, _ in placements],
         "nodes": [node for _, node in placements]},
    ).fetchall()


def fail_invalid(conn: psycopg.Connection, invalid: dict[int, str]) -> None:
    """Pending rows the planner cannot read (written around `submit`'s checks): FAILED, with why."""
    if not invalid:
        return
    ids = list(invalid)
    conn.execute(
        """UPDATE jobs SET state = 'FAILED', reason = 'InvalidJob', message = u.message, finished_at = now(), updated_at = now()
           FROM unnest(%s::bigint[], %s::text[]) AS u(id, message) WHERE jobs.id = u.id AND jobs.state = 'PENDING'""",
        (ids, [invalid[i] for i in ids]),
    )


def set_waiting(conn: psycopg.Connection, waiting: dict[int, tuple[str, str]]) -> None:
    if not waiting:
        return
    ids = list(waiting)
    conn.execute(
        """UPDATE jobs SET reason = u.reason, message = u.message, updated_at = now()
           FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS u(id, reason, message)
           WHERE jobs.id = u.id AND jobs.state = 'PENDING'""",
        (ids, [waiting[i][0] for i in ids], [waiting[i][1] for i in ids]),
    )


def save_group_state(conn: psycopg.Connection, group: str, documents: dict[str, dict]) -> None:
    if not documents:
        return
    conn.execute(
        """INSERT INTO group_state (group_name, name, document)
           SELECT %s, d.name, d.document FROM unnest(%s::text[], %s::jsonb[]) AS d(name, document)
           ON CONFLICT (group_name, name) DO UPDATE SET document = excluded.document, updated_at = now()""",
        (group, list(documents), [Jsonb(doc) for doc in documents.values()]),
    )


def mark_submitted(conn: psycopg.Connection, ids: list[int]) -> None:
    if not ids:
        return
    conn.execute(
        """UPDATE jobs SET state = 'SUBMITTED', reason = NULL, message = NULL, ray_status = 'PENDING', updated_at = now()
           WHERE id = ANY(%s) AND state = 'SUBMITTING'""",
        (ids,),
    )
