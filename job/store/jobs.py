"""The queue's statements on jobs: submit, cancel, list, show.

They run under any of the database roles of sql/0005_roles.sql: row-level security shows a
submitter only its own jobs and lets it insert only its own, and a cancel goes through the function
job_cancel, which a submitter may call though it may not update jobs."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import psycopg
from psycopg.rows import class_row

from job.core import states
from job.core.arrays import ArraySummary
from job.core.errors import BadInput, NotFound, PermissionDenied
from job.core.job import ARRAY_COLUMNS, COLUMNS, SUBMITTED, Job, JobField
from job.store import DictConnection, one
from job.store.params import json_param

if TYPE_CHECKING:
    from job.core.arrays import ArraySpec


class JobSpec(Protocol):
    """The fields of core/specs.py's JobSpec read by name (here, in job.api and cli/schedules.py):
    JobSpec is a model made at import from the field table (core/job.py SUBMITTED), whose fields
    a type checker cannot see; the others are read through the table (spec_name)."""

    @property
    def user(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def priority_class(self) -> str | None: ...
    @property
    def runtime_env(self) -> dict[str, Any]: ...
    @property
    def after(self) -> list[dict[str, Any]] | None: ...


def submit_columns() -> tuple[str, ...]:
    """What a submit writes: a column per field a submit takes, and the new job's state and first
    reason. They are all a submitter may insert: migrations.migrate grants these columns and no other."""
    return (*(field.column for field in SUBMITTED), "state", "reason", "message", *ARRAY_COLUMNS)


def spec_name(field: JobField) -> str:
    """A submitted field's name in JobSpec (and the dest of its `submit` option): every field of
    SUBMITTED has one, which JobField's type, the table's for every field, cannot say."""
    assert field.spec is not None, field
    return field.spec


def insert_job(conn: DictConnection, spec: JobSpec, array: ArraySpec | None = None) -> int:
    """The new job's id; for an array, the id of its first task (its `array_id`), every task
    written by one statement whatever their number."""
    check_class(conn, spec)
    if spec.after:
        _check_after(conn, [item["job"] for item in spec.after])
    values = {f"v{index}": value for index, value in enumerate(
        [*(json_param(field.column, getattr(spec, spec_name(field))) for field in SUBMITTED),
         states.INITIAL, states.Reason.QUEUED, "waiting for the next tick"])}
    columns = ", ".join(submit_columns()[:len(values)])
    given = ", ".join(f"%({name})s" for name in values)
    if array is None:
        statement = f"INSERT INTO jobs ({columns}) VALUES ({given}) RETURNING id"
    else:
        # The first task, whose array_id the trigger of sql/0027 sets to its own id, then the
        # others naming it, in index order: the first has the least id.
        statement = f"""WITH first AS (
                INSERT INTO jobs ({columns}, array_index, array_throttle)
                VALUES ({given}, %(first)s, %(throttle)s) RETURNING id),
            rest AS (
                INSERT INTO jobs ({columns}, array_index, array_throttle, array_id)
                SELECT {given}, u.index, %(throttle)s, first.id
                FROM first, unnest(%(rest)s::integer[]) WITH ORDINALITY AS u(index, position) ORDER BY u.position)
            SELECT id FROM first"""
        values |= {"first": array.indexes[0], "rest": list(array.indexes[1:]), "throttle": array.throttle}
    try:
        row = one(conn.execute(statement, values))
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
        me = one(conn.execute("SELECT current_user AS name, pg_has_role('job_submitter', 'MEMBER') AS submits"))
        if me["submits"] and spec.user != me["name"]:
            raise PermissionDenied(
                f"user: you are logged in as {me['name']!r} and may submit only as {me['name']!r}") from None
        raise
    return row["id"]


def check_class(conn: DictConnection, spec: JobSpec) -> None:
    """The class must be one of the group's. A `group set` that drops it between this check and the
    insert's commit leaves a job the tick fails with the reason (group_snapshot.build_snapshot)."""
    if spec.priority_class is None:
        return
    group, name = spec.group, spec.priority_class
    row = conn.execute("SELECT priority_classes FROM resource_groups WHERE name = %s", (group,)).fetchone()
    if row is None:
        raise NotFound(f"group: {group!r} does not exist (see `python -m job group list`)")
    names = [c["name"] for c in row["priority_classes"]]
    if name not in names:
        raise BadInput(f"priority_class: {name!r} is not a class of group {group!r} (its classes: {', '.join(names)})")


def _check_after(conn: DictConnection, ids: list[int]) -> None:
    """Each job named must exist and be the caller's to see (row-level security: a submitter sees
    its own jobs), so that only existing jobs are named and no cycle can arise. A job pruned
    between this check and the commit leaves a dependency the tick finds gone."""
    seen = {row["id"] for row in conn.execute("SELECT id FROM jobs WHERE id = ANY(%s)", (ids,)).fetchall()}
    missing = [job_id for job_id in ids if job_id not in seen]
    if missing:
        me = own_jobs_only(conn)
        raise BadInput(f"after: job {missing[0]} does not exist" + (f" or is not yours ({only_own(me)})" if me else ""))


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


