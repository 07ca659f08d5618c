"""What an active job becomes given Ray's view of it: table-driven, no database, no Ray."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from job.core.job import ActiveJob
from job.core.reconcile import (
    INFRA_REASONS,
    RAY_FAULTS,
    CancelAbsent,
    Finish,
    NodeRoom,
    OverUse,
    Requeue,
    Resend,
    StartCheck,
    Track,
    over_use,
    reconcile,
    reconcile_all,
    start_check,
)
from job.core.resources import to_units

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(minutes=10)


@dataclass
class RayJob:
    status: str
    driver_node_id: str | None = "n1"
    start_time: datetime | None = EARLIER
    end_time: datetime | None = None
    message: str | None = None
    exit_code: int | None = None
    error_type: str | None = None


def job(state="SUBMITTED", **fields):
    row = {"id": 1, "user_name": "alice", "state": state, "resources": {"CPU": 1}, "node": "n1", "attempt": 1,
           "submission_id": "abc-1-1", "ray_status": None, "reason": None, "started_at": None,
           "max_runtime_s": None, "cancel_requested_at": None, "requeues": 0, "accepted_at": EARLIER,
           "builds_runtime_env": False}
    row.update(fields)
    return ActiveJob(**row)


# What a decision says, whichever it is.
def update_of(decision):
    return decision.update if isinstance(decision, Track | Finish) else None


def stop_of(decision):
    return decision.stop if isinstance(decision, Track) else None


def requeue_of(decision):
    return (decision.reason, decision.message) if isinstance(decision, Requeue) else None


def stop_first_of(decision):
    return isinstance(decision, Requeue) and decision.stop_first


def finished_of(decision):
    return isinstance(decision, Finish | CancelAbsent)


def cancel_unsubmitted_of(decision):
    return isinstance(decision, CancelAbsent)


def resend_of(decision):
    return isinstance(decision, Resend)


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
    assert (update_of(outcome) or {}).get("state") == state
    if update_of(outcome) is not None:
        assert update_of(outcome)["reason"] == reason
        assert set(update_of(outcome)) == {"state", "node", "ray_status", "ray_message", "reason", "message",
                                       "started_at", "finished_at", "exit_code", "accepted_at"}
    assert (stop_of(outcome)[0] if stop_of(outcome) else None) == stop
    assert (requeue_of(outcome)[0] if requeue_of(outcome) else None) == requeue
    assert cancel_unsubmitted_of(outcome) == cancel
    assert finished_of(outcome) == finished


def test_an_intent_ray_has_not_got_is_sent_again_under_its_own_id():
    assert resend_of(reconcile(job("SUBMITTING"), None, NOW))
    assert not resend_of(reconcile(job("SUBMITTING", cancel_requested_at=NOW), None, NOW))
    assert not any(resend_of(reconcile(job(state), None, NOW)) for state in ("SUBMITTED", "RUNNING"))


def test_finished_job_keeps_times_exit_code_and_driver_node():
    outcome = reconcile(job("RUNNING", started_at=EARLIER), RayJob("FAILED", driver_node_id="n2", end_time=NOW,
                                                                  exit_code=3, message="boom"), NOW)
    assert update_of(outcome)["finished_at"] == NOW and update_of(outcome)["started_at"] == EARLIER
    assert update_of(outcome)["exit_code"] == 3 and update_of(outcome)["node"] == "n2"
    assert "exit code 3" in update_of(outcome)["message"] and "boom" in update_of(outcome)["message"]


def test_running_job_gets_its_start_time_from_ray():
    outcome = reconcile(job("SUBMITTED"), RayJob("RUNNING", start_time=EARLIER), NOW)
    assert update_of(outcome)["started_at"] == EARLIER


# --- Who is to blame: Ray's error types ----------------------------------------------------------

# What Ray 2.60 reported for a running job whose node died (its raylet killed): some 15 s after the
# kill, FAILED with this message and JOB_SUPERVISOR_ACTOR_DIED, the driver's node kept, no exit code.
NODE_DIED = (
    "Job supervisor actor died: The actor died unexpectedly before finishing this task.\n\tclass_name: JobSupervisor\n"
    "\tactor_id: 7db44cd5e752e1ce768f17e801000000\n\tpid: 31905\n\tname: _ray_internal_job_actor_victim\n"
    "\tnamespace: SUPERVISOR_ACTOR_RAY_NAMESPACE\n\tip: 192.0.2.2\nThe actor died because its node has died. "
    "Node Id: 8789a170f7829b30123fd45b5594e354f496d07702b41524a450b4be\n\tthe actor's node was terminated "
    "unexpectedly: health check failed due to missing too many heartbeats")

# Every JobErrorType of Ray (ray.job_submission.JobErrorType), and none: whose fault it is.
ERROR_TYPES = [
    ("JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "InfraFailure"),
    ("JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE", "InfraFailure"),
    ("JOB_SUPERVISOR_ACTOR_START_FAILURE", "InfraFailure"),
    ("JOB_SUPERVISOR_ACTOR_DIED", "InfraFailure"),
    ("JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE", "InfraFailure"),
    ("RUNTIME_ENV_SETUP_FAILURE", "Failed"),
    ("JOB_ENTRYPOINT_COMMAND_START_ERROR", "Failed"),
    ("JOB_ENTRYPOINT_COMMAND_ERROR", "Failed"),
    (None, "Failed"),
]


def test_the_table_names_every_fault_of_ray_s_own():
    assert {error_type for error_type, reason in ERROR_TYPES if reason == "InfraFailure"} == RAY_FAULTS
    assert set(INFRA_REASONS) == {"LostInRay", "InfraFailure", "NodeBusy", "ClusterLost"}


@pytest.mark.parametrize("state", ["SUBMITTING", "SUBMITTED", "RUNNING"])
@pytest.mark.parametrize("error_type, reason", ERROR_TYPES, ids=[str(e) for e, _ in ERROR_TYPES])
def test_a_failure_is_requeued_only_when_it_is_ray_s_own(state, error_type, reason):
    ray_job = RayJob("FAILED", end_time=NOW, exit_code=None if error_type in RAY_FAULTS else 1,
                     message="Job supervisor actor died: boom", error_type=error_type)
    outcome = reconcile(job(state, started_at=EARLIER if state == "RUNNING" else None), ray_job, NOW)
    if reason == "InfraFailure":
        assert update_of(outcome) is None and not finished_of(outcome) and not stop_first_of(outcome)
        assert requeue_of(outcome)[0] == "InfraFailure"
        assert error_type in requeue_of(outcome)[1] and "boom" in requeue_of(outcome)[1]
    else:
        assert requeue_of(outcome) is None and finished_of(outcome)
        assert (update_of(outcome)["state"], update_of(outcome)["reason"]) == ("FAILED", "Failed")


def test_a_node_that_died_under_a_running_job_is_named_in_the_requeue():
    ray_job = RayJob("FAILED", driver_node_id="n7", end_time=NOW, message=NODE_DIED, error_type="JOB_SUPERVISOR_ACTOR_DIED")
    outcome = reconcile(job("RUNNING", node="n7", started_at=EARLIER), ray_job, NOW)
    reason, message = requeue_of(outcome)
    assert reason == "InfraFailure"
    assert message.startswith("its node n7 died under it (JOB_SUPERVISOR_ACTOR_DIED): Job supervisor actor died:")
    # Ray's message on one line, cut short: it goes into a one-line reason for people.
    assert "\n" not in message and "\t" not in message and message.endswith("...")


def test_a_supervisor_that_could_not_start_is_said_so():
    ray_job = RayJob("FAILED", driver_node_id=None, end_time=NOW,
                     message="Job supervisor actor failed to start within 900.0 seconds.",
                     error_type="JOB_SUPERVISOR_ACTOR_START_TIMEOUT")
    [_reason, message] = requeue_of(reconcile(job("SUBMITTED"), ray_job, NOW))
    assert message.startswith("Ray's job supervisor could not start (JOB_SUPERVISOR_ACTOR_START_TIMEOUT): Job supervisor")


def test_an_infrastructure_failure_of_a_cancelled_job_ends_it():
    ray_job = RayJob("FAILED", end_time=NOW, message=NODE_DIED, error_type="JOB_SUPERVISOR_ACTOR_DIED")
    outcome = reconcile(job("RUNNING", started_at=EARLIER, cancel_requested_at=EARLIER), ray_job, NOW)
    assert requeue_of(outcome) is None and finished_of(outcome) and update_of(outcome)["state"] == "FAILED"


# --- Start timeout: a driver Ray holds PENDING ---------------------------------------------------

TIMEOUT = 60.0


def room(total=None, free=None, running=None, waiting=None):
    """A node in Ray's amounts (memory in bytes): 2 CPUs and 1 GiB by default, all free."""
    total = {"CPU": 2, "memory": 2**30} if total is None else total
    units = lambda amounts: {name: to_units(amount) for name, amount in (amounts or {}).items()}  # noqa: E731
    return NodeRoom(total=units(total), free=None if free == "unknown" else units(total if free is None else free),
                    running=units(running), waiting=units(waiting))


