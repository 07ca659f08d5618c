"""The job state machine (the job lifecycle of docs/architecture.md): the states of a job."""

from __future__ import annotations

from job.core.errors import BadInput

PENDING = "PENDING"
SUBMITTING = "SUBMITTING"
SUBMITTED = "SUBMITTED"
RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
STOPPED = "STOPPED"
CANCELLED = "CANCELLED"

# Known to Ray: an intent committed (SUBMITTING) or a submission Ray has.
ACTIVE = (SUBMITTING, SUBMITTED, RUNNING)
FINISHED = (SUCCEEDED, FAILED, STOPPED, CANCELLED)
STATES = (PENDING, *ACTIVE, *FINISHED)


def known_states(names: list[str]) -> list[str]:
    unknown = [name for name in names if name not in STATES]
    if unknown:
        raise BadInput(f"state: unknown {', '.join(unknown)} (one of {', '.join(STATES)})")
    return names