# What `jobs` filters by: a user, a group, states (None: any).
_FILTERS = """(%(user)s::text IS NULL OR user_name = %(user)s)
              AND (%(group)s::text IS NULL OR group_name = %(group)s)
              AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s))"""


def list_jobs(conn: DictConnection, *, user: str | None, group: str | None,
              states: list[str] | None, limit: int) -> list[Job]:
    return _jobs(conn).execute(
        f"SELECT {_JOB} FROM jobs WHERE {_FILTERS} ORDER BY id DESC LIMIT %(limit)s",
        {"user": user, "group": group, "states": states, "limit": limit},
    ).fetchall()


def get_job(conn: DictConnection, job_id: int) -> Job:
    row = _jobs(conn).execute(f"SELECT {_JOB} FROM jobs WHERE id = %s", (job_id,)).fetchone()
    if row is None:
        me = own_jobs_only(conn)
        raise NotFound(f"job {job_id} does not exist" + (f" or is not yours ({only_own(me)})" if me else ""))
    return row


def edges(conn: DictConnection, job: Job) -> tuple[dict[int, str], list[int]]:
    """A job's dependencies both ways, as far as the caller sees (row-level security): the states
    of the jobs it waits for, by id (a job gone or not the caller's is not in it), and the ids of
    the jobs that wait for it (through the index jobs_after, sql/0025)."""
    named = [item["job"] for item in job.after or () if isinstance(item, dict) and isinstance(item.get("job"), int)]
    found = {row["id"]: row["state"] for row in
             conn.execute("SELECT id, state FROM jobs WHERE id = ANY(%s)", (named,)).fetchall()} if named else {}
    before = conn.execute("SELECT id FROM jobs WHERE after @> jsonb_build_array(jsonb_build_object('job', %s::bigint))"
                          " ORDER BY id", (job.id,)).fetchall()
    return found, [row["id"] for row in before]


def running_seen(conn: DictConnection, job: Job) -> datetime | None:
    """When a tick first saw the job's current attempt run (its `started` event), if it did."""
    if job.placed_at is None:
        return None
    seen = one(conn.execute("SELECT min(at) AS at FROM job_events WHERE job_id = %s AND kind = 'started' AND attempt = %s",
                            (job.id, job.attempt)))
    return seen["at"]


def own_jobs_only(conn: DictConnection) -> str | None:
    """The caller's name if row-level security shows it only its own jobs (a submitter), else None."""
    row = one(conn.execute(
        """SELECT current_user AS name,
                  row_security_active('jobs') AND NOT (pg_has_role('job_admin', 'MEMBER')
                      OR pg_has_role('job_scheduler', 'MEMBER') OR pg_has_role('job_reader', 'MEMBER')) AS own_only""",
    ))
    return row["name"] if row["own_only"] else None


def only_own(name: str) -> str:
    """What a submitter may see and cancel, for a message."""
    return f"you are logged in as {name!r} and see and cancel only your own jobs"


def list_listed(conn: DictConnection, *, user: str | None, group: str | None,
                states: list[str] | None, limit: int) -> list[Job]:
    """As `list_jobs`, an array counted as one job: of each array with a task that matches, its
    first such task (newest arrays and jobs first, by the array's id), through sql/0027's jobs_listed."""
    return _jobs(conn).execute(
        f"""SELECT DISTINCT ON (coalesce(array_id, id)) {_JOB} FROM jobs
            WHERE coalesce(array_id, id) IN (
                SELECT DISTINCT coalesce(array_id, id) AS listed FROM jobs WHERE {_FILTERS}
                ORDER BY listed DESC LIMIT %(limit)s)
              AND {_FILTERS}
            ORDER BY coalesce(array_id, id) DESC, id""",
        {"user": user, "group": group, "states": states, "limit": limit},
    ).fetchall()


def array_jobs(conn: DictConnection, array_id: int, *, states: list[str] | None, limit: int) -> list[Job]:
    """An array's tasks, in index order."""
    return _jobs(conn).execute(
        f"""SELECT {_JOB} FROM jobs WHERE array_id = %(array)s AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s))
            ORDER BY array_index LIMIT %(limit)s""",
        {"array": array_id, "states": states, "limit": limit},
    ).fetchall()


def array_summaries(conn: DictConnection, ids: list[int]) -> dict[int, ArraySummary]:
    """The arrays of these ids (those that are not an array's are left out), each in one row."""
    rows = conn.execute(
        """SELECT array_id, max(array_throttle) AS throttle, array_agg(array_index ORDER BY array_index) AS indexes,
                  array_agg(state) AS states
           FROM jobs WHERE array_id = ANY(%s) GROUP BY array_id""", (ids,)).fetchall()
    return {row["array_id"]: ArraySummary(row["array_id"], tuple(row["indexes"]), row["throttle"],
                                          dict(Counter(row["states"]))) for row in rows}


def array_tasks(conn: DictConnection, ids: list[int]) -> dict[int, list[int]]:
    """The tasks of each of these ids that is an array's (its first task's), in id order."""
    rows = conn.execute("""SELECT array_id, array_agg(id ORDER BY id) AS tasks FROM jobs
                           WHERE array_id = ANY(%s) GROUP BY array_id""", (ids,)).fetchall()
    return {row["array_id"]: row["tasks"] for row in rows}
