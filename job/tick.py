"""One tick over the resource groups: lock, observe, plan, commit, submit, report (DESIGN.md).

Each group has its own connection, holding the group's advisory lock for the whole tick: a tick
that dies releases it with its connection. Intents are committed before Ray is called, and every
write is guarded by the state it expects, so a concurrent `cancel` or a crash at any point loses
nothing and submits no attempt twice."""

from __future__ import annotations

import gc
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

import psycopg
from pydantic import TypeAdapter, ValidationError

from job import db, log
from job import tick_store as ts
from job.errors import ClusterNotReady, JobError, NotFound, Unavailable
from job.failpoints import failpoint
from job.planner import Snapshot, plan
from job.planner.resources import to_units
from job.planner.snapshot import ResourceMap
from job.planner.usage import charge_users
from job.reconcile import reconcile
from job.settings import settings

METADATA_PREFIX = "scheduler."
NEW_REASONS_PER_TICK = 5_000
MESSAGE_REFRESH_PER_TICK = 1_000


@dataclass
class GroupResult:
    group: str
    status: str  # ticked | skipped | failed
    cause: str = ""
    placed: int = 0
    waiting: Counter = field(default_factory=Counter)
    running: int = 0
    finished: int = 0
    steps_ms: dict[str, float] = field(default_factory=dict)
    reasons_written: int = 0
    # Time spent waiting on Ray, within the steps: the rest is ours and PostgreSQL's.
    ray_ms: float = 0.0
    statements: int = 0
    plan: dict | None = None


