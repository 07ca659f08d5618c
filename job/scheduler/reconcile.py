"""The tick's reconcile step: bring our active jobs in line with Ray, carry out stops, fail pending
timeouts and charge usage."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime

from job import log
from job.core import states
from job.core.clusters import UNANSWERED
from job.core.group import GroupConfig
from job.core.group_snapshot import held_parts
from job.core.job import ActiveJob
from job.core.members import Member
from job.core.observed import Observed as ObservedUse
from job.core.reconcile import Reconciled, over_use, reconcile_all, start_check
from job.core.resources import Resources, accumulate
from job.core.states import Reason
from job.core.usage import charge_users
from job.scheduler.clusters import Clusters, Settled
from job.scheduler.report import Steps
from job.store import DictConnection, groups, tick_jobs, users


@dataclass(frozen=True)
class Reconciliation:
    """What the reconcile step leaves for the rest of the tick."""

    # The jobs still active, as reconciled: a job Ray started since the last tick is RUNNING now,
    # and what it holds on its node is ours, not outside load.
    active: list[ActiveJob]
    # The group's users, with their usage as charged.
    members: list[Member]
    # SUBMITTING jobs Ray has not got, to send again.
    resend: list[int]
    # (node, request) of each part (driver, bundles) of the jobs Ray ran that ended (or were
    # preempted) since the last tick.
    ended: list[tuple[str, dict]]
    finished: int
    # The running jobs whose observed use (core/observed.py `record`) changed: id -> the record.
    observed: dict[int, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    """What the observe step read of Ray and of our active jobs; `nodes`: the group's alive Ray
    nodes, for the start timeout."""

    clusters: Clusters
    nodes: list
    active: list[ActiveJob]
    ray_jobs: dict
    now: datetime
    totals: dict[str, int]
    # What the cluster can add, for a group that autoscales; None for one that does not.
    node_types: list | None = None
    # What our running jobs really hold (core/observed.py), and each one's record of it, by id
    # (none when Ray truncated a list: the records kept are the last ones seen whole).
    use: ObservedUse | None = None
    records: dict[int, dict] = field(default_factory=dict)
    # The group's state documents (group_state), as read.
    state: dict = field(default_factory=dict)


def reconcile_group(conn: DictConnection, group: GroupConfig, seen: Seen, steps: Steps,
                    settled: Settled | None = None) -> Reconciliation:
    """Reconciles the active jobs of the clusters that answered; those of a cluster that does not
    answer are kept as they were, until it is lost (`settled.lost`: requeued)."""
    settled = settled or Settled()
    reached = [job for job in seen.active if seen.clusters.ray(job.cluster) is not None]
    start = start_check(group.start_timeout_s, seen.nodes, reached, seen.ray_jobs)
    over = ({job_id: stop for job_id, record in seen.records.items()
             if (stop := over_use(record, group.overuse_grace_s, seen.now)) is not None}
            if group.overuse == "stop" else {})
    decided = reconcile_all(reached, seen.ray_jobs, seen.now, start, over)
    untaken = _ask_ray_to_stop(group.name, seen.clusters, reached, decided, steps)
    # A requeue whose stop Ray did not take (the submission ended meanwhile) is left for the next
    # tick, which reads how it ended.
    decided = replace(decided, requeue={**{job_id: requeue for job_id, requeue in decided.requeue.items()
                                           if job_id not in untaken},
                                        **{job.id: (job.state, Reason.CLUSTER_LOST, settled.lost[job.id])
                                           for job in seen.active if job.id in settled.lost}})
    finished = _write(conn, group, seen.active, decided)
    # With the requeues: the submissions to stop when their cluster answers again.
    if settled.document is not None:
        groups.save_group_state(conn, group.name, {UNANSWERED: settled.document})
    if group.pending_timeout_s is not None:
        for row in tick_jobs.fail_pending_timeouts(conn, group.name, group.pending_timeout_s, seen.now):
            log.event("job_finished", group=group.name, job=row.id, user=row.user_name, state=row.state,
                      reason=Reason.PENDING_TIMEOUT)
            finished += 1
    charged = charge(conn, group, seen.active, seen.totals, seen.now, seen.use)
    conn.commit()
    gone = decided.gone
    still_active = [replace(job, **decided.updates.get(job.id, {})) for job in seen.active if job.id not in gone]
    # Ray ran their driver: RUNNING at the last tick, or started and ended since (a short job).
    ended = [part for job in seen.active
             if job.id in gone and job.node and (job.started_at or decided.updates.get(job.id, {}).get("started_at"))
             for part in held_parts(job)]
    before = {job.id: job.observed for job in seen.active}
    changed = {job_id: record for job_id, record in seen.records.items() if record != before.get(job_id)}
    return Reconciliation(still_active, charged, decided.resend, ended, finished, changed)


def _ask_ray_to_stop(group: str, clusters: Clusters, active: list[ActiveJob], decided: Reconciled,
                     steps: Steps) -> set[int]:
    """Asks Ray for the stops decided, each in its job's cluster; returns the jobs to stop first
    whose stop Ray did not take."""
    by_id = {job.id: job for job in active}

    def stop(job: ActiveJob) -> bool:
        cluster = clusters.ray(job.cluster)
        return cluster is not None and steps.ray(cluster.stop, job.submission_id)

    for job_id, (reason, message) in decided.stops.items():
        job = by_id[job_id]
        # The reason is written with the stop: a job that has it was asked already.
        if job.reason != reason:
            stop(job)
            log.event("stop_requested", group=group, job=job_id, user=job.user_name, reason=reason, message=message)
    # A driver Ray cannot start is stopped before its job goes back to PENDING, so that Ray never
    # starts it later beside the next attempt. Ray takes the stop of a driver it has not started
    # when it would start it (it starts the entrypoint and ends it at once): there is no way to
    # withdraw a PENDING submission. Ray answers False when the submission ended meanwhile.
    untaken = set()
    for job_id in sorted(decided.stop_first):
        job = by_id[job_id]
        _, reason, message = decided.requeue[job_id]
        if stop(job):
            log.event("stop_requested", group=group, job=job_id, user=job.user_name, reason=reason, message=message)
        else:
            untaken.add(job_id)
    return untaken


def _write(conn: DictConnection, group: GroupConfig, active: list[ActiveJob], decided: Reconciled) -> int:
    """Writes what was decided; returns how many jobs finished."""
    name = group.name
    written = set(tick_jobs.update_jobs(conn, decided.updates, from_states=states.ACTIVE))
    # Every requeue the reconciliation decides is an infrastructure fault: counted against the
    # group's max_requeues, not its max_attempts (those count Ray's refusals, in the submit step).
    for row in tick_jobs.requeue_infra(conn, decided.requeue, group.max_requeues):
        _, reason, message = decided.requeue[row.id]
        log.warning("requeued", group=name, job=row.id, user=row.user_name, state=row.state,
                    reason=reason, message=message, requeues=row.requeues, max_requeues=group.max_requeues)
    for row in tick_jobs.requeue_preempted(conn, decided.preempted):
        log.event("requeued", group=name, job=row.id, user=row.user_name, state=row.state,
                  reason=Reason.PREEMPTED, message=decided.preempted[row.id][1], preemptions=row.preemptions)
    for job_id in tick_jobs.cancel_absent(conn, decided.cancels):
        log.event("job_finished", group=name, job=job_id, state=states.CANCELLED, reason=Reason.CANCELLED)
    for job in active:
        update = decided.updates.get(job.id)
        if update is not None and job.id in written and job.id in decided.finished:
            runtime = (update["finished_at"] - update["started_at"]).total_seconds() if update["started_at"] else None
            log.event("job_finished", group=name, job=job.id, user=job.user_name, state=update["state"],
                      reason=update["reason"], exit_code=update["exit_code"], node=update["node"],
                      runtime_s=round(runtime, 1) if runtime is not None else None)
    return len(decided.finished)


def charge(conn: DictConnection, group: GroupConfig, ran: list[ActiveJob], totals: dict[str, int],
           now: datetime, use: ObservedUse | None = None) -> list[Member]:
    """Charge each user the dominant share its jobs held since the last charge, decayed by the half
    life: a running job's charge per resource is the larger of what it declared and what Ray shows
    it holding (`use`), the others' their request. Returns the group's users (those with jobs
    waiting or active, or with usage) as charged."""
    since = group.usage_charged_at
    members = users.users_of_group(conn, group.name)
    usage: dict[str, float] = {}
    if since is not None:
        elapsed = max((now - since).total_seconds(), 0.0)
        held: dict[str, dict[str, int]] = defaultdict(dict)
        observed = {} if use is None else use.jobs
        for job in ran:
            accumulate(held[job.user_name],
                       observed[job.id].charged() if job.id in observed else Resources.of(job.resources))
        usage = charge_users({user.name: user.usage for user in members}, held, totals, elapsed,
                             group.half_life_s)
    if not groups.charge_usage(conn, group.name, usage, since, now):
        # The group's row is read under the tick's lock, so only a tick that ignored the lock
        # can have charged meanwhile; its charge stands, and this interval is not counted twice.
        log.warning("usage_not_charged", group=group.name, message="another tick charged this interval")
        return members
    return [replace(user, usage=usage.get(user.name, user.usage)) for user in members]
