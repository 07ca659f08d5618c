"""The tick's reading of a group's Ray clusters: each read in its own thread, with its own timeout,
its nodes labelled with its name (core/clusters.py CLUSTER_LABEL). A group of one cluster fails its
tick when that cluster fails, as it always did; a group of several goes on without the clusters
that do not answer (core/clusters.py says what becomes of their jobs)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from job import log
from job.adapters.ray_cluster import RayCluster, RayJob, RayNode, cluster_of, selected
from job.core.clusters import CLUSTER_LABEL, UNANSWERED, Unanswered, judge, with_requeued, with_stopped
from job.core.driver_caps import default_cap, drivers_left
from job.core.errors import ClusterNotReady, JobError, Unavailable
from job.core.group import GroupConfig
from job.core.group_defaults import DRIVER_MEMORY_BYTES
from job.core.group_snapshot import running_of
from job.core.job import ActiveJob
from job.core.observed import ClusterWork
from job.core.specs import ClusterSpec
from job.core.states import FINISHED_IN_RAY, Reason
from job.core.units import format_duration


@dataclass(frozen=True)
class Reading:
    """One cluster as this tick read it; `failed`: why it did not answer (then nothing else is known)."""

    spec: ClusterSpec
    ray: RayCluster | None = None
    # The group's alive nodes in it, labelled with the cluster's name.
    nodes: list[RayNode] = field(default_factory=list)
    # Its head node's memory (Ray's `memory` resource), for the default driver cap.
    head_memory: float | None = None
    # Ray's view of our active jobs there, by submission id.
    jobs: dict[str, RayJob] = field(default_factory=dict)
    work: ClusterWork = field(default_factory=ClusterWork)
    failed: str | None = None


@dataclass(frozen=True)
class Clusters:
    """The group's clusters as this tick read them, by name, in the group's order."""

    readings: dict[str, Reading]

    @property
    def answered(self) -> dict[str, Reading]:
        return {name: reading for name, reading in self.readings.items() if reading.failed is None}

    @property
    def failed(self) -> dict[str, str]:
        return {name: reading.failed for name, reading in self.readings.items() if reading.failed is not None}

    def ray(self, name: str | None) -> RayCluster | None:
        """The cluster of that name (None: the group's first), if it answered."""
        reading = self.readings.get(name) if name is not None else next(iter(self.readings.values()))
        return None if reading is None or reading.failed is not None else reading.ray

    def nodes(self) -> list[RayNode]:
        """The group's alive nodes in every cluster that answered, by id."""
        return sorted((node for reading in self.answered.values() for node in reading.nodes), key=lambda n: n.id)

    def node_cluster(self) -> dict[str, str]:
        return {node.id: name for name, reading in self.answered.items() for node in reading.nodes}

    def jobs(self) -> dict[str, RayJob]:
        return {sid: job for reading in self.answered.values() for sid, job in reading.jobs.items()}

    def work(self) -> ClusterWork:
        """What every cluster that answered holds, as one reading (node ids are unique across clusters)."""
        readings = [reading.work for reading in self.answered.values()]
        return ClusterWork(actors=tuple(a for w in readings for a in w.actors),
                           tasks=tuple(t for w in readings for t in w.tasks),
                           placement_groups=tuple(p for w in readings for p in w.placement_groups),
                           truncated=tuple(dict.fromkeys(k for w in readings for k in w.truncated)),
                           unavailable="; ".join(w.unavailable for w in readings if w.unavailable) or None)


def cluster_name(group: GroupConfig, job: ActiveJob | Any) -> str:
    """The cluster a job was placed in (a job placed before clusters had names: the first)."""
    return group.cluster(job.cluster).name


def read_clusters(group: GroupConfig, active: list[ActiveJob], timeout_s: float,
                  silent: Iterable[str] = ()) -> Clusters:
    """Every cluster of the group read at once. A group of one cluster raises what its cluster
    raised; a cluster of a larger group that does not answer is a `failed` reading. One that did not
    answer at the last tick either (`silent`) is tried once, not retried: a tick does not wait on it."""
    silent = set(silent)
    by_cluster: dict[str, list[ActiveJob]] = {c.name: [] for c in group.clusters}
    for job in active:
        by_cluster.setdefault(cluster_name(group, job), []).append(job)
    alone = len(group.clusters) == 1

    def read(spec: ClusterSpec) -> Reading:
        try:
            return _read(group, spec, by_cluster.get(spec.name, []), timeout_s, spec.name in silent)
        except (ClusterNotReady, Unavailable, JobError, OSError) as exc:
            if alone:
                raise
            return Reading(spec, failed=str(exc)[:500])

    if alone:
        readings = [read(group.clusters[0])]
    else:
        with ThreadPoolExecutor(max_workers=len(group.clusters)) as pool:
            readings = list(pool.map(read, group.clusters))
    return Clusters({reading.spec.name: reading for reading in readings})


def _read(group: GroupConfig, spec: ClusterSpec, active: list[ActiveJob], timeout_s: float, silent: bool) -> Reading:
    ray = cluster_of(spec.address, timeout_s, 0.0) if silent else cluster_of(spec.address, timeout_s)
    alive = ray.alive_nodes({CLUSTER_LABEL: spec.name})
    head = next((node for node in alive if node.is_head), None)
    # A cluster being removed takes no new job: its nodes are not the plan's.
    nodes = [] if spec.removing else selected(alive, group.node_labels, group.use_head_node)
    jobs = ray.jobs([job.submission_id for job in active if job.submission_id])
    # Three lists whatever the number of jobs, and none while nothing of ours runs: what Ray
    # holds then is all outside load, which its free resources tell.
    work = _work(ray) if running_of(active, jobs) else ClusterWork()
    return Reading(spec, ray, nodes, None if head is None else head.resources.get("memory"), jobs, work)


def _work(ray: RayCluster) -> ClusterWork:
    """The cluster's work; a state API that fails is no reason to fail the tick: its jobs count
    as declared, as when Ray truncates a list (the summary line says which)."""
    try:
        return ray.work()
    except Unavailable as exc:
        return ClusterWork(unavailable=str(exc))


@dataclass(frozen=True)
class Settled:
    """What the tick does this time about its clusters, before it reconciles."""

    # Our active jobs in a lost cluster: id -> the message of their requeue (ClusterLost).
    lost: dict[int, str] = field(default_factory=dict)
    # Clusters that still run jobs requeued when they were lost: they take no new job until Ray
    # reports those ended.
    stopping: set[str] = field(default_factory=set)
    # The clusters' document to save with the requeues (None: unchanged).
    document: dict | None = None
    # Per cluster with a driver cap: the cap, and how many more drivers it may take now.
    caps: dict[str, int] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)

    @property
    def full(self) -> set[str]:
        """The clusters that run their most drivers of ours (and stop nothing)."""
        return {name for name, more in self.left.items() if more == 0} - self.stopping

    @property
    def kept_off(self) -> set[str]:
        """The clusters whose nodes take no new job this tick."""
        return self.stopping | self.full