class _Steps:
    """Wall time per step of a group's tick, and of its Ray calls, for the summary line and the
    benchmark."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self.ray_ms = 0.0
        self._last = time.perf_counter()

    def ray(self, call, *args, **kwargs):
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.ray_ms += (time.perf_counter() - began) * 1000

    def done(self, step: str) -> None:
        now = time.perf_counter()
        self.ms[step] = round(self.ms.get(step, 0) + (now - self._last) * 1000, 1)
        self._last = now


@contextmanager
def _without_gc():
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def run_tick(group_name: str | None = None, *, dry_run: bool = False, database_url: str | None = None) -> list[GroupResult]:
    with db.session(database_url) as conn:
        groups = ts.groups(conn, group_name)
        installation = ts.installation_id(conn)
    if group_name is not None and not groups:
        raise NotFound(f"group {group_name!r} does not exist (see `python -m job group list`)")
    results = []
    for group in groups:
        try:
            result = tick_group(group, installation, dry_run=dry_run, database_url=database_url)
        except ClusterNotReady as exc:
            # A RayCluster still being created or resumed is expected: skipped, like a held lock.
            result = GroupResult(group["name"], "skipped", cause=str(exc))
            log.warning("group_skipped", group=group["name"], reason="ClusterNotReady", message=str(exc))
        except (JobError, OSError, psycopg.Error) as exc:
            result = GroupResult(group["name"], "failed", cause=str(exc))
            log.error("group_failed", group=group["name"], cause=str(exc))
        results.append(result)
    return results


def tick_group(group: dict, installation: str, *, dry_run: bool = False, database_url: str | None = None) -> GroupResult:
    name = group["name"]
    with db.connect(database_url, counting=True) as conn:
        if not dry_run and not ts.try_lock(conn, name):
            conn.commit()
            log.event("group_skipped", group=name, reason="locked", message="another tick holds this group")
            return GroupResult(name, "skipped", cause="locked")
        try:
            return _tick_locked(conn, group, installation, dry_run)
        finally:
            if not dry_run and not conn.closed:
                conn.rollback()
                ts.unlock(conn, name)
                conn.commit()


def cluster_of(group: dict):
    from job.ray_adapter import cluster_for

    address = group["ray_address"]
    if address.startswith("raycluster://"):
        from job.raycluster import resolve_dashboard_url

        address = resolve_dashboard_url(address)
    return cluster_for(address)


def _tick_locked(conn, group: dict, installation: str, dry_run: bool) -> GroupResult:
    name = group["name"]
    steps = _Steps()
    result = GroupResult(name, "ticked")

    # Observe: the nodes, and our active jobs as Ray sees them.
    cluster = cluster_of(group)
    nodes = steps.ray(cluster.nodes, group["node_labels"], group["use_head_node"])
    active = ts.active_jobs(conn, name)
    ray_jobs = steps.ray(cluster.jobs) if active else {}
    now = utcnow()
    steps.done("observe")

    totals: dict[str, int] = defaultdict(int)
    for node in nodes:
        for resource, amount in node.resources.items():
            totals[resource] += to_units(amount)
    if dry_run:
        still_active, users = active, ts.users_of_group(conn, name)
    else:
        still_active, users = _reconcile(conn, group, cluster, active, ray_jobs, now, totals, result, steps)
    steps.done("reconcile")

    # Plan, and the waiting reasons that changed. Reading 100k pending rows and building their
    # snapshot make objects that are never cyclic garbage: collecting meanwhile would only rescan
    # them, over and over.
    with _without_gc():
        pending = ts.pending_jobs(conn, name)
        state = ts.group_state(conn, name)
        snapshot, invalid = _snapshot(group, now, nodes, still_active, pending, users, state)
        decided = plan(snapshot)
        changed = _waiting_changes(pending, decided.waiting)
    steps.done("plan")
    result.running = len(still_active)
    result.waiting = Counter(w["reason"] for w in decided.waiting)
    if dry_run:
        result.plan = decided.model_dump(mode="json")
        result.placed = len(decided.placements)
        result.steps_ms, result.ray_ms, result.statements = steps.ms, steps.ray_ms, conn.statements
        return result

    # Commit: intents, waiting reasons that changed, and the selector's state, in one transaction.
    ts.fail_invalid(conn, invalid)
    for job_id, message in invalid.items():
        log.warning("job_invalid", group=name, job=job_id, message=message)
    intents = ts.commit_intents(conn, [(int(p["job"]), p["node"]) for p in decided.placements], installation)
    ts.set_waiting(conn, changed)
    result.reasons_written = len(changed)
    ts.save_group_state(conn, name, decided.state)
    conn.commit()
    steps.done("commit")
    failpoint("after-intent")

    # Submit.
    shares = {user["name"]: user for user in users}
    submitted, requeue = steps.ray(_submit, cluster, group, intents)
    failpoint("after-submit")
    ts.mark_submitted(conn, submitted)
    for row in ts.return_to_pending(conn, requeue, group["max_attempts"]):
        log.warning("submit_refused", group=name, job=row["id"], user=row["user_name"], state=row["state"],
                    message=requeue[row["id"]][2])
    conn.commit()
    steps.done("submit")
    accepted = set(submitted)
    for intent in intents:
        if intent["id"] in accepted:
            user = shares.get(intent["user_name"], {})
            log.event("placed", group=name, job=intent["id"], user=intent["user_name"], node=intent["node"],
                      attempt=intent["attempt"], policy=group["policy"], selector=group["selector"],
                      shares=user.get("shares"), usage=round(user.get("usage", 0), 3))
    result.placed = len(submitted)
    result.steps_ms, result.ray_ms, result.statements = steps.ms, steps.ray_ms, conn.statements
    _summary(result)
    return result


def _reconcile(conn, group: dict, cluster, active: list[dict], ray_jobs: dict, now: datetime,
               totals: dict[str, int], result: GroupResult, steps: _Steps) -> tuple[list[dict], list[dict]]:
    """Bring our active jobs in line with Ray, carry out stops, fail pending timeouts and charge
    usage. Returns the jobs still active, and the group's users with their usage as charged."""
    name = group["name"]
    updates, stops, requeue, cancels = {}, {}, {}, []
    # No longer active: finished, or back to PENDING for a new attempt.
    finished_ids, gone_ids = set(), set()
    by_id = {job["id"]: job for job in active}
    for job in active:
        outcome = reconcile(job, ray_jobs.get(job["submission_id"]), now)
        if outcome.update is not None and _changed(job, outcome.update):
            updates[job["id"]] = outcome.update
        if outcome.stop is not None:
            stops[job["id"]] = outcome.stop
        if outcome.requeue is not None:
            requeue[job["id"]] = (job["state"], *outcome.requeue)
        if outcome.cancel_unsubmitted:
            cancels.append(job["id"])
        if outcome.finished:
            finished_ids.add(job["id"])
        if outcome.finished or outcome.requeue is not None:
            gone_ids.add(job["id"])
    for job_id, (reason, message) in stops.items():
        job = by_id[job_id]
        if job["reason"] != reason:
            steps.ray(cluster.stop, job["submission_id"])
            log.event("stop_requested", group=name, job=job_id, user=job["user_name"], reason=reason, message=message)
    written = ts.update_jobs(conn, updates, from_states=("SUBMITTING", "SUBMITTED", "RUNNING"))
    for row in ts.return_to_pending(conn, requeue, group["max_attempts"]):
        log.warning("requeued", group=name, job=row["id"], user=row["user_name"], state=row["state"],
                    reason=requeue[row["id"]][1], message=requeue[row["id"]][2])
    for job_id in ts.cancel_absent(conn, cancels):
        log.event("job_finished", group=name, job=job_id, state="CANCELLED", reason="Cancelled")
    for job in active:
        update = updates.get(job["id"])
        if update is not None and job["id"] in written and job["id"] in finished_ids:
            runtime = (update["finished_at"] - update["started_at"]).total_seconds() if update["started_at"] else None
            log.event("job_finished", group=name, job=job["id"], user=job["user_name"], state=update["state"],
                      reason=update["reason"], exit_code=update["exit_code"], node=update["node"],
                      runtime_s=round(runtime, 1) if runtime is not None else None)
    result.finished = len(finished_ids)

    if group["pending_timeout_s"] is not None:
        for row in ts.fail_pending_timeouts(conn, name, group["pending_timeout_s"], now):
            log.event("job_finished", group=name, job=row["id"], user=row["user_name"], state="FAILED", reason="PendingTimeout")
            result.finished += 1

    users = _charge(conn, group, active, totals, now)
    conn.commit()
    return [job for job in active if job["id"] not in gone_ids], users


