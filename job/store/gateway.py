"""The gateway's statements: the submission ids Ray's clients know queue jobs by
(sql/0018_tokens.sql gateway_submissions), each user's own (sql/0023_submission_ids.sql). They run
as the token's user: row-level security shows it only its own jobs, and only those are named here."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
from psycopg.rows import class_row

from job.core.errors import BadInput
from job.core.job import COLUMNS, Job
from job.store import DictConnection

# At most this many jobs in a list: Ray's own list only grows, the gateway's stops here.
LIST_LIMIT = 1000
LIST_BATCH = 32
# The address of the job's cluster (a job placed before clusters had names: the group's first).
_ADDRESS = """coalesce((SELECT c ->> 'address' FROM jsonb_array_elements(g.clusters) c WHERE c ->> 'name' = j.cluster),
                      g.clusters -> 0 ->> 'address') AS ray_address"""
_JOB_COLUMNS = ", ".join(["s.submission_id AS gateway_id", _ADDRESS, *(f"j.{column}" for column in COLUMNS)])
_FROM = """gateway_submissions s JOIN jobs j ON j.id = s.job_id JOIN resource_groups g ON g.name = j.group_name"""


@dataclass(frozen=True, slots=True)
class GatewayJob(Job):
    """A job as the gateway reads it: the id its user's Ray client knows it by, and its cluster's address."""

    gateway_id: str
    ray_address: str


def _jobs(conn: DictConnection) -> psycopg.Cursor[GatewayJob]:
    return conn.cursor(row_factory=class_row(GatewayJob))


def name_job(conn: DictConnection, submission_id: str, job_id: int) -> None:
    """The id among the job's user's ids: another user's job of the same id is neither found nor told of."""
    try:
        conn.execute("""INSERT INTO gateway_submissions (user_name, submission_id, job_id)
                        SELECT user_name, %s, id FROM jobs WHERE id = %s""", (submission_id, job_id))
    except psycopg.errors.UniqueViolation:
        conn.rollback()
        raise BadInput(f"submission_id: {submission_id!r} is already the id of another job") from None


def job_named(conn: DictConnection, user: str, group: str, submission_id: str) -> GatewayJob | None:
    return _jobs(conn).execute(f"""SELECT {_JOB_COLUMNS} FROM {_FROM}
                            WHERE s.user_name = %s AND s.submission_id = %s AND j.group_name = %s""",
                        (user, submission_id, group)).fetchone()


def named_jobs(conn: DictConnection, group: str, limit: int = LIST_LIMIT) -> Iterator[GatewayJob]:
    """The group's jobs, newest first, fetched LIST_BATCH at a time (a job may be 150 KB): the
    caller stops when its answer is full, and no more is read."""
    with conn.cursor(name="gateway_named_jobs", row_factory=class_row(GatewayJob)) as cursor:
        cursor.itersize = LIST_BATCH
        cursor.execute(f"SELECT {_JOB_COLUMNS} FROM {_FROM} WHERE j.group_name = %s ORDER BY j.id DESC LIMIT %s",
                       (group, limit))
        yield from cursor


def forget(conn: DictConnection, job_id: int) -> bool:
    """The job leaves the gateway's view (Ray's `delete`), its id free again; the queue keeps its history."""
    return conn.execute("DELETE FROM gateway_submissions WHERE job_id = %s RETURNING job_id", (job_id,)).fetchone() is not None


def ray_addresses(conn: DictConnection, group: str) -> list[str] | None:
    """The addresses of the group's clusters that take new jobs; None: no such group."""
    row = conn.execute("SELECT clusters FROM resource_groups WHERE name = %s", (group,)).fetchone()
    return None if row is None else [c["address"] for c in row["clusters"] if not c.get("removing")]


def waiting_packages(conn: DictConnection) -> list[dict]:
    """The gcs:// packages of jobs waiting in the queue, with their clusters' addresses
    (sql/0018_tokens.sql gateway_waiting_packages): what the gateway keeps pinned in Ray."""
    return conn.execute("SELECT ray_address, uri FROM gateway_waiting_packages()").fetchall()
