"""What an active job becomes given Ray's view of it: table-driven, no database, no Ray."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from job.core.reconcile import reconcile

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=timezone.utc)
EARLIER = NOW - timedelta(minutes=10)


@dataclass
class RayJob:
    status: str
    driver_node_id: str | None = "n1"
    start_time: datetime | None = EARLIER
    end_time: datetime | None = None
    message: str | None = None
    exit_code: int | None = None


def job(state="SUBMITTED", **fields):
    row = {"id": 1, "user_name": "alice", "state": state, "resources": {"CPU": 1}, "node": "n1", "attempt": 1,
           "submission_id": "abc-1-1", "ray_status": None, "reason": None, "started_at": None,
           "max_runtime_s": None, "cancel_requested_at": None}
    row.update(fields)
    return row


CASES = [
    # (name, job, ray job, expected: state, reason, stop reason, requeue reason, cancel, finished)
    ("accepted, driver not started", job("SUBMITTING"), RayJob("PENDING"), ("SUBMITTED", None, None, None, False, False)),
    ("started", job(), RayJob("RUNNING"), ("RUNNING", None, None, None, False, False)),
    ("succeeded", job("RUNNING", started_at=EARLIER), RayJob("SUCCEEDED", end_time=NOW, exit_code=0),
     ("SUCCEEDED", "Succeeded", None, None, False, True)),
    ("failed", job("RUNNING", started_at=EARLIER), RayJob("FAILED", end_time=NOW, exit_code=3, message="boom"),
     ("FAILED", "Failed", None, None, False, True)),
    ("stopped by someone else", job("RUNNING"), RayJob("STOPPED", end_time=NOW), ("STOPPED", "Stopped", None, None, False, True)),
    ("stopped after our cancel", job("RUNNING", reason="Cancelled"), RayJob("STOPPED", end_time=NOW),
     ("STOPPED", "Cancelled", None, None, False, True)),
    ("stopped at its runtime limit", job("RUNNING", reason="RuntimeLimit"), RayJob("STOPPED", end_time=NOW),
     ("STOPPED", "RuntimeLimit", None, None, False, True)),
    ("adopted after a crash, already running", job("SUBMITTING"), RayJob("RUNNING"), ("RUNNING", None, None, None, False, False)),
    ("cancel requested while running", job("RUNNING", started_at=EARLIER, cancel_requested_at=NOW), RayJob("RUNNING"),
     ("RUNNING", "Cancelled", "Cancelled", None, False, False)),
    ("cancel requested while pending in Ray", job(cancel_requested_at=NOW), RayJob("PENDING"),
     ("SUBMITTED", "Cancelled", "Cancelled", None, False, False)),
    ("past its max runtime", job("RUNNING", started_at=EARLIER, max_runtime_s=60), RayJob("RUNNING"),
     ("RUNNING", "RuntimeLimit", "RuntimeLimit", None, False, False)),
    ("within its max runtime", job("RUNNING", started_at=EARLIER, max_runtime_s=3600), RayJob("RUNNING"),
     ("RUNNING", None, None, None, False, False)),
    ("intent not in Ray: sent again, not requeued", job("SUBMITTING"), None, (None, None, None, None, False, False)),
    ("intent never reached Ray, cancel requested", job("SUBMITTING", cancel_requested_at=NOW), None,
     (None, None, None, None, True, True)),
    ("Ray forgot a running job", job("RUNNING"), None, (None, None, None, "LostInRay", False, False)),
]


@pytest.mark.parametrize("name,row,ray_job,expected", CASES, ids=[case[0] for case in CASES])
def test_reconcile(name, row, ray_job, expected):
    state, reason, stop, requeue, cancel, finished = expected
    outcome = reconcile(row, ray_job, NOW)
    assert (outcome.update or {}).get("state") == state
    if outcome.update is not None:
        assert outcome.update["reason"] == reason
        assert set(outcome.update) == {"state", "node", "ray_status", "ray_message", "reason", "message",
                                       "started_at", "finished_at", "exit_code"}
    assert (outcome.stop[0] if outcome.stop else None) == stop
    assert (outcome.requeue[0] if outcome.requeue else None) == requeue
    assert outcome.cancel_unsubmitted == cancel
    assert outcome.finished == finished


def test_an_intent_ray_has_not_got_is_sent_again_under_its_own_id():
    assert reconcile(job("SUBMITTING"), None, NOW).resend
    assert not reconcile(job("SUBMITTING", cancel_requested_at=NOW), None, NOW).resend
    assert not any(reconcile(job(state), None, NOW).resend for state in ("SUBMITTED", "RUNNING"))


def test_finished_job_keeps_times_exit_code_and_driver_node():
    outcome = reconcile(job("RUNNING", started_at=EARLIER), RayJob("FAILED", driver_node_id="n2", end_time=NOW,
                                                                  exit_code=3, message="boom"), NOW)
    assert outcome.update["finished_at"] == NOW and outcome.update["started_at"] == EARLIER
    assert outcome.update["exit_code"] == 3 and outcome.update["node"] == "n2"
    assert "exit code 3" in outcome.update["message"] and "boom" in outcome.update["message"]


def test_running_job_gets_its_start_time_from_ray():
    outcome = reconcile(job("SUBMITTED"), RayJob("RUNNING", start_time=EARLIER), NOW)
    assert outcome.update["started_at"] == EARLIER
