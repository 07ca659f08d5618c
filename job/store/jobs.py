"""The queue's statements on jobs: submit, cancel, list, show.

They run under any of the database roles of sql/0005_roles.sql: row-level security shows a
submitter only its own jobs and lets it insert only its own, and a cancel goes through the function
job_cancel, which a submitter may call though it may not update jobs."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import psycopg
from psycopg.rows import class_row

from job.core import states
from job.core.errors import BadInput, NotFound, PermissionDenied
from job.core.job import COLUMNS, SUBMITTED, Job
from job.store import DictConnection
from job.store.params import json_param

if TYPE_CHECKING:
    from job.core.specs import JobSpec


def submit_columns() -> tuple[str, ...]:
    """What a submit writes: a column per field a submit takes, and the new job's state and first
    reason. They are all a submitter may insert: migrations.migrate grants these columns and no other."""
    return (*(field.column for field in SUBMITTED), "state", "reason", "message")


def insert_job(conn: DictConnection, spec: JobSpec) -> int:
    if spec.priority_class is not None:
        _check_class(conn, spec.group, spec.priority_class)
    values = [*(json_param(field.column, getattr(spec, field.spec)) for field in SUBMITTED),
              states.INITIAL, states.Reason.QUEUED, "waiting for the next tick"]
    try:
        row = conn.execute(
            f"INSERT INTO jobs ({', '.join(submit_columns())}) VALUES ({', '.join(['%s'] * len(values))}) RETURNING id",
            values,
        ).fetchone()
    except psycopg.errors.ForeignKeyViolation as exc:
        conn.rollback()
        # The constraint's name, not its detail: PostgreSQL leaves the detail out for a role that may
        # not read the key (a submitter under row-level security).
        if "group_name" in str(exc.diag.constraint_name or exc.diag.message_detail or ""):
            raise NotFound(f"group: {spec.group!r} does not exist (see `python -m job group list`)") from None
        raise NotFound(f"user: {spec.user!r} does not exist (add it with `python -m job user set {spec.user}`)") from None
    except psycopg.errors.InsufficientPrivilege:
        # Row-level security refused the row (a submitter may insert only its own jobs), or the
        # role may not insert jobs at all (then the error goes on as PostgreSQL's).
        conn.rollback()
        me = conn.execute(
            "SELECT current_user AS name, has_any_column_privilege('jobs', 'INSERT') AS submits").fetchone()
        if me["submits"] and spec.user != me["name"]:
            raise PermissionDenied(
                f"user: you are logged in as {me['name']!r} and may submit only as {me['name']!r}") from None
        raise
    return row["id"]


def _check_class(conn: DictConnection, group: str, name: str) -> None:
    """The class must be one of the group's. A `group set` that drops it between this check and the
    insert's commit leaves a job the tick fails with the reason (group_snapshot.build_snapshot)."""
    row = conn.execute("SELECT priority_classes FROM resource_groups WHERE name = %s", (group,)).fetchone()
    if row is None:
        raise NotFound(f"group: {group!r} does not exist (see `python -m job group list`)")
    names = [c["name"] for c in row["priority_classes"]]
    if name not in names:
        raise BadInput(f"priority_class: {name!r} is not a class of group {group!r} (its classes: {', '.join(names)})")


def cancel_jobs(conn: DictConnection, ids: list[int]) -> dict[int, tuple[str | None, str | None]]:
    """Cancel at once what is pending (CANCEL_PENDING), ask the tick to stop what Ray has
    (REQUEST_CANCEL). Returns, per id, the state before and after (None, None for an unknown id, or
    for another user's job when the caller may cancel only its own).

    The UPDATE jobs runs in the function job_cancel (sql/0005_roles.sql), as the tables' owner, for
    every role alike: a submitter may not update jobs, and the function changes only the caller's
    own jobs unless the caller may update every job. It takes its moves from here and refuses any
    move but these."""
    rows = conn.execute(
        "SELECT job_id, state_before, state_after FROM job_cancel(%s::bigint[], %s::text[], %s, %s::text[])",
        (ids, states.CANCEL_PENDING.sources, states.CANCEL_PENDING.target, states.REQUEST_CANCEL.sources),
    ).fetchall()
    result = {row["job_id"]: (row["state_before"], row["state_after"]) for row in rows}
    return {job_id: result.get(job_id, (None, None)) for job_id in ids}


# Job's columns by name: a column added by a migration and not to Job is not read.
_JOB = ", ".join(COLUMNS)


def _jobs(conn: DictConnection) -> psycopg.Cursor[Job]:
    return conn.cursor(row_factory=class_row(Job))


def list_jobs(conn: DictConnection, *, user: str | None, group: str | None,
              states: list[str] | None, limit: int) -> list[Job]:
    return _jobs(conn).execute(
        f"""SELECT {_JOB} FROM jobs
           WHERE (%(user)s::text IS NULL OR user_name = %(user)s)
             AND (%(group)s::text IS NULL OR group_name = %(group)s)
             AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s))
           ORDER BY id DESC LIMIT %(limit)s""",
        {"user": user, "group": group, "states": states, "limit": limit},
    ).fetchall()


def get_job(conn: DictConnection, job_id: int) -> Job:
    row = _jobs(conn).execute(f"SELECT {_JOB} FROM jobs WHERE id = %s", (job_id,)).fetchone()
    if row is None:
        me = own_jobs_only(conn)
        raise NotFound(f"job {job_id} does not exist" + (f" or is not yours ({only_own(me)})" if me else ""))
    return row


def running_seen(conn: DictConnection, job: Job) -> datetime | None:
    """When a tick first saw the job's current attempt run (its `started` event), if it did."""
    if job.placed_at is None:
        return None
    seen = conn.execute("SELECT min(at) AS at FROM job_events WHERE job_id = %s AND kind = 'started' AND attempt = %s",
                        (job.id, job.attempt)).fetchone()
    return seen["at"]


def own_jobs_only(conn: DictConnection) -> str | None:
    """The caller's name if row-level security shows it only its own jobs (a submitter), else None."""
    row = conn.execute(
        """SELECT current_user AS name,
                  row_security_active('jobs') AND NOT (pg_has_role('job_admin', 'MEMBER')
                      OR pg_has_role('job_scheduler', 'MEMBER') OR pg_has_role('job_reader', 'MEMBER')) AS own_only""",
    ).fetchone()
    return row["name"] if row["own_only"] else None


def only_own(name: str) -> str:
    """What a submitter may see and cancel, for a message."""
    return f"you are logged in as {name!r} and see and cancel only your own jobs"