def pending_in_ray(waited_s, node=None, nodes=None, **fields):
    """What reconcile makes of a SUBMITTED job Ray has held PENDING for `waited_s`, on node n1."""
    row = job("SUBMITTED", **{"accepted_at": NOW - timedelta(seconds=waited_s), **fields})
    check = StartCheck(TIMEOUT, {"n1": room() if node is None else node} if nodes is None else nodes)
    return reconcile(row, RayJob("PENDING", driver_node_id=None, start_time=None), NOW, check)


BUSY = room(free={"CPU": 0, "memory": 2**30})          # both CPUs held, none by our running jobs
OURS = room(free={"CPU": 0, "memory": 2**30}, running={"CPU": 2})   # both CPUs held by our running jobs

WAITING = [
    # (name, waited, node, fields, expected reason, message contains, requeue reason)
    ("busy node, within the timeout", 45, BUSY, {}, "NodeBusy",
     "Ray has not started the driver for 45s: the node's CPUs are held by work outside the queue "
     "(free CPU 0; it needs CPU 1); requeued past the group's start timeout of 1m", None),
    ("busy node, past the timeout", 61, BUSY, {}, "NodeBusy",
     "the node's CPUs are held by work outside the queue (free CPU 0; it needs CPU 1)", "NodeBusy"),
    ("busy node, only env_vars to set", 61, BUSY, {"builds_runtime_env": False}, "NodeBusy", "outside the queue", "NodeBusy"),
    # What is in use may be the driver's own for the few seconds Ray takes to start its worker.
    ("in use, maybe by the driver Ray starts", 9, BUSY, {}, "Starting", "Ray has not started the driver for 9s", None),
    ("in use past the driver's start", 10, BUSY, {}, "NodeBusy", "held by work outside the queue", None),
    ("not even its own share in use", 3, room(free={"CPU": 0.5, "memory": 2**30}, running={"CPU": 1}), {}, "NodeBusy",
     "the node's CPUs are held by work outside the queue (free CPU 0.5; it needs CPU 1)", None),
    ("held by our own running jobs", 61, OURS, {}, "NodeBusy", "held by other jobs of the queue", "NodeBusy"),
    ("held by our own running jobs, a runtime env to build", 61, OURS, {"builds_runtime_env": True}, "NodeBusy",
     "held by other jobs of the queue", "NodeBusy"),
    ("room for it", 600, room(), {}, "Starting",
     "Ray has not started the driver for 10m: its node has the free resources for it", None),
    ("runtime env being built, room left", 600, room(free={"CPU": 1, "memory": 2**30}), {"builds_runtime_env": True},
     "RuntimeEnv", "Ray has not started the driver for 10m: its runtime environment is being set up", None),
    # Ray holds a driver's resources while it builds its runtime env: nothing left free, yet not busy.
    ("runtime env being built, holding the whole node", 600, room(free={"CPU": 0, "memory": 2**30}),
     {"builds_runtime_env": True, "resources": {"CPU": 2}}, "RuntimeEnv", "its runtime environment is being set up", None),
    ("Ray did not say what is free", 600, room(free="unknown"), {}, "Starting",
     "Ray has not started the driver for 10m (Ray did not report what is free on its node)", None),
    ("memory short", 10, room(free={"CPU": 2, "memory": 0}), {"resources": {"CPU": 1, "memory": 2**29}}, "NodeBusy",
     "the node's memory is held by work outside the queue (free memory 0 B; it needs memory 512 MiB)", None),
    ("CPUs and GPUs short", 10, room(total={"CPU": 2, "GPU": 1}, free={"CPU": 0, "GPU": 0}),
     {"resources": {"CPU": 1, "GPU": 1}}, "NodeBusy", "the node's CPUs and GPUs are held by", None),
    ("another of our drivers waits there too", 10, room(free={"CPU": 0, "memory": 2**30}, waiting={"CPU": 3}),
     {}, "NodeBusy", "held by other jobs of the queue", None),
]


