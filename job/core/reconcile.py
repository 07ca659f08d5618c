"""What one of our active jobs becomes, given what Ray says of it. Pure: no database, no Ray.

`reconcile(job, ray_job, now)` takes a job row (SUBMITTING, SUBMITTED or RUNNING) and Ray's view of
its submission (None when Ray has no such job) and says what to do: new fields to write, a stop to
ask of Ray (cancel request, runtime limit), a return to PENDING for a new attempt, or a cancel of a
submission Ray never received."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from job.core.states import FAILED, FINISHED_IN_RAY, RAY_RUNNING, RUNNING, STOPPED, SUBMITTED, SUBMITTING

# Reasons we give when we stop a job ourselves; kept when Ray reports it STOPPED.
STOP_REASONS = ("Cancelled", "RuntimeLimit")


@dataclass
class Outcome:
    # New values of the columns the reconciliation may change; None when nothing changes.
    update: dict[str, Any] | None = None
    # (reason, message) to ask Ray to stop the job for.
    stop: tuple[str, str] | None = None
    # (reason, message) to return the job to PENDING for a new attempt.
    requeue: tuple[str, str] | None = None
    cancel_unsubmitted: bool = False
    finished: bool = False
    # Submit again, under the same submission id: Ray has not got it (yet).
    resend: bool = False


def reconcile(job: dict[str, Any], ray_job: Any | None, now: datetime) -> Outcome:
    if ray_job is None:
        return _absent(job)
    status = ray_job.status
    fields = {
        "state": job["state"], "node": ray_job.driver_node_id or job["node"], "ray_status": status,
        "ray_message": ray_job.message, "reason": job["reason"], "message": None,
        "started_at": job["started_at"], "finished_at": None, "exit_code": ray_job.exit_code,
    }
    if status in FINISHED_IN_RAY:
        fields.update(state=status, finished_at=ray_job.end_time or now,
                      started_at=job["started_at"] or ray_job.start_time)
        if status == STOPPED and job["reason"] in STOP_REASONS:
            fields["message"] = _message_of_stop(job["reason"])
        elif status == STOPPED:
            fields.update(reason="Stopped", message="stopped in Ray, not by the scheduler")
        elif status == FAILED:
            fields.update(reason="Failed", message=_exit_text(ray_job) + (f": {ray_job.message}" if ray_job.message else ""))
        else:
            fields.update(reason="Succeeded", message=_exit_text(ray_job))
        return Outcome(update=fields, finished=True)
    if status == RAY_RUNNING:
        fields.update(state=RUNNING, started_at=job["started_at"] or ray_job.start_time or now, reason=None)
    else:  # PENDING in Ray: accepted, the driver not started yet
        fields.update(state=SUBMITTED, reason=None)
    outcome = Outcome(update=fields)
    if job["cancel_requested_at"] is not None:
        outcome.stop = ("Cancelled", "stop requested by `cancel`")
    elif (fields["state"] == RUNNING and job["max_runtime_s"] is not None
          and (now - fields["started_at"]).total_seconds() > job["max_runtime_s"]):
        outcome.stop = ("RuntimeLimit", f"ran longer than its max runtime of {job['max_runtime_s']:g} s")
    if outcome.stop is not None:
        fields["reason"], fields["message"] = outcome.stop
    return outcome


def _absent(job: dict[str, Any]) -> Outcome:
    if job["state"] == SUBMITTING:
        if job["cancel_requested_at"] is not None:
            return Outcome(cancel_unsubmitted=True, finished=True)
        # The intent is committed and Ray has no such submission: the tick that placed it stopped
        # before sending it, or its answer was lost and the request may yet land. Sending it again
        # under the same id is safe either way (Ray refuses a second one); a new attempt, with a
        # new id, would run twice if the first request landed after all.
        return Outcome(resend=True)
    if job["cancel_requested_at"] is not None:
        return Outcome(cancel_unsubmitted=True, finished=True)
    return Outcome(requeue=("LostInRay", f"Ray no longer knows submission {job['submission_id']} (was the Ray cluster restarted?)"))


def _exit_text(ray_job: Any) -> str:
    return f"exit code {ray_job.exit_code}" if ray_job.exit_code is not None else "no exit code"


def _message_of_stop(reason: str) -> str:
    return "cancelled while it ran" if reason == "Cancelled" else "stopped at its max runtime"


@dataclass
class Reconciled:
    """What the tick does about all its active jobs at once, by job id."""

    # New values of the columns that changed (jobs whose columns are all the same are left out).
    updates: dict[int, dict[str, Any]] = field(default_factory=dict)
    stops: dict[int, tuple[str, str]] = field(default_factory=dict)
    # (state it is in, reason, message): back to PENDING, if it is still in that state.
    requeue: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    cancels: list[int] = field(default_factory=list)
    # SUBMITTING jobs to submit again under their own submission id.
    resend: list[int] = field(default_factory=list)
    finished: set[int] = field(default_factory=set)
    # No longer active after this tick: finished, or back to PENDING.
    gone: set[int] = field(default_factory=set)


def reconcile_all(active: list[dict[str, Any]], ray_jobs: dict[str, Any], now: datetime) -> Reconciled:
    """`reconcile` for each active job, given Ray's jobs by submission_id."""
    result = Reconciled()
    for job in active:
        outcome = reconcile(job, ray_jobs.get(job["submission_id"]), now)
        job_id = job["id"]
        if outcome.update is not None and any(job[column] != value for column, value in outcome.update.items()):
            result.updates[job_id] = outcome.update
        if outcome.stop is not None:
            result.stops[job_id] = outcome.stop
        if outcome.requeue is not None:
            result.requeue[job_id] = (job["state"], *outcome.requeue)
        if outcome.cancel_unsubmitted:
            result.cancels.append(job_id)
        if outcome.resend:
            result.resend.append(job_id)
        if outcome.finished:
            result.finished.add(job_id)
        if outcome.finished or outcome.requeue is not None:
            result.gone.add(job_id)
    return result
