"""What one of our active jobs becomes, given what Ray says of it. Pure: no database, no Ray.

`reconcile(job, ray_job, now, start)` takes a job row (SUBMITTING, SUBMITTED or RUNNING) and Ray's
view of its submission (None when Ray has no such job) and decides one thing (`Decision`): the job
goes on, with the fields Ray reports and maybe a stop to ask of Ray (cancel request, runtime limit,
preemption); it finished; it goes back to PENDING for a new attempt; its intent is sent again; its
cancel ends a submission Ray never received; or, a victim Ray stopped, it goes back to the queue.

Who is to blame. A job fails only for a fault of its own: its entrypoint failed (Ray's error types
RUNTIME_ENV_SETUP_FAILURE, JOB_ENTRYPOINT_COMMAND_START_ERROR, JOB_ENTRYPOINT_COMMAND_ERROR, or
none), it was stopped at its max runtime, Ray refused its request, or it waited past its pending
timeout. An infrastructure fault sends it back to PENDING for a new attempt, keeping its place in
the queue and its attempts (the store counts it against the group's max_requeues instead):

    LostInRay     Ray no longer knows a submission it had (the cluster restarted)
    InfraFailure  Ray's job supervisor could not start or died (error_type JOB_SUPERVISOR_ACTOR_*);
                  when its node dies under a running job Ray reports JOB_SUPERVISOR_ACTOR_DIED with
                  "The actor died because its node has died", some 15 s after the node stopped;
                  or a node holding one of its bundles, not its driver, died: Ray keeps the driver
                  and waits to place the bundle again, so the job is stopped in Ray first ("its
                  bundle's node <id> died under it", from the tick's alive nodes: a node list Ray
                  failed to give fails the group's tick, so no node is taken for dead for want of it)
    NodeBusy      Ray held the driver PENDING past the group's start timeout because its node has
                  not the free resources for it (outside load); stopped in Ray first
    ClusterLost   its cluster, one of its group's several, did not answer for the group's
                  --cluster-lost-after (decided by core/clusters.py, not here)

Over-use. In a group with `--overuse stop`, a running job that Ray shows holding more than it
declared (core/observed.py) for longer than the group's grace is stopped (`OverUse`); when Ray
reports it STOPPED it ends FAILED with reason OverUse: what it used is its own doing.

A victim of a preemption (`preempted_at` set by the tick's decision) is asked to stop until Ray
reports it STOPPED; it then goes back to PENDING with reason Preempted, counted as a preemption,
neither an attempt nor a requeue. A victim that ended otherwise meanwhile ended as it did.

Start timeout. While Ray holds a driver PENDING (our SUBMITTED), the job's reason says why, from
what Ray reports of its node: free resources that do not cover the job's request mean the node is
busy (NodeBusy); free resources that cover it mean Ray is starting the driver (Starting), or, for a
job with a runtime environment to build, that Ray builds it (RuntimeEnv). Ray holds a driver's
resources from the moment it grants them, while it starts its worker and builds its runtime
environment (a pip install can take minutes): a job that builds one and may be the one holding its
share of what is in use is never taken for a busy node, and one with nothing to build only after
the few seconds a worker takes to start (STARTING_S)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from job.core.job import ActiveJob
from job.core.resources import Resources, describe, to_units
from job.core.states import FAILED, FINISHED_IN_RAY, RAY_PENDING, RAY_RUNNING, RUNNING, STOPPED, SUBMITTED, SUBMITTING, Reason
from job.core.units import format_duration

# Reasons we give when we stop a job ourselves; kept when Ray reports it STOPPED.
STOP_REASONS = (Reason.CANCELLED, Reason.RUNTIME_LIMIT, Reason.OVER_USE)
# Ray's JobErrorType values for its own faults: the job supervisor could not start or died.
RAY_FAULTS = frozenset({
    "JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE", "JOB_SUPERVISOR_ACTOR_START_FAILURE",
    "JOB_SUPERVISOR_ACTOR_DIED", "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE",
})
# Reasons of a requeue for an infrastructure fault (not counted against max_attempts).
INFRA_REASONS = (Reason.LOST_IN_RAY, Reason.INFRA_FAILURE, Reason.NODE_BUSY, Reason.CLUSTER_LOST)
# Reasons of a job Ray holds PENDING, while it waits there.
WAITING_IN_RAY = (Reason.STARTING, Reason.RUNTIME_ENV, Reason.NODE_BUSY, Reason.NODE_GONE)
# Ray's messages can hold a whole traceback: what a requeue's message quotes of one.
_QUOTED = 400
# How long Ray may take to start a driver with nothing to build once it granted its resources (a
# worker process to start): until then, what is in use on its node may be its own.
STARTING_S = 10.0


@dataclass(frozen=True)
class NodeRoom:
    """One alive node of the group, as the start timeout reads it, amounts in units of 1/10000:
    Ray's totals, what Ray reports free (None: Ray did not say), what our jobs that Ray runs there
    hold, and what our jobs that Ray holds PENDING there ask for."""

    total: Mapping[str, int]
    free: Mapping[str, int] | None
    running: Mapping[str, int]
    waiting: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class StartCheck:
    """The group's start timeout and its alive nodes by id."""

    timeout_s: float
    nodes: Mapping[str, NodeRoom]