@pytest.mark.parametrize("name, waited, node, fields, reason, says, requeue", WAITING, ids=[case[0] for case in WAITING])
def test_a_driver_ray_holds_pending_says_why_and_is_requeued_only_on_a_busy_node(name, waited, node, fields, reason,
                                                                                   says, requeue):
    outcome = pending_in_ray(waited, node, **fields)
    if requeue is None:
        assert requeue_of(outcome) is None and not stop_first_of(outcome)
        assert (update_of(outcome)["state"], update_of(outcome)["reason"]) == ("SUBMITTED", reason)
        assert says in update_of(outcome)["message"]
        assert update_of(outcome)["ray_status"] == "PENDING"
        assert update_of(outcome)["accepted_at"] == NOW - timedelta(seconds=waited)
    else:
        # Stopped in Ray first, then back to PENDING: no update of its own.
        assert update_of(outcome) is None and stop_first_of(outcome) and not finished_of(outcome)
        assert requeue_of(outcome)[0] == requeue
        assert requeue_of(outcome)[1].startswith("Ray did not start the driver within the group's start timeout of 1m"
                                                 " on node n1: ")
        assert says in requeue_of(outcome)[1]


def test_a_job_on_a_node_gone_from_the_group_is_requeued_past_the_timeout():
    waiting = pending_in_ray(30, nodes={})
    assert update_of(waiting)["reason"] == "NodeGone"
    assert "its node n1 is not among the group's alive nodes (requeued past" in update_of(waiting)["message"]
    gone = pending_in_ray(61, nodes={})
    assert requeue_of(gone)[0] == "InfraFailure" and stop_first_of(gone)


