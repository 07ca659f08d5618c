"""The job state machine (the job lifecycle of docs/architecture.md): the states of a job, the moves
allowed between them, and each kind of write the store does on jobs, whose guards are taken from here.

    submit --> PENDING --(cancel)------------------------------------------> CANCELLED
                |  ^  --(pending timeout; a row the planner cannot read;
                |  |     a dependency that can never hold)-------------------> FAILED
       plan:    |  |
       intent   v  |  requeue: Ray refused the submission (from SUBMITTING), or an infrastructure
                |  |  fault: Ray lost it, its supervisor failed, its node died or stayed busy
             SUBMITTING --(Ray accepted)--> SUBMITTED --(driver started)--> RUNNING
                 |                                                            ^
                 +-----------(accepted and started before a crash)------------+

    from any active state (SUBMITTING, SUBMITTED, RUNNING):
        Ray finished it                          --> SUCCEEDED | FAILED | STOPPED
        requeue with no attempt or requeue left  --> FAILED
        cancel of a submission Ray never got     --> CANCELLED
        preempted: Ray stopped it to make room   --> PENDING (its place in the queue kept)

    A write of fields only keeps the state: PENDING (its waiting reason), active (the reconciliation,
    a cancel request). SUCCEEDED, FAILED, STOPPED and CANCELLED are finished: no way out, no write."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from job.core.errors import BadInput, quoted


class State(StrEnum):
    """A job's state, as the column `jobs.state` holds it (its CHECK lists the same)."""

    PENDING = "PENDING"
    SUBMITTING = "SUBMITTING"
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    CANCELLED = "CANCELLED"


# The states by name at module level, as the writes below and the store name them.
PENDING, SUBMITTING, SUBMITTED, RUNNING, SUCCEEDED, FAILED, STOPPED, CANCELLED = State


class Reason(StrEnum):
    """Why a job is where it is (`jobs.reason`): the tick's own reasons, then the planner's
    waiting reasons (core/planner/snapshot.py `Reason`, its JSON's) under the same names."""

    QUEUED = "Queued"
    SUBMITTING = "Submitting"
    SUBMIT_REFUSED = "SubmitRefused"
    INVALID_JOB = "InvalidJob"
    PENDING_TIMEOUT = "PendingTimeout"
    # Waits for other jobs to end (core/dependencies.py), out of the plan; or never will.
    DEPENDENCY = "Dependency"
    DEPENDENCY_NEVER = "DependencyNeverSatisfied"
    # Held back by its array's throttle (`--array SPEC%N`, core/arrays.py): not given to the planner.
    ARRAY_THROTTLE = "ArrayThrottle"
    # Placed in a cluster that runs its most drivers of ours (core/clusters.py): waits.
    DRIVER_LIMIT = "DriverLimit"
    # Ray holds the driver PENDING (core/reconcile.py).
    STARTING = "Starting"
    RUNTIME_ENV = "RuntimeEnv"
    NODE_BUSY = "NodeBusy"
    NODE_GONE = "NodeGone"
    # Infrastructure faults: requeued, not counted as attempts.
    LOST_IN_RAY = "LostInRay"
    INFRA_FAILURE = "InfraFailure"
    # Its cluster stopped answering for longer than its group's --cluster-lost-after.
    CLUSTER_LOST = "ClusterLost"
    # Stops we ask of Ray, and how Ray ended a job.
    CANCELLED = "Cancelled"
    RUNTIME_LIMIT = "RuntimeLimit"
    # Used more than it declared past its group's grace (`--overuse stop`): its own fault, FAILED.
    OVER_USE = "OverUse"
    PREEMPTED = "Preempted"
    STOPPED = "Stopped"
    FAILED = "Failed"
    SUCCEEDED = "Succeeded"
    # The planner's (PLANNER_REASONS below).
    RESOURCES = "Resources"
    UNSCHEDULABLE = "Unschedulable"
    USER_JOB_LIMIT = "UserJobLimit"
    USER_RESOURCE_LIMIT = "UserResourceLimit"
    ACCOUNT_JOB_LIMIT = "AccountJobLimit"
    ACCOUNT_RESOURCE_LIMIT = "AccountResourceLimit"
    NOT_BEFORE = "NotBefore"
    PRIORITY = "Priority"
    PREEMPTING = "Preempting"
    RESERVED = "Reserved"
    SCALING_UP = "ScalingUp"