@dataclass(frozen=True, slots=True)
class Track:
    """The job goes on: the columns the reconciliation may change, as they now are, and the stop to
    ask of Ray, (reason, message), if it must stop."""

    update: dict[str, Any]
    stop: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """Ray finished it: its columns as it ended."""

    update: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Requeue:
    """An infrastructure fault: back to PENDING for a new attempt; once Ray took a stop of the
    submission first (`stop_first`: NodeBusy, a node gone)."""

    reason: str
    message: str
    stop_first: bool = False


@dataclass(frozen=True, slots=True)
class Resend:
    """An intent Ray has not got (yet): sent again, under the same submission id."""


@dataclass(frozen=True, slots=True)
class CancelAbsent:
    """A cancel of a submission Ray never received (or forgot): the job ends CANCELLED."""


@dataclass(frozen=True, slots=True)
class Preempted:
    """A victim of a preemption that Ray stopped: back to PENDING, with this message."""

    message: str


@dataclass(frozen=True, slots=True)
class OverUse:
    """A running job of a group with `--overuse stop` that has used more than it declared for
    longer than the group's grace: stopped in Ray with this message, it then ends FAILED."""

    message: str


Decision = Track | Finish | Requeue | Resend | CancelAbsent | Preempted


def over_use(record: Mapping[str, Any] | None, grace_s: float, now: datetime) -> OverUse | None:
    """Whether a job whose last observed use is `record` (core/observed.py `record`) is past the
    grace: over its declaration since `over_since` for at least `grace_s`."""
    if record is None or (since := record.get("over_since")) is None:
        return None
    lasted = (now - datetime.fromisoformat(since)).total_seconds()
    if lasted < grace_s:
        return None
    return OverUse(f"used {Resources.of(record['used'])} and declared {Resources.of(record['declared'])} for "
                   f"{format_duration(int(lasted))}, past the group's over-use grace of {format_duration(int(grace_s))}")


def reconcile(job: ActiveJob, ray_job: Any | None, now: datetime, start: StartCheck | None = None,
              over: OverUse | None = None) -> Decision:
    if ray_job is None:
        return _absent(job)
    status = ray_job.status
    fields = {
        "state": job.state, "node": ray_job.driver_node_id or job.node, "ray_status": status,
        "ray_message": ray_job.message, "reason": job.reason, "message": None,
        "started_at": job.started_at, "finished_at": None, "exit_code": ray_job.exit_code,
        # Accepted by Ray: when we first saw it so (on submit, or when a lost answer is adopted).
        "accepted_at": job.accepted_at or now,
    }
    if status in FINISHED_IN_RAY:
        return _finished(job, ray_job, fields, now)
    lost = _lost_bundle_node(job, ray_job, start)
    if lost is not None and job.cancel_requested_at is None and job.preempted_at is None:
        return Requeue(Reason.INFRA_FAILURE, f"its bundle's node {lost} died under it (gone from the group's alive "
                       "nodes; Ray would keep the job waiting for its bundle's room)", stop_first=True)
    if status == RAY_RUNNING:
        fields.update(state=RUNNING, started_at=job.started_at or ray_job.start_time or now, reason=None)
    else:  # PENDING in Ray: accepted, the driver not started yet
        fields.update(state=SUBMITTED, reason=None)
        if start is not None:
            waited = max((now - fields["accepted_at"]).total_seconds(), 0.0)
            fields["reason"], fields["message"], requeue = _waiting_in_ray(job, waited, start)
            if requeue is not None and job.cancel_requested_at is None:
                return Requeue(*requeue, stop_first=True)
    stop = _stop(job, fields, now, over)
    if stop is not None:
        fields["reason"], fields["message"] = stop
    return Track(fields, stop)