def test_a_cancel_wins_over_the_start_timeout():
    outcome = pending_in_ray(600, BUSY, cancel_requested_at=NOW)
    assert requeue_of(outcome) is None and stop_of(outcome) == ("Cancelled", "stop requested by `cancel`")
    assert update_of(outcome)["reason"] == "Cancelled"


def test_the_time_in_ray_counts_from_our_own_record_of_acceptance():
    # Ray's start_time is not used; a submission adopted after a lost answer starts counting now.
    outcome = pending_in_ray(0, BUSY, accepted_at=None)
    assert update_of(outcome)["accepted_at"] == NOW and "for 0s" in update_of(outcome)["message"]
    adopted = reconcile(job("SUBMITTING", accepted_at=None), RayJob("PENDING"), NOW)
    assert update_of(adopted)["accepted_at"] == NOW
    running = reconcile(job("RUNNING", started_at=EARLIER), RayJob("RUNNING"), NOW, StartCheck(TIMEOUT, {"n1": BUSY}))
    assert update_of(running)["accepted_at"] == EARLIER and update_of(running)["reason"] is None


def test_without_the_nodes_nothing_is_diagnosed():
    outcome = reconcile(job("SUBMITTED", accepted_at=NOW - timedelta(hours=1)), RayJob("PENDING"), NOW)
    assert requeue_of(outcome) is None and update_of(outcome)["reason"] is None


