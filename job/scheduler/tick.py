"""One tick over the resource groups: lock, observe, reconcile, schedules, plan, commit, submit, report.

Each group has its own connection, holding the group's advisory lock for the whole tick: a tick
that dies releases it with its connection. Intents are committed before Ray is called, and every
write is guarded by the state it expects, so a concurrent `cancel` or a crash at any point loses
nothing and submits no attempt twice."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import psycopg

from job import log
from job.core import collection
from job.core.arrays import throttle
from job.core.clusters import UNANSWERED, Unanswered
from job.core.dependents import Dependents, held_of, named, split, waited_for
from job.core.driver_caps import driver_rooms, within_caps, without_full
from job.core.errors import ClusterNotReady, JobError, NotFound
from job.core.estimates import RECENT, RunTimes, WaitingOn, estimate, throttled_arrays
from job.core.group import GroupConfig
from job.core.group_snapshot import RELEASING, Decisions, build_snapshot, due_at, reservation_changes, running_of
from job.core.job import ActiveJob, Intent, PendingRow, Victim
from job.core.job_row import usable
from job.core.members import Member
from job.core.observed import ClusterWork, observe, record
from job.core.planner import Plan, plan
from job.core.resources import to_units
from job.core.share import placement_figures
from job.core.states import Reason
from job.core.waiting import counted, waiting_changes
from job.scheduler.autoscale import group_node_types, plan_demand, send_demand
from job.scheduler.clusters import Clusters, Settled, cluster_name, read_clusters, settle
from job.scheduler.config import TickConfig
from job.scheduler.failpoints import failpoint
from job.scheduler.pending import PendingRows
from job.scheduler.reconcile import Reconciliation, Seen, reconcile_group
from job.scheduler.report import GroupResult, Steps, summary
from job.scheduler.schedules import run_schedules
from job.scheduler.submit import submit_clusters
from job.scheduler.ticks import record_ticks
from job.store import accounts, events, groups, tick_jobs, users
from job.store.connection import CountingConnection, connect, session


def utcnow() -> datetime:
    return datetime.now(UTC)


def run_tick(config: TickConfig, group_name: str | None = None, *, dry_run: bool = False,
             pending: PendingRows | None = None) -> list[GroupResult]:
    """Ticks the group named, else every group. `pending`: the pending rows kept by a process that
    ticks again (the loop); without it, each group's are all read."""
    # One connection for the groups' list and the ticks' record, kept idle between them: a
    # connection costs PostgreSQL a transaction of its own (an idle minute, bench/latency.py).
    with session(config.database_url) as conn:
        chosen = groups.groups(conn, group_name)
        installation = groups.installation_id(conn)
        conn.commit()
        if group_name is not None and not chosen:
            raise NotFound(f"group {group_name!r} does not exist (see `python -m job group list`)")
        results = _tick_groups(config, chosen, installation, dry_run, pending)
        if not dry_run:
            record_ticks(conn, results)
        return results


def _tick_groups(config: TickConfig, chosen: list[GroupConfig], installation: str, dry_run: bool,
                 pending: PendingRows | None) -> list[GroupResult]:
    results = []
    for group in chosen:
        began = time.perf_counter()
        try:
            result = tick_group(config, group, installation, dry_run=dry_run, pending=pending)
        except ClusterNotReady as exc:
            # A RayCluster still being created or resumed is expected: skipped, like a held lock.
            result = GroupResult(group.name, "skipped", cause=str(exc))
            log.warning("group_skipped", group=group.name, reason="ClusterNotReady", message=str(exc))
        except (JobError, OSError, psycopg.Error) as exc:
            result = GroupResult(group.name, "failed", cause=str(exc))
            log.error("group_failed", group=group.name, cause=str(exc), **getattr(exc, "fields", {}))
        except Exception as exc:  # a value no check foresaw (a row written past the CLI)
            # fails its own group, not the groups after it: named by its type, for the bug report.
            result = GroupResult(group.name, "failed", cause=f"{type(exc).__name__}: {exc}")
            log.error("group_failed", group=group.name, cause=result.cause, error=type(exc).__name__)
        result.seconds = time.perf_counter() - began
        results.append(result)
    return results