# The planner's waiting reasons, as its plan names them: the type of core/planner/snapshot.py `Reason`.
PLANNER_REASONS = tuple(reason.value for reason in (
    Reason.RESOURCES, Reason.UNSCHEDULABLE, Reason.USER_JOB_LIMIT, Reason.USER_RESOURCE_LIMIT, Reason.ACCOUNT_JOB_LIMIT,
    Reason.ACCOUNT_RESOURCE_LIMIT, Reason.NOT_BEFORE, Reason.PRIORITY, Reason.PREEMPTING, Reason.RESERVED,
    Reason.SCALING_UP))

# Known to Ray: an intent committed (SUBMITTING) or a submission Ray has.
ACTIVE = (SUBMITTING, SUBMITTED, RUNNING)
FINISHED = (SUCCEEDED, FAILED, STOPPED, CANCELLED)
STATES = (PENDING, *ACTIVE, *FINISHED)
# Not finished: what a cancel, a group's removal, or a user's counts look at.
UNFINISHED = (PENDING, *ACTIVE)

# The state of a new job.
INITIAL = PENDING

# Ray's statuses of a submission (ray.job_submission.JobStatus), as the reconciliation reads them:
# PENDING (accepted, the driver not started) and RUNNING; its terminal statuses are our states too.
RAY_PENDING = "PENDING"
RAY_RUNNING = "RUNNING"
FINISHED_IN_RAY = (SUCCEEDED, FAILED, STOPPED)

# Allowed moves: the states a write may leave a job in, per state it finds it in. A state in its
# own set means a write of fields only (the state kept) is allowed.
TRANSITIONS: dict[str, frozenset[str]] = {
    PENDING: frozenset({PENDING, SUBMITTING, CANCELLED, FAILED}),
    SUBMITTING: frozenset({SUBMITTING, SUBMITTED, RUNNING, PENDING, *FINISHED_IN_RAY, CANCELLED}),
    SUBMITTED: frozenset({SUBMITTED, RUNNING, PENDING, *FINISHED_IN_RAY, CANCELLED}),
    RUNNING: frozenset({RUNNING, PENDING, *FINISHED_IN_RAY, CANCELLED}),
    **{state: frozenset() for state in FINISHED},
}


def allowed(source: str, target: str) -> bool:
    """Whether a write may take a job in `source` to `target` (the same state: a write of fields)."""
    return target in TRANSITIONS.get(source, frozenset())


@dataclass(frozen=True)
class Transition:
    """One kind of write the store does on jobs: its moves, as (source, target) pairs."""

    name: str
    moves: frozenset[tuple[str, str]]

    @property
    def sources(self) -> list[str]:
        """The states the write's guard lets it find a job in, in the order of STATES."""
        return [state for state in STATES if any(source == state for source, _ in self.moves)]

    @property
    def targets(self) -> list[str]:
        return [state for state in STATES if any(target == state for _, target in self.moves)]

    @property
    def target(self) -> str:
        """The one state the write leaves jobs in."""
        (target,) = self.targets
        return target


def _moves(name: str, sources: tuple[str, ...], target: str) -> Transition:
    return Transition(name, frozenset((source, target) for source in sources))


def _keeps(name: str, sources: tuple[str, ...]) -> Transition:
    return Transition(name, frozenset((source, source) for source in sources))