@dataclass
class Node:
    id: str
    resources: dict
    free: dict | None


def test_start_check_counts_what_our_jobs_hold_and_wait_for_per_node():
    active = [job("RUNNING", id=1, submission_id="s1", node="n1", resources={"CPU": 1}),
              job("SUBMITTED", id=2, submission_id="s2", node="n1", resources={"CPU": 0.5}),
              job("SUBMITTED", id=3, submission_id="s3", node="n2", resources={"CPU": 2}),
              job("SUBMITTING", id=4, submission_id="s4", node="n2", resources={"CPU": 2})]
    ray_jobs = {"s1": RayJob("RUNNING", driver_node_id="n1"), "s2": RayJob("PENDING", driver_node_id=None),
                "s3": RayJob("PENDING", driver_node_id=None)}
    check = start_check(TIMEOUT, [Node("n1", {"CPU": 2}, {"CPU": 0.5}), Node("n2", {"CPU": 4}, None)], active, ray_jobs)
    assert check.timeout_s == TIMEOUT
    assert check.nodes["n1"] == NodeRoom(total={"CPU": 20000}, free={"CPU": 5000}, running={"CPU": 10000},
                                         waiting={"CPU": 5000})
    assert check.nodes["n2"] == NodeRoom(total={"CPU": 40000}, free=None, running={}, waiting={"CPU": 20000})
    assert ("n2" in check.nodes, "n3" in check.nodes, list(check.nodes), len(check.nodes)) == (True, False, ["n1", "n2"], 2)


def test_reconcile_all_stops_first_what_it_requeues_for_a_busy_node():
    active = [job("SUBMITTED", id=1, submission_id="s1", accepted_at=NOW - timedelta(seconds=61)),
              job("SUBMITTED", id=2, submission_id="s2", accepted_at=NOW - timedelta(seconds=15)),
              job("RUNNING", id=3, submission_id="s3", started_at=EARLIER)]
    ray_jobs = {"s1": RayJob("PENDING"), "s2": RayJob("PENDING"),
                "s3": RayJob("FAILED", end_time=NOW, message=NODE_DIED, error_type="JOB_SUPERVISOR_ACTOR_DIED")}
    decided = reconcile_all(active, ray_jobs, NOW, StartCheck(TIMEOUT, {"n1": BUSY}))
    assert {job_id: reason for job_id, (_, reason, _) in decided.requeue.items()} == {1: "NodeBusy", 3: "InfraFailure"}
    assert decided.requeue[1][0] == "SUBMITTED" and decided.requeue[3][0] == "RUNNING"
    assert decided.stop_first == {1} and decided.gone == {1, 3} and not decided.finished
    assert decided.updates[2]["reason"] == "NodeBusy" and 1 not in decided.updates


def test_a_waiting_message_is_written_again_only_when_it_changes():
    row = job("SUBMITTED", accepted_at=NOW - timedelta(seconds=20.2))
    check = StartCheck(TIMEOUT, {"n1": BUSY})
    first = reconcile_all([row], {"abc-1-1": RayJob("PENDING")}, NOW, check).updates[1]
    row = replace(row, **first)
    again = reconcile_all([row], {"abc-1-1": RayJob("PENDING")}, NOW + timedelta(milliseconds=300), check)
    assert again.updates == {}


# --- Who is to blame: a node of a job's bundles died -----------------------------------------------

