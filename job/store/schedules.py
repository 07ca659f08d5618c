"""Statements on schedules and their slots (sql/0026_schedules.sql): the commands' (add, list,
show, pause, resume, remove), under row-level security as jobs are, and the tick's: one statement
reads a group's schedules with their last slot and run, and a due slot's job is inserted with its
slot row in the tick's transaction."""

from __future__ import annotations

from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from job.core import states
from job.core.errors import BadInput, NotFound, PermissionDenied
from job.core.job import REQUIRED, SUBMITTED
from job.core.schedules import Schedule, ScheduleRun
from job.store import DictConnection, one
from job.store.jobs import own_jobs_only

_COLUMNS = ", ".join(Schedule.__dataclass_fields__)
# The last slot, and the last submitted one's job with its state, of schedule `s`: the job read by
# its key, never a scan of the jobs' history.
_LAST = """LEFT JOIN LATERAL (SELECT slot FROM schedule_slots WHERE schedule_name = s.name
                               ORDER BY slot DESC LIMIT 1) AS last ON true
           LEFT JOIN LATERAL (SELECT job_id, (SELECT state FROM jobs WHERE jobs.id = slots.job_id) AS state
                               FROM schedule_slots AS slots WHERE schedule_name = s.name AND job_id IS NOT NULL
                               ORDER BY slot DESC LIMIT 1) AS run ON true"""


def _not_found(conn: DictConnection, name: str) -> NotFound:
    me = own_jobs_only(conn)
    return NotFound(f"schedule {name!r} does not exist" + (f" or is not yours (you are logged in as {me!r})"
                                                            if me else "") + " (see `python -m job schedule list`)")


def insert_schedule(conn: DictConnection, schedule: Schedule) -> None:
    values = {name: getattr(schedule, name) for name in Schedule.__dataclass_fields__ if name != "created_at"}
    values["template"] = Jsonb(values["template"])
    try:
        conn.execute(f"INSERT INTO schedules ({', '.join(values)}) VALUES ({', '.join(['%s'] * len(values))})",
                     list(values.values()))
    except psycopg.errors.UniqueViolation:
        conn.rollback()
        raise BadInput(f"name: a schedule named {schedule.name!r} exists already") from None
    except psycopg.errors.ForeignKeyViolation as exc:
        conn.rollback()
        what = "group" if "group_name" in str(exc.diag.constraint_name or "") else "user"
        raise NotFound(f"{what}: {getattr(schedule, what + '_name')!r} does not exist") from None
    except psycopg.errors.InsufficientPrivilege:
        conn.rollback()
        me = own_jobs_only(conn)
        if me is not None and schedule.user_name != me:
            raise PermissionDenied(f"user: you are logged in as {me!r} and may add schedules only as {me!r}") from None
        raise


def _runs(where: str) -> str:
    """The statement of the schedules `where` holds, each with its last slot and run."""
    return f"""SELECT {', '.join(f's.{name}' for name in Schedule.__dataclass_fields__)},
                      last.slot AS last_slot, run.job_id AS last_job, run.state AS last_state
               FROM schedules s {_LAST} WHERE {where} ORDER BY s.name"""


def _read(rows: list[dict]) -> list[ScheduleRun]:
    return [ScheduleRun(Schedule(**{name: row[name] for name in Schedule.__dataclass_fields__}),
                        row["last_slot"], row["last_job"], row["last_state"]) for row in rows]


def group_schedules(conn: DictConnection, group: str) -> list[ScheduleRun]:
    """The tick's one read: the group's running (not paused) schedules, with their last slot and run."""
    return _read(conn.execute(_runs("s.group_name = %s AND NOT s.paused"), (group,)).fetchall())


def schedules(conn: DictConnection) -> list[ScheduleRun]:
    return _read(conn.execute(_runs("true")).fetchall())


def get_schedule(conn: DictConnection, name: str) -> ScheduleRun:
    found = _read(conn.execute(_runs("s.name = %s"), (name,)).fetchall())
    if not found:
        raise _not_found(conn, name)
    return found[0]


def set_paused(conn: DictConnection, name: str, paused: bool) -> None:
    if conn.execute("UPDATE schedules SET paused = %s WHERE name = %s", (paused, name)).rowcount == 0:
        raise _not_found(conn, name)


def remove_schedule(conn: DictConnection, name: str) -> None:
    """The schedule and its slots; the jobs it made stay, with its name."""
    if conn.execute("DELETE FROM schedules WHERE name = %s", (name,)).rowcount == 0:
        raise _not_found(conn, name)


def slots_of(conn: DictConnection, name: str, limit: int) -> list[dict]:
    """The schedule's last slots, newest first, with their job's state (None once pruned)."""
    return conn.execute(
        """SELECT s.slot, s.outcome, s.job_id, s.message, jobs.state
           FROM schedule_slots s LEFT JOIN jobs ON jobs.id = s.job_id
           WHERE s.schedule_name = %s ORDER BY s.slot DESC LIMIT %s""", (name, limit)).fetchall()


def take_slot(conn: DictConnection, name: str, slot: datetime, outcome: str, message: str | None) -> bool:
    """The slot's row, unless one is there already (another tick took the slot): whether it is ours."""
    return conn.execute(
        """INSERT INTO schedule_slots (schedule_name, slot, outcome, message) VALUES (%s, %s, %s, %s)
           ON CONFLICT DO NOTHING RETURNING slot""", (name, slot, outcome, message)).fetchone() is not None


# A scheduled job's columns: a submit's, from the template (the schedule's user and group, and the
# submit's defaults for what a template written past the CLI leaves out), and the schedule and slot.
_SUBMITTED = [field.column for field in SUBMITTED]
_DEFAULTS = Jsonb({field.column: field.default for field in SUBMITTED if field.default not in (None, REQUIRED)})


def insert_slot_job(conn: DictConnection, name: str, slot: datetime) -> int:
    """The job of a slot taken by take_slot, from the schedule's template, written on the slot's row."""
    row = one(conn.execute(
        f"""WITH job AS (
                INSERT INTO jobs ({', '.join(_SUBMITTED)}, state, reason, message, schedule, slot)
                SELECT {', '.join(f'r.{column}' for column in _SUBMITTED)}, %(state)s, %(reason)s, %(message)s,
                       s.name, %(slot)s
                FROM schedules s, jsonb_populate_record(NULL::jobs, %(defaults)s::jsonb || s.template || jsonb_build_object(
                    'user_name', s.user_name, 'group_name', s.group_name)) AS r
                WHERE s.name = %(name)s
                RETURNING id)
            UPDATE schedule_slots SET job_id = job.id FROM job
            WHERE schedule_name = %(name)s AND slot = %(slot)s RETURNING job_id""",
        {"name": name, "slot": slot, "defaults": _DEFAULTS, "state": states.INITIAL, "reason": states.Reason.QUEUED,
         "message": f"submitted by schedule {name} for its slot {slot.isoformat()}, waiting for the plan"},
    ))
    return row["job_id"]
