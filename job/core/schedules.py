"""A schedule (a row of `schedules`, sql/0026) and what the tick does with it at an instant: submit
its latest due slot's job, skip the slot (the last run still going under `forbid`, or the slot
missed by more than the starting deadline), or nothing; and when its next slot comes.

Only the latest due slot is considered: after a downtime, one job (or one skip), never one per
missed slot."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from job.core import states
from job.core.cron import Cron, Every, latest, parse_cron
from job.core.units import format_duration

CONCURRENCY = ("allow", "forbid", "replace")


@dataclass(frozen=True, slots=True)
class Schedule:
    name: str
    user_name: str
    group_name: str
    template: dict[str, Any]
    cron: str | None
    every_s: float | None
    timezone: str
    concurrency: str
    starting_deadline_s: float | None
    paused: bool
    created_at: datetime

    def when(self) -> Cron | Every:
        if self.cron is not None:
            return parse_cron(self.cron, self.timezone)
        assert self.every_s is not None  # the table's CHECK: one of cron and every_s
        return Every(self.every_s, self.created_at)

    def said(self) -> str:
        """Its slots in words: `cron '0 2 * * *' Europe/Paris`, `every 2s`."""
        if self.cron is not None:
            return f"cron '{self.cron}'" + ("" if self.timezone == "UTC" else f" {self.timezone}")
        assert self.every_s is not None  # the table's CHECK: one of cron and every_s
        return f"every {format_duration(self.every_s)}"


@dataclass(frozen=True, slots=True)
class ScheduleRun:
    """A schedule as the tick reads it: with its last slot, and its last run (the job of its last
    submitted slot) and that job's state (None once pruned)."""

    schedule: Schedule
    last_slot: datetime | None
    last_job: int | None
    last_state: str | None


@dataclass(frozen=True, slots=True)
class SlotAction:
    slot: datetime
    # submit; skip (message: why); replace (cancel the last run, then submit).
    action: Literal["submit", "skip", "replace"]
    message: str | None = None


def due_slot(run: ScheduleRun, now: datetime) -> SlotAction | None:
    """What to do at `now`: None when no slot is due since the last one (or the schedule's creation)."""
    schedule = run.schedule
    slot = latest(schedule.when(), max(run.last_slot or schedule.created_at, schedule.created_at), now)
    if slot is None:
        return None
    late = (now - slot).total_seconds()
    if schedule.starting_deadline_s is not None and late > schedule.starting_deadline_s:
        return SlotAction(slot, "skip", f"missed by {format_duration(late)}, more than the starting deadline of "
                                        f"{format_duration(schedule.starting_deadline_s)}")
    going = run.last_job is not None and run.last_state is not None and run.last_state not in states.FINISHED
    if going and schedule.concurrency == "forbid":
        return SlotAction(slot, "skip", f"the last run, job {run.last_job}, is {run.last_state} (concurrency forbid)")
    if going and schedule.concurrency == "replace":
        return SlotAction(slot, "replace", f"the last run, job {run.last_job}, was {run.last_state}: cancelled "
                                           "(concurrency replace)")
    return SlotAction(slot, "submit")


def next_slot(schedule: Schedule, now: datetime, last_slot: datetime | None = None) -> datetime | None:
    """The first slot after `now` and the last slot taken: when the loop wakes for it, and what
    `schedule list` shows."""
    return schedule.when().next_after(max(now, last_slot or now))
