"""What a schedule's tick does at an instant (core/schedules.py due_slot), table-driven: nothing
before a slot, the latest slot only, the starting deadline, and each concurrency policy by the
last run's state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from job.core.schedules import Schedule, ScheduleRun, SlotAction, due_slot, next_slot

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def run(concurrency="allow", deadline=None, last_slot=None, last_job=None, last_state=None, cron=None):
    schedule = Schedule("s", "alice", "main", {}, cron, None if cron else 60.0, "UTC", concurrency, deadline, False, T0)
    return ScheduleRun(schedule, last_slot, last_job, last_state)


@pytest.mark.parametrize(("given", "now", "expected"), [
    (run(), T0 + 0.5 * MIN, None),
    (run(), T0 + MIN, SlotAction(T0 + MIN, "submit")),
    (run(), T0 + 90 * MIN + timedelta(seconds=5), SlotAction(T0 + 90 * MIN, "submit")),  # the latest only
    (run(last_slot=T0 + 2 * MIN), T0 + 2.5 * MIN, None),
    (run(cron="*/10 * * * *"), T0 + 25 * MIN, SlotAction(T0 + 20 * MIN, "submit")),
    (run(deadline=30.0), T0 + 1.75 * MIN,
     SlotAction(T0 + MIN, "skip", "missed by 45s, more than the starting deadline of 30s")),
    (run(deadline=30.0), T0 + 1.25 * MIN, SlotAction(T0 + MIN, "submit")),
    (run("forbid", last_slot=T0 + MIN, last_job=7, last_state="RUNNING"), T0 + 2 * MIN,
     SlotAction(T0 + 2 * MIN, "skip", "the last run, job 7, is RUNNING (concurrency forbid)")),
    (run("forbid", last_slot=T0 + MIN, last_job=7, last_state="SUCCEEDED"), T0 + 2 * MIN,
     SlotAction(T0 + 2 * MIN, "submit")),
    (run("forbid", last_slot=T0 + MIN, last_job=7, last_state=None), T0 + 2 * MIN,  # pruned: ended
     SlotAction(T0 + 2 * MIN, "submit")),
    (run("replace", last_slot=T0 + MIN, last_job=7, last_state="PENDING"), T0 + 2 * MIN,
     SlotAction(T0 + 2 * MIN, "replace", "the last run, job 7, was PENDING: cancelled (concurrency replace)")),
    (run("replace", last_slot=T0 + MIN, last_job=7, last_state="FAILED"), T0 + 2 * MIN,
     SlotAction(T0 + 2 * MIN, "submit")),
    (run("allow", last_slot=T0 + MIN, last_job=7, last_state="RUNNING"), T0 + 2 * MIN,
     SlotAction(T0 + 2 * MIN, "submit")),
])
def test_due_slot(given, now, expected):
    assert due_slot(given, now) == expected


@pytest.mark.parametrize(("given", "now", "expected"), [
    (run(), T0, T0 + MIN),
    (run(), T0 + 1.5 * MIN, T0 + 2 * MIN),
    (run(cron="0 * * * *"), T0 + 0.5 * MIN, T0 + 60 * MIN),
])
def test_next_slot(given, now, expected):
    assert next_slot(given.schedule, now, given.last_slot) == expected