# A gang with its driver on n1 and a bundle on each of n1 and n2.
GANG = {"bundles": [{"CPU": 2}, {"CPU": 2}], "bundle_strategy": "STRICT_SPREAD", "bundle_nodes": ["n1", "n2"]}
BOTH_ALIVE = StartCheck(TIMEOUT, {"n1": room(), "n2": room()})
N2_DEAD = StartCheck(TIMEOUT, {"n1": room()})
N1_DEAD = StartCheck(TIMEOUT, {"n2": room()})

BUNDLE_NODES = [
    # (name, job, ray job, alive nodes, expected: requeued, stop asked of Ray, state of a job that goes on)
    ("running, a bundle's node died", job("RUNNING", started_at=EARLIER, **GANG), RayJob("RUNNING"), N2_DEAD,
     (True, None, None)),
    ("pending in Ray, a bundle's node died", job("SUBMITTED", **GANG), RayJob("PENDING", driver_node_id=None), N1_DEAD,
     (True, None, None)),
    ("every bundle's node alive", job("RUNNING", started_at=EARLIER, **GANG), RayJob("RUNNING"), BOTH_ALIVE,
     (False, None, "RUNNING")),
    # Ray reports the death of the driver's node itself (JOB_SUPERVISOR_ACTOR_DIED), in its words.
    ("the driver's node died", job("RUNNING", started_at=EARLIER, **GANG), RayJob("RUNNING"), N1_DEAD,
     (False, None, "RUNNING")),
    # A failed node list fails the tick; a reconciliation without the nodes knows of no death.
    ("nodes unknown", job("RUNNING", started_at=EARLIER, **GANG), RayJob("RUNNING"), None, (False, None, "RUNNING")),
    ("a job without bundles", job("RUNNING", started_at=EARLIER, node="n2"), RayJob("RUNNING", driver_node_id="n2"),
     N1_DEAD, (False, None, "RUNNING")),
    ("cancelled", job("RUNNING", started_at=EARLIER, cancel_requested_at=EARLIER, **GANG), RayJob("RUNNING"), N2_DEAD,
     (False, "Cancelled", "RUNNING")),
    # Being stopped already: back to the queue as a preemption, not spending a requeue.
    ("a victim being preempted", job("RUNNING", started_at=EARLIER, preempted_at=EARLIER, preempted_by=9, **GANG),
     RayJob("RUNNING"), N2_DEAD, (False, "Preempted", "RUNNING")),
    ("ended in Ray meanwhile", job("RUNNING", started_at=EARLIER, **GANG), RayJob("SUCCEEDED", end_time=NOW, exit_code=0),
     N2_DEAD, (False, None, "SUCCEEDED")),
]


@pytest.mark.parametrize("name, row, ray_job, alive, expected", BUNDLE_NODES, ids=[case[0] for case in BUNDLE_NODES])
def test_a_job_whose_bundle_s_node_died_is_stopped_and_requeued_as_ray_s_fault(name, row, ray_job, alive, expected):
    requeued, stop, state = expected
    outcome = reconcile(row, ray_job, NOW, alive)
    if requeued:
        dead = next(node for node in row.bundle_nodes if node not in alive.nodes)
        assert update_of(outcome) is None and stop_first_of(outcome) and not finished_of(outcome)
        reason, message = requeue_of(outcome)
        assert reason == "InfraFailure"
        assert message.startswith(f"its bundle's node {dead} died under it (gone from the group's alive nodes")
    else:
        assert requeue_of(outcome) is None and not stop_first_of(outcome)
        assert stop_of(outcome) == (None if stop is None else (stop, stop_of(outcome)[1]))
        assert update_of(outcome)["state"] == state


def test_reconcile_all_stops_first_a_gang_whose_bundle_s_node_died_and_counts_it_a_requeue():
    active = [job("RUNNING", id=1, submission_id="s1", started_at=EARLIER, **GANG),
              job("RUNNING", id=2, submission_id="s2", started_at=EARLIER)]
    decided = reconcile_all(active, {"s1": RayJob("RUNNING"), "s2": RayJob("RUNNING")}, NOW, N2_DEAD)
    assert decided.requeue[1][:2] == ("RUNNING", "InfraFailure") and "InfraFailure" in INFRA_REASONS
    assert decided.stop_first == {1} and decided.gone == {1} and not decided.stops