def tick_group(config: TickConfig, group: GroupConfig, installation: str, *, dry_run: bool = False,
               pending: PendingRows | None = None) -> GroupResult:
    name = group.name
    pending = PendingRows() if pending is None else pending
    with connect(config.database_url, counting=True) as conn:
        if not dry_run and not groups.try_lock(conn, name):
            conn.commit()
            log.event("group_skipped", group=name, reason="locked", message="another tick holds this group")
            return GroupResult(name, "skipped", cause="locked")
        try:
            # Read again under the lock: a tick that held it meanwhile changed the row (when usage
            # was last charged), and charging from the copy read before would count twice.
            current = group if dry_run else groups.get_group(conn, name)
            current.check()
            # 100k pending rows, their snapshot and plan, held until the group's tick ends.
            with collection.paused():
                return _GroupTick(conn, config, current, installation, pending).run(dry_run)
        except BaseException:
            pending.forget(name)
            raise
        finally:
            if not dry_run and not conn.closed:
                conn.rollback()
                groups.unlock(conn, name)
                conn.commit()


@dataclass(frozen=True)
class PlanStep:
    """What the plan step decided, for the commit and the steps after it."""

    # The planner's own plan (its JSON: the dry run's output).
    plan: Plan
    decisions: Decisions
    pending: list[PendingRow]
    # Pending rows that cannot be planned: id -> why.
    invalid: dict[int, str]
    # The waiting reasons to write: id -> (reason, message).
    changed: dict[int, tuple[str, str]]
    # What the pending jobs' dependencies decided (those it holds back are not in `pending`).
    dependents: Dependents
    # The group state as read, and the documents to save with the plan (the selector's state,
    # and the ended jobs Ray may still be freeing when they changed).
    state: dict
    saved: dict
    # What only the commit writes (none for a dry run): the estimates that changed, and the
    # placement's figures by job id.
    estimates: dict = field(default_factory=dict)
    figures: dict[int, dict] = field(default_factory=dict)
    # The autoscaler's demand of each cluster, for a group that autoscales.
    demand: dict[str, list[dict]] | None = None
    # The cluster of each node, by id: each intent's cluster.
    node_clusters: dict[str, str] = field(default_factory=dict)


