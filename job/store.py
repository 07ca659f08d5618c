"""The SQL of the queue, groups and users: every statement the CLI and `job.queue` run.
(The tick's statements live in job/tick_store.py.)"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from job.errors import BadInput, Conflict, NotFound
from job.specs import GroupSpec, JobSpec, UserSpec

ACTIVE_STATES = ("SUBMITTING", "SUBMITTED", "RUNNING")
FINISHED_STATES = ("SUCCEEDED", "FAILED", "STOPPED", "CANCELLED")
STATES = ("PENDING", *ACTIVE_STATES, *FINISHED_STATES)

_GROUP_COLUMNS = tuple(GroupSpec.model_fields)
_USER_COLUMNS = tuple(UserSpec.model_fields)
_JSON_COLUMNS = {"node_labels", "max_resources_per_user", "max_resources", "runtime_env", "metadata", "resources"}


def _param(column: str, value: Any) -> Any:
    return Jsonb(value) if column in _JSON_COLUMNS and value is not None else value


# -- jobs ------------------------------------------------------------------------------------


def insert_job(conn: psycopg.Connection, spec: JobSpec) -> int:
    try:
        row = conn.execute(
            """INSERT INTO jobs (user_name, group_name, entrypoint, resources, node_labels, runtime_env,
                                 priority, not_before, max_runtime_s, metadata, reason, message)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'Queued', 'waiting for the next tick')
               RETURNING id""",
            (spec.user, spec.group, spec.entrypoint, Jsonb(spec.resources), Jsonb(spec.node_labels),
             Jsonb(spec.runtime_env), spec.priority, spec.not_before, spec.max_runtime_s, Jsonb(spec.metadata)),
        ).fetchone()
    except psycopg.errors.ForeignKeyViolation as exc:
        conn.rollback()
        if "group_name" in str(exc.diag.message_detail or ""):
            raise NotFound(f"group: {spec.group!r} does not exist (see `python -m job group list`)") from None
        raise NotFound(f"user: {spec.user!r} does not exist (add it with `python -m job user set {spec.user}`)") from None
    return row["id"]


def cancel_jobs(conn: psycopg.Connection, ids: list[int]) -> dict[int, tuple[str | None, str | None]]:
    """Cancel at once what is pending, ask the tick to stop what Ray has. Returns, per id, the
    state before and after (None, None for an unknown id)."""
    changed = conn.execute(
        """WITH target AS (SELECT id, state FROM jobs WHERE id = ANY(%(ids)s) FOR UPDATE)
           UPDATE jobs SET
               state = CASE WHEN target.state = 'PENDING' THEN 'CANCELLED' ELSE jobs.state END,
               finished_at = CASE WHEN target.state = 'PENDING' THEN now() ELSE jobs.finished_at END,
               reason = CASE WHEN target.state = 'PENDING' THEN 'Cancelled' ELSE jobs.reason END,
               message = CASE WHEN target.state = 'PENDING' THEN 'cancelled before it started'
                              ELSE jobs.message END,
               cancel_requested_at = coalesce(jobs.cancel_requested_at, now()),
               updated_at = now()
           FROM target
           WHERE jobs.id = target.id AND target.state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING')
           RETURNING jobs.id, target.state AS before, jobs.state AS after""",
        {"ids": ids},
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


# -- groups ----------------------------------------------------------------------------------


def insert_group(conn: psycopg.Connection, spec: GroupSpec) -> None:
    values = spec.model_dump()
    try:
        conn.execute(
            f"INSERT INTO resource_groups ({', '.join(_GROUP_COLUMNS)}) VALUES ({', '.join(['%s'] * len(_GROUP_COLUMNS))})",
            [_param(column, values[column]) for column in _GROUP_COLUMNS],
        )
    except psycopg.errors.UniqueViolation:
        conn.rollback()
        raise Conflict(f"group {spec.name!r} already exists (change it with `python -m job group set {spec.name}`)") from None


def get_group(conn: psycopg.Connection, name: str, *, for_update: bool = False) -> dict:
    row = conn.execute(
        "SELECT * FROM resource_groups WHERE name = %s" + (" FOR UPDATE" if for_update else ""), (name,)
    ).fetchone()
    if row is None:
        raise NotFound(f"group {name!r} does not exist (see `python -m job group list`)")
    return row


def update_group(conn: psycopg.Connection, spec: GroupSpec) -> None:
    values = spec.model_dump()
    columns = [column for column in _GROUP_COLUMNS if column != "name"]
    conn.execute(
        f"UPDATE resource_groups SET {', '.join(f'{column} = %s' for column in columns)}, updated_at = now() WHERE name = %s",
        [*(_param(column, values[column]) for column in columns), spec.name],
    )


def list_groups(conn: psycopg.Connection) -> list[dict]:
    return conn.execute(
        """SELECT g.*, count(j.id) FILTER (WHERE j.state = 'PENDING') AS pending,
                  count(j.id) FILTER (WHERE j.state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING')) AS active
           FROM resource_groups g LEFT JOIN jobs j ON j.group_name = g.name
           GROUP BY g.name ORDER BY g.name"""
    ).fetchall()


def remove_group(conn: psycopg.Connection, name: str) -> int:
    """Remove a group without pending or active jobs, with its finished jobs; returns how many."""
    get_group(conn, name, for_update=True)
    busy = conn.execute(
        "SELECT count(*) AS n FROM jobs WHERE group_name = %s AND state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING')",
        (name,),
    ).fetchone()["n"]
    if busy:
        raise Conflict(f"group {name!r} has {busy} pending or active job(s): cancel them or wait for them to finish first")
    finished = conn.execute("DELETE FROM jobs WHERE group_name = %s", (name,)).rowcount
    conn.execute("DELETE FROM resource_groups WHERE name = %s", (name,))
    return finished


# -- users -----------------------------------------------------------------------------------


def upsert_user(conn: psycopg.Connection, spec: UserSpec) -> None:
    values = spec.model_dump()
    updates = [column for column in _USER_COLUMNS if column != "name"]
    conn.execute(
        f"""INSERT INTO users ({', '.join(_USER_COLUMNS)}) VALUES ({', '.join(['%s'] * len(_USER_COLUMNS))})
            ON CONFLICT (name) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in updates)}, updated_at = now()""",
        [_param(column, values[column]) for column in _USER_COLUMNS],
    )


def get_user(conn: psycopg.Connection, name: str) -> dict | None:
    return conn.execute("SELECT * FROM users WHERE name = %s", (name,)).fetchone()


def user_usage(conn: psycopg.Connection, name: str) -> list[dict]:
    return conn.execute(
        """SELECT g.name AS group, coalesce(u.usage, 0) AS usage,
                  count(j.id) FILTER (WHERE j.state = 'PENDING') AS pending,
                  count(j.id) FILTER (WHERE j.state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING')) AS active,
                  count(j.id) FILTER (WHERE j.state IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'CANCELLED')) AS finished
           FROM resource_groups g
           LEFT JOIN user_usage u ON u.group_name = g.name AND u.user_name = %(name)s
           LEFT JOIN jobs j ON j.group_name = g.name AND j.user_name = %(name)s
           GROUP BY g.name, u.usage
           HAVING count(j.id) > 0 OR coalesce(u.usage, 0) > 0
           ORDER BY g.name""",
        {"name": name},
    ).fetchall()


def list_users(conn: psycopg.Connection) -> list[dict]:
    return conn.execute(
        """SELECT u.*, count(j.id) FILTER (WHERE j.state = 'PENDING') AS pending,
                  count(j.id) FILTER (WHERE j.state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING')) AS active
           FROM users u LEFT JOIN jobs j ON j.user_name = u.name
           GROUP BY u.name ORDER BY u.name"""
    ).fetchall()


def require_known_states(states: list[str]) -> list[str]:
    unknown = [state for state in states if state not in STATES]
    if unknown:
        raise BadInput(f"state: unknown {', '.join(unknown)} (one of {', '.join(STATES)})")
    return states