def _finished(job: ActiveJob, ray_job: Any, fields: dict[str, Any], now: datetime) -> Decision:
    """What a job Ray holds ended becomes: preempted, requeued after a fault of Ray's, or finished
    with the reason and message of its end."""
    status = ray_job.status
    if status == STOPPED and job.preempted_at is not None and job.cancel_requested_at is None:
        ran = (ray_job.end_time or now) - (job.started_at or ray_job.start_time or now)
        return Preempted(f"stopped after running {format_duration(int(max(ran.total_seconds(), 0)))} to make room "
                         f"for job {job.preempted_by}; back in the queue with its place")
    if (status == FAILED and getattr(ray_job, "error_type", None) in RAY_FAULTS
            and job.cancel_requested_at is None):
        return Requeue(Reason.INFRA_FAILURE, _ray_fault(job, ray_job))
    fields.update(state=status, finished_at=ray_job.end_time or now,
                  started_at=job.started_at or ray_job.start_time)
    if status == STOPPED and job.reason == Reason.OVER_USE:
        # Stopped for its own use: a failure of its own, with the message it was stopped with.
        fields.update(state=FAILED, message=job.message)
    elif status == STOPPED and job.reason in STOP_REASONS:
        fields["message"] = _message_of_stop(job.reason)
    elif status == STOPPED:
        fields.update(reason=Reason.STOPPED, message="stopped in Ray, not by the scheduler")
    elif status == FAILED:
        fields.update(reason=Reason.FAILED, message=_exit_text(ray_job) + (f": {ray_job.message}" if ray_job.message else ""))
    else:
        fields.update(reason=Reason.SUCCEEDED, message=_exit_text(ray_job))
    return Finish(fields)


def runtime_end(job: ActiveJob, started_at: datetime | None) -> datetime | None:
    """When a job started at `started_at` has run its max runtime (None: it has none, or has not
    started): past it the tick stops the job, and the loop wakes for it then (group_snapshot.due_at)."""
    if started_at is None or job.max_runtime_s is None:
        return None
    return started_at + timedelta(seconds=job.max_runtime_s)


def _stop(job: ActiveJob, fields: dict[str, Any], now: datetime, over: OverUse | None) -> tuple[str, str] | None:
    """Why a job that goes on must stop, and the message: a cancel, a preemption, its max runtime,
    its over-use."""
    if job.cancel_requested_at is not None:
        return Reason.CANCELLED, "stop requested by `cancel`"
    if job.preempted_at is not None:
        return Reason.PREEMPTED, f"being stopped to make room for job {job.preempted_by}"
    if fields["state"] == RUNNING and (end := runtime_end(job, fields["started_at"])) is not None and now > end:
        return Reason.RUNTIME_LIMIT, f"ran longer than its max runtime of {job.max_runtime_s:g} s"
    if job.reason == Reason.OVER_USE:
        # Asked already: its reason and message stay while it stops, though its work, stopping
        # first, may bring its use back under its declaration.
        return Reason.OVER_USE, job.message  # type: ignore[return-value]  # written with the reason, never None
    if fields["state"] == RUNNING and over is not None:
        return Reason.OVER_USE, over.message
    return None