# The writes of job/store, each guarded by its sources (and, for RECONCILE, by its pairs).
COMMIT_INTENT = _moves("commit intent", (PENDING,), SUBMITTING)              # tick_jobs.commit_intents
CANCEL_PENDING = _moves("cancel pending", (PENDING,), CANCELLED)             # jobs.cancel_jobs
REQUEST_CANCEL = _keeps("request cancel", ACTIVE)                            # jobs.cancel_jobs
FAIL_PENDING_TIMEOUT = _moves("pending timeout", (PENDING,), FAILED)         # tick_jobs.fail_pending_timeouts
FAIL_INVALID = _moves("invalid row", (PENDING,), FAILED)                     # tick_jobs.fail_pending
FAIL_DEPENDENCY = _moves("dependency never", (PENDING,), FAILED)             # tick_jobs.fail_pending
SET_WAITING = _keeps("waiting reason", (PENDING,))                           # tick_jobs.set_waiting
MARK_SUBMITTED = _moves("Ray accepted", (SUBMITTING,), SUBMITTED)            # tick_jobs.mark_submitted
# Ray refused the submission for the job's own request: counted against the group's max_attempts.
REQUEUE = _moves("requeue", (SUBMITTING,), PENDING)                          # tick_jobs.return_to_pending
REQUEUE_SPENT = _moves("no attempt left", (SUBMITTING,), FAILED)             # tick_jobs.return_to_pending
# An infrastructure fault (LostInRay, InfraFailure, NodeBusy): counted against max_requeues.
REQUEUE_INFRA = _moves("infrastructure requeue", ACTIVE, PENDING)            # tick_jobs.requeue_infra
REQUEUE_INFRA_SPENT = _moves("no requeue left", ACTIVE, FAILED)              # tick_jobs.requeue_infra
CANCEL_ABSENT = _moves("cancel absent", ACTIVE, CANCELLED)                   # tick_jobs.cancel_absent
# Preemption: a running victim is marked (the decision), then told it is being stopped once Ray
# took the stop; stopped, it goes back to PENDING, counted as neither an attempt nor a requeue.
MARK_VICTIM = _keeps("mark victim", (RUNNING,))                              # tick_jobs.mark_victims
STOPPING_VICTIM = _keeps("victim stopping", ACTIVE)                          # tick_jobs.victims_stopping
REQUEUE_PREEMPTED = _moves("preempted requeue", ACTIVE, PENDING)             # tick_jobs.requeue_preempted
SET_RESERVATION = _keeps("reservation", (PENDING,))                          # tick_jobs.set_reservations
SET_ESTIMATE = _keeps("estimate", (PENDING,))                                # tick_jobs.set_estimates
SET_OBSERVED = _keeps("observed use", (RUNNING,))                            # tick_jobs.set_observed
# tick_jobs.update_jobs: the state Ray reports, per job; a job never goes back (RUNNING to SUBMITTED).
RECONCILE = Transition("reconcile", frozenset({
    *((state, state) for state in ACTIVE),
    (SUBMITTING, SUBMITTED), (SUBMITTING, RUNNING), (SUBMITTED, RUNNING),
    *((source, target) for source in ACTIVE for target in FINISHED_IN_RAY),
}))

WRITES = (COMMIT_INTENT, CANCEL_PENDING, REQUEST_CANCEL, FAIL_PENDING_TIMEOUT, FAIL_INVALID, FAIL_DEPENDENCY, SET_WAITING,
          MARK_SUBMITTED, REQUEUE, REQUEUE_SPENT, REQUEUE_INFRA, REQUEUE_INFRA_SPENT, CANCEL_ABSENT, RECONCILE,
          MARK_VICTIM, STOPPING_VICTIM, REQUEUE_PREEMPTED, SET_RESERVATION, SET_ESTIMATE, SET_OBSERVED)


def known_states(names: list[str]) -> list[str]:
    unknown = [name for name in names if name not in STATES]
    if unknown:
        raise BadInput(f"state: unknown {', '.join(map(quoted, unknown))} (one of {', '.join(STATES)})")
    return names
