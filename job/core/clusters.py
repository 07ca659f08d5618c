"""A group over several Ray clusters: which cluster is lost (core/driver_caps.py: how many drivers
each may still take). Pure: the tick (scheduler/clusters.py) reads the clusters and writes what is decided here.

A cluster that does not answer keeps its jobs as they were for the group's `cluster_lost_after_s`;
past it, the cluster is lost: its active jobs are requeued as infrastructure faults (ClusterLost),
and their submission ids are remembered in the group's state. When the cluster answers again,
those submissions are stopped before anything else is placed there, so that no job runs twice on
purpose; they are forgotten once Ray reports each ended or no longer knows it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from job.core.units import format_duration, parse_time

# The label every node of a group carries with its cluster's name: a job's `--node-label
# ray.io/cluster=NAME` picks a cluster, and a job's bundles and driver stay on nodes of one value.
CLUSTER_LABEL = "ray.io/cluster"
# The group state's document (group_state) of the clusters that did not answer.
UNANSWERED = "clusters"


@dataclass(frozen=True)
class Unanswered:
    """What the tick knows of its clusters that do not answer, and of the lost ones that came back."""

    # Since when each cluster has not answered, by name.
    since: dict[str, datetime] = field(default_factory=dict)
    # The submissions of jobs requeued from a lost cluster, by cluster: stopped there when it answers.
    requeued: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, document: Mapping) -> Unanswered:
        return cls({name: parse_time(when) for name, when in document.get("since", {}).items()},
                   {name: list(ids) for name, ids in document.get("requeued", {}).items()})

    def document(self) -> dict:
        return {"since": {name: when.isoformat() for name, when in sorted(self.since.items())},
                "requeued": {name: ids for name, ids in sorted(self.requeued.items()) if ids}}


@dataclass(frozen=True)
class Judged:
    """What the tick does this time about its clusters' answers."""

    state: Unanswered
    # The clusters lost now (past the grace): their active jobs are requeued.
    lost: frozenset[str]
    # Per cluster that did not answer: its warning's message.
    warnings: dict[str, str]


def judge(before: Unanswered, answered: Iterable[str], failed: Mapping[str, str], now: datetime,
          lost_after_s: float) -> Judged:
    """The clusters' state after this tick's reading: `failed` maps each cluster that did not answer
    to why."""
    since = {name: before.since.get(name, now) for name in failed}
    lost, warnings = set(), {}
    for name, why in sorted(failed.items()):
        silent = round((now - since[name]).total_seconds())
        if silent >= lost_after_s:
            lost.add(name)
            warnings[name] = (f"cluster {name} has not answered for {format_duration(silent)}: lost, its jobs are "
                              f"requeued in the others ({why})")
        else:
            warnings[name] = (f"cluster {name} does not answer ({why}); its jobs are kept as they were until it is "
                              f"lost, in {format_duration(max(lost_after_s - silent, 1))}")
    answered = set(answered)
    requeued = {name: ids for name, ids in before.requeued.items() if name in answered or name in failed}
    return Judged(Unanswered(since, requeued), frozenset(lost), warnings)


def with_requeued(state: Unanswered, cluster: str, submission_ids: Iterable[str]) -> Unanswered:
    ids = sorted({*state.requeued.get(cluster, ()), *submission_ids})
    return Unanswered(state.since, {**state.requeued, cluster: ids})


def with_stopped(state: Unanswered, cluster: str, ended: Iterable[str]) -> Unanswered:
    """Forgets the requeued submissions Ray reports ended (or no longer knows) in `cluster`."""
    ended = set(ended)
    left = [sid for sid in state.requeued.get(cluster, ()) if sid not in ended]
    return Unanswered(state.since, {**state.requeued, cluster: left})