def _waiting_in_ray(job: ActiveJob, waited: float, start: StartCheck
                    ) -> tuple[str, str, tuple[str, str] | None]:
    """Why Ray has not started the driver of a job it holds PENDING: (reason, message, and the
    requeue once it waited past the start timeout on a node that cannot start it, else None)."""
    held_for = f"Ray has not started the driver for {format_duration(int(waited))}"
    past = waited >= start.timeout_s
    limit = f"the group's start timeout of {format_duration(int(start.timeout_s))}"
    node_id = job.node
    room = None if node_id is None else start.nodes.get(node_id)
    if room is None:
        cause = f"its node {node_id} is not among the group's alive nodes"
        if past:
            requeue = (Reason.INFRA_FAILURE, f"Ray did not start the driver within {limit}: {cause}")
            return Reason.NODE_GONE, f"{held_for}: {cause}", requeue
        return Reason.NODE_GONE, f"{held_for}: {cause} (requeued past {limit})", None
    if room.free is None:
        return Reason.STARTING, f"{held_for} (Ray did not report what is free on its node)", None
    need = {name: to_units(amount) for name, amount in job.resources.items() if to_units(amount) > 0}
    short = sorted(name for name, amount in need.items() if room.free.get(name, 0) < amount)
    if not short:
        if job.builds_runtime_env:
            return Reason.RUNTIME_ENV, f"{held_for}: its runtime environment is being set up", None
        return Reason.STARTING, f"{held_for}: its node has the free resources for it", None
    # In use on the node and not by our running jobs: outside load, and the drivers Ray is starting
    # there, each holding its request from the moment Ray grants it (the worker's start, and the
    # build of its runtime environment: seconds, or minutes for a pip install).
    in_use = {name: max(room.total.get(name, 0) - room.free.get(name, 0) - room.running.get(name, 0), 0)
              for name in need}
    may_hold_its_own = all(in_use[name] >= amount for name, amount in need.items())
    if may_hold_its_own and job.builds_runtime_env:
        return Reason.RUNTIME_ENV, f"{held_for}: its runtime environment is being set up", None
    if may_hold_its_own and waited < STARTING_S:
        return Reason.STARTING, held_for, None
    # Outside load: in use there, less what our other drivers waiting there could hold.
    outside = any(in_use[name] - max(room.waiting.get(name, 0) - need[name], 0) > 0 for name in short)
    cause = (f"the node's {_names(short)} {'is' if short == ['memory'] else 'are'} held by "
             f"{'work outside the queue' if outside else 'other jobs of the queue'} "
             f"(free {describe((name, room.free.get(name, 0)) for name in short)}; "
             f"it needs {describe((name, need[name]) for name in short)})")
    if past:
        requeue = (Reason.NODE_BUSY, f"Ray did not start the driver within {limit} on node {node_id}: {cause}")
        return Reason.NODE_BUSY, f"{held_for}: {cause}", requeue
    return Reason.NODE_BUSY, f"{held_for}: {cause}; requeued past {limit}", None


def _lost_bundle_node(job: ActiveJob, ray_job: Any, start: StartCheck | None) -> str | None:
    """The first of the job's bundle nodes no longer among the group's alive nodes, if any. Ray
    keeps the driver running when a node of its placement group dies, and reschedules the bundle
    where it may never fit (pinned to that node, or STRICT_SPREAD short of nodes): the job would
    hang without its room. The node Ray runs the driver on is left out: Ray reports that death
    itself, as JOB_SUPERVISOR_ACTOR_DIED. Without the nodes (no StartCheck) nothing is known."""
    if start is None:
        return None
    return next((node for node in job.bundle_nodes or () if node not in start.nodes and node != ray_job.driver_node_id),
                None)


def _names(resources: list[str]) -> str:
    words = [{"CPU": "CPUs", "GPU": "GPUs"}.get(name, name) for name in resources]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _ray_fault(job: ActiveJob, ray_job: Any) -> str:
    said = " ".join((ray_job.message or "no message").split())
    if len(said) > _QUOTED:
        said = said[:_QUOTED] + "..."
    if "its node has died" in said or "node was terminated" in said:
        what = f"its node {ray_job.driver_node_id or job.node} died under it"
    elif job.state == RUNNING or ray_job.driver_node_id:
        what = "Ray's job supervisor failed under it"
    else:
        what = "Ray's job supervisor could not start"
    return f"{what} ({ray_job.error_type}): {said}"


def _absent(job: ActiveJob) -> Decision:
    if job.state == SUBMITTING:
        if job.cancel_requested_at is not None:
            return CancelAbsent()
        # The intent is committed and Ray has no such submission: the tick that placed it stopped
        # before sending it, or its answer was lost and the request may yet land. Sending it again
        # under the same id is safe either way (Ray refuses a second one); a new attempt, with a
        # new id, would run twice if the first request landed after all.
        return Resend()
    if job.cancel_requested_at is not None:
        return CancelAbsent()
    return Requeue(Reason.LOST_IN_RAY, f"Ray no longer knows submission {job.submission_id} (was the Ray cluster restarted?)")


def _exit_text(ray_job: Any) -> str:
    return f"exit code {ray_job.exit_code}" if ray_job.exit_code is not None else "no exit code"


def _message_of_stop(reason: str) -> str:
    return "cancelled while it ran" if reason == Reason.CANCELLED else "stopped at its max runtime"