def settle(group: GroupConfig, clusters: Clusters, active: list[ActiveJob], state: dict, now: datetime,
           dry_run: bool = False) -> Settled:
    """Judges the clusters that did not answer (core/clusters.py), stops in a cluster that answers
    again what it still runs of the jobs requeued from it (not in a dry run, which only looks), and
    counts each cluster's drivers."""
    before = Unanswered.of(state.get(UNANSWERED, {}))
    verdict = judge(before, clusters.answered, clusters.failed, now, group.cluster_lost_after_s)
    for name, message in verdict.warnings.items():
        log.warning("cluster_unanswered", group=group.name, cluster=name, lost=name in verdict.lost, message=message)
    after = verdict.state
    lost: dict[int, str] = {}
    for name in verdict.lost:
        jobs = [job for job in active if cluster_name(group, job) == name]
        message = (f"its cluster {name} did not answer for {format_duration(round(group.cluster_lost_after_s))}: "
                   "requeued for the group's other clusters")
        lost.update({job.id: message for job in jobs})
        after = with_requeued(after, name, [job.submission_id for job in jobs if job.submission_id])
    stopping = set()
    for name, ids in after.requeued.items():
        ray = clusters.ray(name)
        if ray is None or not ids:
            continue
        still = _stop_requeued(group.name, name, ray, ids, dry_run)
        after = with_stopped(after, name, set(ids) - still)
        if still:
            stopping.add(name)
    caps = _caps(group, clusters)
    left = drivers_left(caps, (cluster_name(group, job) for job in active if job.id not in lost))
    document = after.document()
    return Settled(lost, stopping, None if document == before.document() else document, caps, left)


def _stop_requeued(group: str, cluster: str, ray: RayCluster, ids: list[str], dry_run: bool) -> set[str]:
    """Asks Ray to stop what it still runs of `ids`; returns those not ended yet."""
    still = set()
    for sid, job in ray.jobs(ids).items():
        if job.status in FINISHED_IN_RAY:
            continue
        still.add(sid)
        if not dry_run and ray.stop(sid):
            log.event("stop_requested", group=group, cluster=cluster, submission_id=sid, reason=Reason.CLUSTER_LOST,
                      message="requeued when its cluster was lost: it runs elsewhere")
    return still


def _caps(group: GroupConfig, clusters: Clusters) -> dict[str, int]:
    caps = {}
    for name, reading in clusters.answered.items():
        cap = group.max_drivers or default_cap(reading.head_memory, DRIVER_MEMORY_BYTES)
        if cap is not None:
            caps[name] = cap
    return caps