def _changed(job: dict, update: dict) -> bool:
    return any(job[column] != update[column] for column in ts.JOB_UPDATE_COLUMNS)


def _charge(conn, group: dict, ran: list[dict], totals: dict[str, int], now: datetime) -> list[dict]:
    """Charge each user the dominant share its jobs held since the last charge, decayed by the half
    life. Returns the group's users (those with jobs waiting or active, or with usage) as charged."""
    since = group["usage_charged_at"]
    users = ts.users_of_group(conn, group["name"])
    if since is None:
        ts.charge_usage(conn, group["name"], {}, now)
        return users
    elapsed = max((now - since).total_seconds(), 0.0)
    held: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job in ran:
        for resource, amount in job["resources"].items():
            held[job["user_name"]][resource] += to_units(amount)
    usage = charge_users({user["name"]: user["usage"] for user in users}, held, totals, elapsed, group["half_life_s"])
    ts.charge_usage(conn, group["name"], usage, now)
    return [{**user, "usage": usage.get(user["name"], user["usage"])} for user in users]


def _waiting_changes(pending: list[tuple], waiting: list[dict]) -> dict[int, tuple[str, str]]:
    """The waiting reasons to write, in queue order, bounded so that a tick's writes stay bounded
    with 100k jobs waiting. A new reason goes first (at most NEW_REASONS_PER_TICK; after a burst
    of submissions the rest follow over the next ticks). A message that only restates figures
    (the most CPU free on any node) changes whenever the cluster does, for every job of that
    shape: it is refreshed for the first MESSAGE_REFRESH_PER_TICK jobs only, so the head of the
    queue is always current."""
    known = {row[0]: row for row in pending}
    changed = {}
    refreshes = []
    for entry in waiting:
        job_id, reason, message = int(entry["job"]), entry["reason"], entry["message"]
        row = known.get(job_id)
        if row is not None and row[7] == reason and row[8] == message:
            continue
        if row is None or row[7] != reason:
            if len(changed) < NEW_REASONS_PER_TICK:
                changed[job_id] = (reason, message)
        elif len(refreshes) < MESSAGE_REFRESH_PER_TICK:
            refreshes.append((job_id, (reason, message)))
    changed.update(refreshes)
    return changed


_REQUEST = TypeAdapter(ResourceMap)
_LABELS = TypeAdapter(dict[str, str])


def _checked(adapter: TypeAdapter, text: str, field: str) -> dict | str:
    """The validated value of a JSON text, or what is wrong with it."""
    try:
        return adapter.validate_json(text)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        return f"{'.'.join(str(part) for part in (field, *error['loc']))}: {error['msg']}"


