"""The tick's schedule step, under the group's lock and before the plan (so that a slot's job is
planned in the tick that made it): for each running schedule of the group whose latest slot is
due, its job and its slot row in the tick's transaction, or the slot skipped with why.

Exactly once: the slot row is taken first (INSERT ... ON CONFLICT DO NOTHING on its key), so a
second loop, or the next tick after a crash, finds it taken; the job is written in the same
transaction, so a crash before the commit leaves neither."""

from __future__ import annotations

from datetime import datetime

import psycopg

from job import log
from job.core.schedules import ScheduleRun, SlotAction, due_slot, next_slot
from job.store import DictConnection, jobs, schedules


def run_schedules(conn: DictConnection, group: str, now: datetime) -> datetime | None:
    """Takes the group's due slots and commits; returns the next slot of its schedules, when the
    loop must wake for it."""
    wake = []
    for run in schedules.group_schedules(conn, group):
        try:
            action = due_slot(run, now)
            following = next_slot(run.schedule, now, action.slot if action else run.last_slot)
        except ValueError as exc:  # a cron or time zone written past the CLI: that schedule only
            log.warning("schedule_invalid", group=group, schedule=run.schedule.name, message=str(exc))
            continue
        if action is not None:
            _take(conn, group, run, action)
        if following is not None:
            wake.append(following)
    conn.commit()
    return min(wake, default=None)


def _take(conn: DictConnection, group: str, run: ScheduleRun, action: SlotAction) -> None:
    """The slot's row, and its job unless skipped; a template that is no job (written past the CLI)
    skips its slot, not the group's tick."""
    name = run.schedule.name
    try:
        with conn.transaction():
            if not schedules.take_slot(conn, name, action.slot, "skipped" if action.action == "skip" else "submitted",
                                       action.message):
                return  # another tick took it
            if action.action == "replace":
                assert run.last_job is not None  # due_slot replaces only a last run that is going
                jobs.cancel_jobs(conn, [run.last_job])
            job_id = None if action.action == "skip" else schedules.insert_slot_job(conn, name, action.slot)
    except (psycopg.DataError, psycopg.IntegrityError) as exc:
        message = f"the template is not a job: {exc.diag.message_primary}"
        if schedules.take_slot(conn, name, action.slot, "skipped", message):
            log.warning("schedule_invalid", group=group, schedule=name, slot=action.slot.isoformat(), message=message)
        return
    fields = {"group": group, "schedule": name, "slot": action.slot.isoformat()}
    if job_id is None:
        log.event("schedule_skipped", **fields, message=action.message)
        return
    if action.action == "replace":
        log.event("schedule_replaced", **fields, job=run.last_job, message=action.message)
    log.event("schedule_submitted", **fields, job=job_id, user=run.schedule.user_name)