@dataclass(frozen=True)
class Reconciled:
    """What the tick does about all its active jobs at once, by job id."""

    # New values of the columns that changed (jobs whose columns are all the same are left out).
    updates: dict[int, dict[str, Any]] = field(default_factory=dict)
    stops: dict[int, tuple[str, str]] = field(default_factory=dict)
    # (state it is in, reason, message): back to PENDING, if it is still in that state.
    requeue: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    # Jobs of `requeue` to stop in Ray first: requeued only once Ray took the stop.
    stop_first: frozenset[int] = frozenset()
    cancels: list[int] = field(default_factory=list)
    # SUBMITTING jobs to submit again under their own submission id.
    resend: list[int] = field(default_factory=list)
    # Victims Ray stopped: (state it is in, message), back to PENDING if it is still in that state.
    preempted: dict[int, tuple[str, str]] = field(default_factory=dict)
    finished: frozenset[int] = frozenset()

    @property
    def gone(self) -> frozenset[int]:
        """No longer active after this tick: finished, or back to PENDING."""
        return self.finished | self.requeue.keys() | self.preempted.keys()


def start_check(timeout_s: float, nodes: list[Any], active: list[ActiveJob], ray_jobs: dict[str, Any]) -> StartCheck:
    """The start timeout's view of the group's alive nodes (Ray's nodes: `id`, `resources`, `free`),
    with what each of our active jobs that Ray runs holds on its node."""
    held: dict[str, dict[str, dict[str, int]]] = {RAY_RUNNING: defaultdict(lambda: defaultdict(int)),
                                                  RAY_PENDING: defaultdict(lambda: defaultdict(int))}
    for job in active:
        ray_job = None if job.submission_id is None else ray_jobs.get(job.submission_id)
        # A job on no node holds nothing on a node of the group.
        node_id = None if ray_job is None else ray_job.driver_node_id or job.node
        if ray_job is not None and ray_job.status in held and node_id is not None:
            for name, amount in job.resources.items():
                held[ray_job.status][node_id][name] += to_units(amount)
    return StartCheck(timeout_s, _Rooms(nodes, held[RAY_RUNNING], held[RAY_PENDING]))


class _Rooms(Mapping[str, NodeRoom]):
    """The alive nodes by id, each made a NodeRoom as it is read: a tick reads those where Ray
    holds a driver of ours PENDING, a few of 10,000, whose rooms made at once cost 45 ms."""

    def __init__(self, nodes: list[Any], running: Mapping[str, Mapping[str, int]],
                 waiting: Mapping[str, Mapping[str, int]]) -> None:
        self._nodes = {node.id: node for node in nodes}
        self._running, self._waiting = running, waiting

    def __getitem__(self, node_id: str) -> NodeRoom:
        node = self._nodes[node_id]
        return NodeRoom(total={name: to_units(amount) for name, amount in node.resources.items()},
                        free=None if node.free is None else {name: to_units(amount) for name, amount in node.free.items()},
                        running=dict(self._running.get(node_id, {})), waiting=dict(self._waiting.get(node_id, {})))

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)


def reconcile_all(active: list[ActiveJob], ray_jobs: dict[str, Any], now: datetime,
                  start: StartCheck | None = None, over: Mapping[int, OverUse] | None = None) -> Reconciled:
    """`reconcile` for each active job, given Ray's jobs by submission_id and the jobs past their
    over-use grace (`over`, by id)."""
    over = over or {}
    updates: dict[int, dict[str, Any]] = {}
    stops: dict[int, tuple[str, str]] = {}
    requeue: dict[int, tuple[str, str, str]] = {}
    preempted: dict[int, tuple[str, str]] = {}
    stop_first: set[int] = set()
    cancels: list[int] = []
    resend: list[int] = []
    finished: set[int] = set()
    for job in active:
        ray_job = None if job.submission_id is None else ray_jobs.get(job.submission_id)
        decision = reconcile(job, ray_job, now, start, over.get(job.id))
        match decision:
            case Track(stop=stop) if stop is not None:
                stops[job.id] = stop
            case Finish():
                finished.add(job.id)
            case Requeue(reason, message, first):
                requeue[job.id] = (job.state, reason, message)
                if first:
                    stop_first.add(job.id)
            case CancelAbsent():
                cancels.append(job.id)
                finished.add(job.id)
            case Resend():
                resend.append(job.id)
            case Preempted(message):
                preempted[job.id] = (job.state, message)
        if isinstance(decision, Track | Finish) and any(getattr(job, column) != value
                                                        for column, value in decision.update.items()):
            updates[job.id] = decision.update
    return Reconciled(updates, stops, requeue, frozenset(stop_first), cancels, resend, preempted, frozenset(finished))