class _GroupTick:
    """One group's tick under its lock, step by step: each step returns what the next ones need."""

    def __init__(self, conn: CountingConnection, config: TickConfig, group: GroupConfig, installation: str,
                 pending: PendingRows):
        self.conn, self.config, self.group, self.installation = conn, config, group, installation
        self.pending = pending
        self.name = group.name
        self.steps = Steps()
        self.result = GroupResult(self.name, "ticked")

    def run(self, dry_run: bool) -> GroupResult:
        seen = self.observe()
        settled = self.steps.ray(settle, self.group, seen.clusters, seen.active, seen.state, seen.now, dry_run)
        if dry_run:
            done = Reconciliation(seen.active, users.users_of_group(self.conn, self.name), [], [], 0)
        else:
            done = reconcile_group(self.conn, self.group, seen, self.steps, settled)
            self.result.finished = done.finished
            self._drop_removed(done.active)
        self.steps.done("reconcile")
        # A due slot's job, written before the plan reads the pending jobs: planned this tick.
        next_slot = None if dry_run else run_schedules(self.conn, self.name, seen.now)
        self.steps.done("schedules")
        step = self.plan(seen, done, settled, dry_run)
        if dry_run:
            self.result.plan = step.plan.document()
            self.result.placed = len(step.decisions.placements)
            self.steps.record(self.result, self.conn.statements)
            return self.result
        intents, victims = self.commit(step, done, seen.now)
        self.preempt(seen.clusters, victims, step.pending, seen.now)
        self.submit(seen.clusters, intents, done.members)
        if seen.node_types is not None and step.demand is not None:
            several = len(self.group.clusters) > 1
            for name, bundles in step.demand.items():
                ray = seen.clusters.ray(name)
                if ray is not None:
                    send_demand(self.conn, ray, self.group, self.installation, step.state, bundles, seen.now,
                                self.result, self.steps, name if several else None)
            self.steps.done("autoscale")
        self.steps.record(self.result, self.conn.statements)
        # The clusters that hold jobs of ours, for the loop to watch for their ends.
        busy = {job.cluster for job in done.active} | {intent.cluster for intent in intents}
        self.result.busy_clusters = [ray for name in busy if (ray := seen.clusters.ray(name)) is not None]
        self.result.due_at = min(filter(None, (due_at(step.pending, done.active, seen.now), next_slot)), default=None)
        summary(self.result)
        return self.result

    def observe(self) -> Seen:
        """Ray's nodes of the group in each of its clusters, and our active jobs as Ray sees them."""
        # First: a group whose node types cannot be read fails before any call to Ray.
        types = group_node_types(self.group) if self.group.autoscale else None
        active, malformed = usable(tick_jobs.active_jobs(self.conn, self.name))
        for job_id, problem in malformed.items():
            log.warning("job_invalid", group=self.name, job=job_id, message=problem, state="active")
        state = groups.group_state(self.conn, self.name)
        # Each active job looked up by its own submission id, in its own cluster: never Ray's whole history.
        silent = Unanswered.of(state.get(UNANSWERED, {})).since
        clusters = self.steps.ray(read_clusters, self.group, active, self.config.ray_timeout_s, silent)
        nodes, ray_jobs = clusters.nodes(), clusters.jobs()
        running = running_of(active, ray_jobs)
        use = observe(running, clusters.work() if running else ClusterWork())
        now = utcnow()
        if use.fallback is None:
            records = {job.id: record(use.jobs[job.id], job.observed, now) for job in active if job.id in use.jobs}
        else:
            records = {}
            self.result.observed_fallback = use.fallback
        totals: dict[str, int] = Counter()
        for node in nodes:
            for resource, amount in node.resources.items():
                totals[resource] += to_units(amount)
        self.result.nodes = [{"id": node.id, "resources": node.resources, "free": node.free} for node in nodes]
        self.steps.done("observe")
        return Seen(clusters, nodes, active, ray_jobs, now, dict(totals), types, use, records, state)

    def _drop_removed(self, active: list[ActiveJob]) -> None:
        """Drops from the group the clusters being removed that none of its jobs is active in."""
        busy = {cluster_name(self.group, job) for job in active}
        done = [c.name for c in self.group.clusters if c.removing and c.name not in busy]
        if done:
            groups.drop_clusters(self.conn, self.name, done)
            self.conn.commit()
            for name in done:
                log.event("cluster_removed", group=self.name, cluster=name, message="no job of the group is active there")

    def plan(self, seen: Seen, done: Reconciliation, settled: Settled, dry_run: bool) -> PlanStep:
        """The plan of the pending rows, the users and the selector's state, with what the commit
        writes of it. `done.ended`: (node, request) of the jobs Ray ran that ended since the last tick.
        The nodes of the clusters `settled` keeps off take nothing; a cluster takes at most the
        drivers its cap leaves (the placements past it go to another cluster, or wait: DriverLimit)."""
        read = self.pending.read(self.conn, self.name)
        # After the reconciliation: a job that ended in this tick lets its dependents be planned in it.
        after_of, unreadable = waited_for(read)
        found = tick_jobs.states_of(self.conn, named(after_of))
        dependents = split(read, after_of, unreadable, found, self.pending.made(self.name))
        pending = dependents.plannable
        state = seen.state
        # The recent run times: the running jobs' expected ends, that reservations count on.
        recent = tick_jobs.recent_run_times(self.conn, self.name, RECENT)
        # The tasks of a throttled array past its throttle are not the planner's: they wait.
        # core/arrays.py's protocols declare settable attributes; a PendingRow (a NamedTuple) and
        # an ActiveJob (a frozen dataclass) have them read only, as throttle reads them.
        held = throttle(pending, done.active)  # type: ignore[arg-type]
        cluster_of_node = seen.clusters.node_cluster()
        nodes = [node for node in seen.nodes if cluster_of_node[node.id] not in settled.stopping]
        whole, invalid = build_snapshot(self.group, seen.now, nodes, done.active, held.planned, done.members,
                                        state, done.ended, seen.use, accounts.tree(self.conn),
                                        RunTimes(recent), self.pending.made(self.name))
        snapshot, full = without_full(whole, cluster_of_node, settled.full)
        decided = plan(snapshot)
        # The demand marks the jobs a node type can hold (ScalingUp) in the plan: before reading it.
        demand = (plan_demand(snapshot, decided, self.group, seen.node_types)
                  if seen.node_types is not None else None)
        decisions, capped_off, only_full = within_caps(snapshot, decided, full, cluster_of_node, settled.caps, settled.left)
        # Ended jobs whose resources Ray may still be freeing, kept for the next ticks: saved
        # with the plan when they changed.
        freeing = snapshot.state[RELEASING]
        saved = {**decided.state, **({RELEASING: freeing} if freeing != state.get(RELEASING, {"jobs": []}) else {})}
        said = [*decided.said, *held.said]
        changed = waiting_changes(pending, [*decided.waiting, *held.waiting], self.pending.compared(self.name), said)
        changed.update(dependents.waiting)
        changed.update({job: (Reason.DRIVER_LIMIT, message) for job, message in capped_off.items()})
        step = PlanStep(decided, decisions, pending, {**invalid, **dependents.invalid}, changed, dependents, state, saved,
                        demand=demand, node_clusters=cluster_of_node)
        if not dry_run:  # what only the commit writes
            # The placed jobs' rows, not a pass over 100,000.
            rows = self.pending.by_id(self.name)
            rooms = throttled_arrays(rows, held, done.active)
            if capped_off:  # they wait for a driver of ours in a full cluster to end
                rooms += driver_rooms(decided, capped_off, decisions.placements,
                                      {str(job.id): cluster_name(self.group, job) for job in done.active},
                                      cluster_of_node, settled.caps, lambda job: WaitingOn.of_row(rows[job], []))
            step = replace(step, estimates=estimate(snapshot, decided, done.active, self.pending.carrying(self.name),
                                                    recent, held=held_of(rows, after_of, dependents, found),
                                                    rooms=rooms),
                           figures=placement_figures(self.group, done.members, done.active, seen.totals,
                                                     decisions.placements, [rows[job] for job, _ in decisions.placements],
                                                     snapshot.accounts, decisions.bundle_nodes))
        self.steps.done("plan")
        self.result.running = len(done.active)
        self.result.waiting = _waiting(said, only_full, dependents.held, len(capped_off))
        return step

    def commit(self, step: PlanStep, done: Reconciliation, now: datetime) -> tuple[list[Intent], list[Victim]]:
        """Intents, preemptions (the victims marked, the reservations), waiting reasons, estimates
        and running jobs' observed use that changed and the selector's state, in one transaction;
        returns the intents to submit (those of SUBMITTING jobs Ray has not got, then the new ones)
        and the victims to stop."""
        resent = tick_jobs.intents_of(self.conn, done.resend)
        for intent in resent:
            log.event("submit_resent", group=self.name, job=intent.id, submission_id=intent.submission_id,
                      node=intent.node, message="not in Ray yet: sent again under the same submission id")
        tick_jobs.fail_pending(self.conn, step.invalid, Reason.INVALID_JOB)
        for job_id, message in step.invalid.items():
            log.warning("job_invalid", group=self.name, job=job_id, message=message)
        self._dependencies(step.dependents, now)
        intents = resent + tick_jobs.commit_intents(self.conn, step.decisions.placements, self.installation,
                                                    step.decisions.bundle_nodes, step.node_clusters)
        events.note_placements(self.conn, {i.id: (i.attempt, step.figures[i.id]) for i in intents
                                           if i.id in step.figures})
        tick_jobs.set_waiting(self.conn, step.changed, now)
        self.result.reasons_written = len(step.changed)
        tick_jobs.set_estimates(self.conn, {job_id: (e.position, e.start, e.basis) for job_id, e in step.estimates.items()})
        victims = tick_jobs.mark_victims(self.conn, step.decisions.victims, now)
        tick_jobs.set_reservations(self.conn, reservation_changes(self.pending.carrying(self.name),
                                                                  step.decisions.reservations), now)
        groups.save_group_state(self.conn, self.name, step.saved)
        tick_jobs.set_observed(self.conn, done.observed)
        self.conn.commit()
        self.steps.done("commit")
        if victims:
            failpoint("after-preempt-intent", self.config.failpoint)
        failpoint("after-intent", self.config.failpoint)
        return intents, victims

    def _dependencies(self, dependents: Dependents, now: datetime) -> None:
        """Ends the jobs whose dependencies never hold, and marks those whose now hold (before any
        placement of theirs: its own event follows)."""
        tick_jobs.fail_pending(self.conn, dependents.never, Reason.DEPENDENCY_NEVER)
        for job_id, message in dependents.never.items():
            log.event("dependency_never", group=self.name, job=job_id, message=message)
        tick_jobs.set_waiting(self.conn, dependents.satisfied, now)
        for job_id, (_, message) in dependents.satisfied.items():
            log.event("dependency_satisfied", group=self.name, job=job_id, message=message)
        self.result.finished += len(dependents.never)

    def preempt(self, clusters: Clusters, victims: list[Victim], pending: list[PendingRow], now: datetime) -> None:
        """Asks Ray to stop the victims the commit marked. A victim whose stop Ray did not take is
        sent it again by the next tick's reconciliation, which sees it marked and not yet told."""
        if not victims:
            return
        by_id = {row.id: row for row in pending}
        told = {}
        for victim in victims:
            cluster = clusters.ray(victim.cluster)
            if cluster is None or not self.steps.ray(cluster.stop, victim.submission_id):
                continue  # it ended meanwhile, or its cluster does not answer: the next tick reads how
            by = by_id[victim.preempted_by]
            told[victim.id] = f"being stopped to make room for job {by.id}"
            lost = (now - victim.started_at).total_seconds() if victim.started_at else 0.0
            log.event("preempted", group=self.name, job=victim.id, user=victim.user_name,
                      job_class=self.group.job_class(victim.priority_class), node=victim.node, by_job=by.id,
                      by_user=by.user_name, by_class=self.group.job_class(by.priority_class),
                      run_time_lost_s=round(lost, 1))
        failpoint("after-stop", self.config.failpoint)
        tick_jobs.victims_stopping(self.conn, told)
        self.conn.commit()
        self.result.preempted = len(told)
        self.steps.done("preempt")

    def submit(self, clusters: Clusters, intents: list[Intent], members: list[Member]) -> None:
        """Sends each intent to its cluster, the clusters at once. An intent whose cluster does not
        answer stays SUBMITTING: sent again once it answers, or requeued once it is lost."""
        by_cluster: dict[str, list[Intent]] = {}
        for intent in intents:
            by_cluster.setdefault(self.group.cluster(intent.cluster).name, []).append(intent)
        sent = [(ray, part) for name, part in by_cluster.items() if (ray := clusters.ray(name)) is not None]
        submitted, refused = self.steps.ray(submit_clusters, sent, self.group, self.config.submit_concurrency)
        failpoint("after-submit", self.config.failpoint)
        tick_jobs.mark_submitted(self.conn, submitted)
        for row in tick_jobs.return_to_pending(self.conn, refused, self.group.max_attempts):
            log.warning("submit_refused", group=self.name, job=row.id, user=row.user_name, state=row.state,
                        message=refused[row.id][2])
        self.conn.commit()
        self.steps.done("submit")
        self.result.placed = len(submitted)
        self._log_placed(intents, set(submitted), members)

    def _log_placed(self, intents: list[Intent], accepted: set[int], members: list[Member]) -> None:
        by_name = {user.name: user for user in members}
        for intent in intents:
            if intent.id in accepted:
                user = by_name.get(intent.user_name)
                log.event("placed", group=self.name, job=intent.id, user=intent.user_name, cluster=intent.cluster,
                          node=intent.node,
                          attempt=intent.attempt, policy=self.group.policy, selector=self.group.selector,
                          shares=user.shares if user else None, usage=round(user.usage if user else 0, 3),
                          **({"bundle_nodes": ",".join(intent.bundle_nodes)} if intent.bundle_nodes else {}))


def _waiting(said: Iterable[tuple[str, str, list[dict]]], only_full: int, held: int, capped: int) -> Counter:
    """The waiting jobs a tick reports by reason: what the plan said, with those only a full
    cluster could hold counted as capped (DriverLimit) and not Unschedulable, and those their
    dependencies hold."""
    waiting = counted(said)
    if only_full:
        waiting[Reason.UNSCHEDULABLE] -= only_full
        waiting += Counter()  # drops the reasons counted down to none
    if held:
        waiting[Reason.DEPENDENCY] = held
    if capped:
        waiting[Reason.DRIVER_LIMIT] = capped
    return waiting