# --- Over-use (`--overuse stop`) -----------------------------------------------------------------

def over_record(since: datetime | None) -> dict:
    return {"declared": {"CPU": 0.5}, "used": {"CPU": 3.5}, "charged": {"CPU": 3.5},
            "over_since": since.isoformat() if since else None}


@pytest.mark.parametrize("since, grace_s, past", [
    (None, 0, False),                       # within its declaration
    (NOW - timedelta(seconds=4), 5, False),  # over, within the grace
    (NOW - timedelta(seconds=5), 5, True),   # over for the whole grace
    (NOW, 0, True),                         # no grace
])
def test_over_use_is_past_the_grace_from_when_it_started(since, grace_s, past):
    decision = over_use(over_record(since), grace_s, NOW)
    assert (decision is not None) == past
    assert over_use(None, 0, NOW) is None


def test_the_over_use_message_names_what_it_used_and_declared_and_the_grace():
    assert over_use(over_record(NOW - timedelta(seconds=12)), 5, NOW) == OverUse(
        "used CPU 3.5 and declared CPU 0.5 for 12s, past the group's over-use grace of 5s")


def test_a_running_job_past_its_grace_is_stopped_with_its_reason_and_keeps_its_message_while_it_stops():
    over = OverUse("used CPU 3.5 and declared CPU 0.5 for 12s, past the group's over-use grace of 5s")
    decision = reconcile(job("RUNNING", started_at=EARLIER), RayJob("RUNNING"), NOW, over=over)
    assert stop_of(decision) == ("OverUse", over.message)
    assert (update_of(decision)["reason"], update_of(decision)["message"]) == ("OverUse", over.message)
    stopping = job("RUNNING", started_at=EARLIER, reason="OverUse", message="used CPU 2 and declared CPU 0.5 for 6s")
    later = reconcile(stopping, RayJob("RUNNING"), NOW, over=over)
    assert stop_of(later) == ("OverUse", "used CPU 2 and declared CPU 0.5 for 6s")
    # Its actors, stopping first, bring its use back under its declaration: still stopping for it.
    assert stop_of(reconcile(stopping, RayJob("RUNNING"), NOW)) == ("OverUse", "used CPU 2 and declared CPU 0.5 for 6s")
    # A cancel comes first; a job Ray holds PENDING has no use of its own yet.
    assert stop_of(reconcile(job("RUNNING", started_at=EARLIER, cancel_requested_at=NOW), RayJob("RUNNING"), NOW,
                             over=over))[0] == "Cancelled"
    assert stop_of(reconcile(job("SUBMITTED"), RayJob("PENDING", start_time=None), NOW, over=over)) is None


def test_a_job_stopped_for_its_over_use_ends_failed_its_own_fault_with_its_message():
    stopping = job("RUNNING", started_at=EARLIER, reason="OverUse", message="used CPU 3.5 and declared CPU 0.5 for 6s")
    decision = reconcile(stopping, RayJob("STOPPED", end_time=NOW), NOW)
    assert isinstance(decision, Finish)
    assert (decision.update["state"], decision.update["reason"], decision.update["message"]) == (
        "FAILED", "OverUse", "used CPU 3.5 and declared CPU 0.5 for 6s")


def test_reconcile_all_stops_the_jobs_past_their_grace_only():
    over = OverUse("used CPU 3.5 and declared CPU 0.5 for 12s, past the group's over-use grace of 5s")
    jobs = [job("RUNNING", id=1, submission_id="s1", started_at=EARLIER),
            job("RUNNING", id=2, submission_id="s2", started_at=EARLIER)]
    decided = reconcile_all(jobs, {"s1": RayJob("RUNNING"), "s2": RayJob("RUNNING")}, NOW, over={2: over})
    assert decided.stops == {2: ("OverUse", over.message)}