def _snapshot(group: dict, now: datetime, nodes: list, active: list[dict], pending: list[tuple],
              users: list[dict], state: dict) -> tuple[Snapshot, dict[int, str]]:
    """The planner's snapshot, and the pending jobs left out of it because their row cannot be
    planned (e.g. a negative amount written around `submit`): id -> what is wrong.

    Pending jobs are checked here rather than by Snapshot's own validation, which costs about a
    second per 100k jobs: ids, users, priorities and times come typed from PostgreSQL, and what a
    row can get wrong, its request and labels, is checked once per distinct value."""
    snapshot = Snapshot.model_validate({
        "group": {
            "name": group["name"], "policy": group["policy"], "selector": group["selector"],
            "resource_priority": group["resource_priority"], "half_life_s": group["half_life_s"],
            "max_running_per_user": group["max_running_per_user"],
            "max_resources_per_user": group["max_resources_per_user"], "strict_order": group["strict_order"],
        },
        "now": now,
        "nodes": [{"id": n.id, "resources": n.resources, "labels": n.labels} for n in nodes],
        "running": [{"id": str(j["id"]), "user": j["user_name"], "node": j["node"], "resources": j["resources"]}
                    for j in active if j["node"]],
        "users": {u["name"]: {"shares": u["shares"], "usage": u["usage"], "max_running": u["max_running"],
                              "max_resources": u["max_resources"]} for u in users},
        "state": state,
    })
    requests: dict[str, dict | str] = {}
    labels: dict[str, dict | str] = {}
    jobs, invalid = [], {}
    for job_id, user, request_text, labels_text, priority, submitted_at, not_before, _, _ in pending:
        request = requests.get(request_text)
        if request is None:
            request = requests[request_text] = _checked(_REQUEST, request_text, "resources")
        label_map = labels.get(labels_text)
        if label_map is None:
            label_map = labels[labels_text] = _checked(_LABELS, labels_text, "node_labels")
        if isinstance(request, str) or isinstance(label_map, str):
            invalid[job_id] = request if isinstance(request, str) else label_map
            continue
        jobs.append({"id": str(job_id), "user": user, "resources": request, "priority": priority,
                     "submitted_at": submitted_at, "not_before": not_before, "node_labels": label_map})
    snapshot.pending = jobs
    return snapshot, invalid


def _submit(cluster, group: dict, intents: list[dict]) -> tuple[list[int], dict[int, tuple[str, str, str]]]:
    """Submit every intent, a few at a time. Returns the ids Ray has, and those Ray refused (to
    return to PENDING). An intent whose fate is unknown (Ray unreachable) stays SUBMITTING: the
    next tick looks its submission_id up in Ray."""
    from job.ray_adapter import RaySubmitRefused

    def submit(intent: dict) -> tuple[dict, Exception | None]:
        metadata = {**intent["metadata"], f"{METADATA_PREFIX}job_id": str(intent["id"]),
                    f"{METADATA_PREFIX}user": intent["user_name"], f"{METADATA_PREFIX}group": intent["group_name"],
                    f"{METADATA_PREFIX}attempt": str(intent["attempt"])}
        try:
            cluster.submit(submission_id=intent["submission_id"], entrypoint=intent["entrypoint"],
                           node_id=intent["node"], resources=intent["resources"],
                           runtime_env=intent["runtime_env"], metadata=metadata)
            return intent, None
        except Exception as exc:  # sorted out below; one job's failure must not end the others
            return intent, exc

    submitted, refused = [], {}
    unavailable = None
    if not intents:
        return submitted, refused
    with ThreadPoolExecutor(max_workers=min(settings().submit_concurrency, len(intents))) as pool:
        for intent, exc in pool.map(submit, intents):
            if exc is None:
                submitted.append(intent["id"])
            elif isinstance(exc, RaySubmitRefused):
                refused[intent["id"]] = ("SUBMITTING", "SubmitRefused", str(exc))
            else:
                unavailable = exc
                log.warning("submit_unknown", group=group["name"], job=intent["id"],
                            submission_id=intent["submission_id"], cause=str(exc) or type(exc).__name__)
    if unavailable is not None and not submitted and not refused:
        raise unavailable if isinstance(unavailable, JobError) else Unavailable(str(unavailable))
    return submitted, refused


def _summary(result: GroupResult) -> None:
    log.event("group_ticked", group=result.group, placed=result.placed, waiting=sum(result.waiting.values()),
              reasons_written=result.reasons_written,
              **{f"waiting_{reason}": count for reason, count in sorted(result.waiting.items())},
              running=result.running, finished=result.finished, statements=result.statements,
              **{f"{step}_ms": ms for step, ms in result.steps_ms.items()}, ray_ms=round(result.ray_ms, 1))
