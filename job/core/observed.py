"""What our running jobs really hold in Ray, per node, from the state API's lists.

A Ray job's work is not its driver: the actors, tasks and placement groups it starts run outside
the entrypoint's request, on any node. Counted only as declared, they would look like work
outside the queue, charged to nobody. Here each running job is given what Ray shows of it:

- its driver: the entrypoint's request is held by Ray's job supervisor actor, found by its name
  (`_ray_internal_job_actor_<submission_id>`), since its job id is the dashboard's, not the driver's;
- its placement groups (`creator_job_id`): each placed bundle on its node, used or not, since Ray
  reserves it whole;
- its alive actors and running tasks outside placement groups, by the driver's job id (inside
  one they run on a bundle already counted).

What a job declared and Ray does not yet show it holding (its driver not yet started, bundles not
yet claimed by its own work) stays in the books on its planned node: nothing else may be placed
there meanwhile. When Ray truncated a list, what is missing cannot be told from what is not
there, so every job counts as declared and the result says so; likewise when the state API did
not answer at all (an HTTP error, a timeout: `unavailable`), which must not fail the tick.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from job.core.resources import Resources, accumulate, fits

SUPERVISOR_PREFIX = "_ray_internal_job_actor_"
_DECLARED = "counting what each job declared, not what it uses"


class Work(msgspec.Struct, frozen=True):
    """An alive actor or a running task, as Ray lists it. A Struct: a tick makes one per record of
    lists of 10,000, in a tenth of the time of a frozen dataclass (bench/observe.py)."""

    job_id: str
    node: str | None
    resources: Resources
    placement_group: str | None = None
    # Actors only: the job supervisor is known by its name.
    name: str = ""


@dataclass(frozen=True)
class Bundle:
    """A bundle on a node: placed by Ray (a placement group's), or planned by us (a declared one).
    `node` is None for a bundle Ray has not placed yet."""

    node: str | None
    resources: Resources


@dataclass(frozen=True)
class PlacementGroup:
    id: str
    creator_job_id: str
    state: str
    bundles: tuple[Bundle, ...]


@dataclass(frozen=True)
class ClusterWork:
    """One tick's reading of the cluster's work; `truncated` names the lists Ray cut short, and
    `unavailable` says why there is no reading at all (the state API's error)."""

    actors: tuple[Work, ...] = ()
    tasks: tuple[Work, ...] = ()
    placement_groups: tuple[PlacementGroup, ...] = ()
    truncated: tuple[str, ...] = ()
    unavailable: str | None = None


@dataclass(frozen=True)
class RunningJob:
    """One of our running jobs: its ids in Ray and what it declared, on its planned nodes.
    `driver_job_id` is None until its entrypoint has called `ray.init()`."""

    id: int
    user: str
    submission_id: str
    driver_job_id: str | None
    node: str
    driver: Resources
    bundles: tuple[Bundle, ...] = ()


PerNode = dict[str, Resources]


@dataclass(frozen=True)
class JobUse:
    """One job's footprint per node: what it declared, what Ray shows it holding (`observed`), and
    what it declared and has not claimed yet (`unclaimed`, counted as ours all the same)."""

    declared: PerNode
    observed: PerNode
    unclaimed: PerNode
    placement_groups: int = 0
    actors: int = 0
    tasks: int = 0

    def held(self) -> PerNode:
        """What counts as this job's on each node: its observed use and its unclaimed books."""
        return _merged([self.observed, self.unclaimed])

    def charged(self) -> Resources:
        """What fair share charges it: per resource, the larger of declared and observed."""
        declared, observed = _sum(self.declared), _sum(self.observed)
        return Resources((name, max(declared.get(name), observed.get(name))) for name in {*declared, *observed})


@dataclass(frozen=True)
class Observed:
    """Per job its use. `fallback` is the message to log when the declared footprints were counted
    instead. What is left of a node is outside load (group_snapshot.outside_load)."""

    jobs: dict[int, JobUse]
    fallback: str | None = None


def observe(jobs: Iterable[RunningJob], work: ClusterWork) -> Observed:
    """Each job's use."""
    jobs = list(jobs)
    if work.unavailable is not None:
        fallback = f"unavailable ({work.unavailable}): {_DECLARED}"
    elif work.truncated:
        fallback = f"ray truncated its list of {', '.join(work.truncated)}: {_DECLARED}"
    else:
        fallback = None
    uses = {job.id: _as_declared(job) for job in jobs} if fallback is not None else _observed_uses(jobs, work)
    return Observed(uses, fallback)


def held_by(job: RunningJob, use: JobUse) -> str:
    """Why another job waits on this one's use, naming it and its user."""
    return naming(job.id, job.user, _sum(use.held()), _sum(use.declared))


def naming(job_id: int | str, user: str, uses: Resources, declared: Resources) -> str:
    """The words of `held_by`, for whoever has a job's use and declaration in hand (the planner's
    waiting messages read them from the snapshot)."""
    return f"held by job {job_id} of {user}, which uses {uses} and declared {declared}"


def over(use: JobUse) -> bool:
    """Whether Ray shows the job holding more than it declared, of any resource."""
    return not _sum(use.observed).fits_in(_sum(use.declared))


def record(use: JobUse, before: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
    """What the tick keeps of a job's use (`jobs.observed`, shown by `show`, counted by `share`):
    its totals declared, used and charged, its use per node, what Ray says it is, and since when
    it has used more than it declared (`over_since`, kept from `before` while it still does: the
    grace of `--overuse stop` runs from there)."""
    since = ((before or {}).get("over_since") or now.isoformat()) if over(use) else None
    return {"declared": _sum(use.declared).amounts(), "used": _sum(use.observed).amounts(),
            "charged": use.charged().amounts(),
            "nodes": {node: resources.amounts() for node, resources in sorted(use.observed.items())},
            "placement_groups": use.placement_groups, "actors": use.actors, "tasks": use.tasks,
            "over_since": since}


def _observed_uses(jobs: list[RunningJob], work: ClusterWork) -> dict[int, JobUse]:
    actors, tasks = _by_job(work.actors), _by_job(work.tasks)
    groups: dict[str, list[PlacementGroup]] = {}
    for group in work.placement_groups:
        groups.setdefault(group.creator_job_id, []).append(group)
    supervisors = {actor.name[len(SUPERVISOR_PREFIX):]: actor for actor in work.actors
                   if actor.name.startswith(SUPERVISOR_PREFIX)}
    uses = {}
    for job in jobs:
        # Before ray.init() the driver has no job id, and nothing in Ray is its yet.
        key = job.driver_job_id or ""
        own_groups, own = groups.get(key, []), [*actors.get(key, []), *tasks.get(key, [])]
        placed = [(bundle.node, bundle.resources) for group in own_groups for bundle in group.bundles]
        observed = _per_node([*placed, *((item.node, item.resources) for item in own)])
        unclaimed = _unclaimed(job.bundles, observed)
        supervisor = supervisors.get(job.submission_id)
        if supervisor is None:
            unclaimed = _merged([unclaimed, _per_node([(job.node, job.driver)])])
        else:
            observed = _merged([observed, _per_node([(supervisor.node, supervisor.resources)])])
        uses[job.id] = JobUse(_declared(job), observed, unclaimed, placement_groups=len(own_groups),
                              actors=len(actors.get(key, [])), tasks=len(tasks.get(key, [])))
    return uses


def _by_job(items: tuple[Work, ...]) -> dict[str, list[Work]]:
    """Work outside placement groups by its job id: inside one it runs on a bundle counted already."""
    found: dict[str, list[Work]] = {}
    for item in items:
        if item.placement_group is None and item.job_id:
            found.setdefault(item.job_id, []).append(item)
    return found


def _unclaimed(declared: tuple[Bundle, ...], observed: PerNode) -> PerNode:
    """The declared bundles the job's own work does not cover yet, on their planned nodes.

    Covered by amount, not by shape or node: Ray Train, Tune and Data make placement groups and
    actors of their own shapes, wherever Ray puts them, and what matters is that the amounts the
    books held are now held by Ray. Bundles are taken in their declared order, each covered
    whole or not at all."""
    budget: dict[str, int] = {}
    for resources in observed.values():
        accumulate(budget, resources)
    left = []
    for bundle in declared:
        if fits(bundle.resources.items(), budget):
            accumulate(budget, bundle.resources, -1)
        else:
            left.append((bundle.node, bundle.resources))
    return _per_node(left)


def _declared(job: RunningJob) -> PerNode:
    return _per_node([(job.node, job.driver), *((bundle.node, bundle.resources) for bundle in job.bundles)])


def _as_declared(job: RunningJob) -> JobUse:
    return JobUse(_declared(job), {}, _declared(job))


def _per_node(parts: Iterable[tuple[str | None, Mapping[str, int]]]) -> PerNode:
    units: dict[str, dict[str, int]] = {}
    for node, resources in parts:
        if node is not None:
            accumulate(units.setdefault(node, {}), resources)
    return {node: held for node, amounts in units.items() if (held := Resources(amounts))}


def _merged(maps: Iterable[PerNode]) -> PerNode:
    return _per_node((node, resources) for per_node in maps for node, resources in per_node.items())


def _sum(per_node: PerNode) -> Resources:
    return Resources.total(per_node.values())
