"""How many drivers of ours each Ray cluster of a group may run at once (`--max-drivers`, else its
head's memory over 100 MB: ray#60159), and the plan kept within it. Pure: the tick reads the
clusters (scheduler/clusters.py) and writes what is decided here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TypeVar

from job.core.estimates import Room, Rooms, WaitingOn
from job.core.group_snapshot import Decisions
from job.core.planner import Plan, Snapshot, plan
from job.core.planner.snapshot import Node, started

# A job's id: the tick's int, or the planner's string.
Job = TypeVar("Job", int, str)


def drivers_left(caps: Mapping[str, int], active_clusters: Iterable[str]) -> dict[str, int]:
    """How many more drivers of ours each cluster may take: its cap less our active jobs there."""
    running = Counter(active_clusters)
    return {name: max(cap - running[name], 0) for name, cap in caps.items()}


def default_cap(head_memory_bytes: float | None, per_driver_bytes: int) -> int | None:
    """The most drivers a head of that memory holds (at least one); None when Ray did not say."""
    return None if not head_memory_bytes else max(int(head_memory_bytes // per_driver_bytes), 1)


def capped(placements: list[tuple[Job, str]], cluster_of_node: Mapping[str, str], caps: Mapping[str, int],
           left: Mapping[str, int]) -> tuple[list[tuple[Job, str]], dict[Job, str]]:
    """The placements (job, node) in plan order that their clusters' driver caps let through (`left`:
    how many more each may take), and for each held back, the message of its wait (DriverLimit)."""
    room = dict(left)
    kept: list[tuple[Job, str]] = []
    held: dict[Job, str] = {}
    for job, node in placements:
        cluster = cluster_of_node.get(node)
        if cluster is None or cluster not in room:
            kept.append((job, node))
        elif room[cluster] > 0:
            room[cluster] -= 1
            kept.append((job, node))
        else:
            held[job] = (f"cluster {cluster} runs its most drivers of ours at once ({caps[cluster]}: the group's "
                         "--max-drivers, else its head's memory over 100 MB); waits for one to end")
    return kept, held


def without_full(whole: Snapshot, cluster_of_node: Mapping[str, str], full: set[str]) -> tuple[Snapshot, list[Node]]:
    """The snapshot without the nodes of the clusters that run their most drivers (they take no
    placement), and those nodes."""
    left_out = [node for node in whole.nodes if cluster_of_node[node.id] in full]
    if not left_out:
        return whole, []
    return whole.model_copy(update={"nodes": [node for node in whole.nodes if cluster_of_node[node.id] not in full]}), left_out


def within_caps(snapshot: Snapshot, decided: Plan, full_nodes: list[Node], cluster_of_node: Mapping[str, str],
                caps: Mapping[str, int], left: Mapping[str, int]) -> tuple[Decisions, dict[int, str], int]:
    """The plan's decisions within the clusters' driver caps (`left`: how many more each may take;
    `full_nodes`: the nodes of the clusters left out of the plan for theirs). A placement past its
    cluster's cap is placed again in another cluster with room, in the same tick (`replaced`).
    Returns the decisions; for each job held back, the message of its wait (DriverLimit): those
    past a cap, and those the plan found Unschedulable that only a full cluster could hold (their
    count, the last value)."""
    decisions, held = replaced(snapshot, decided, cluster_of_node, caps, left)
    only_full = held_by_caps(snapshot, decided, full_nodes)
    held.update({int(job): "every cluster whose nodes could hold it runs its most drivers of ours at once (the "
                           "group's --max-drivers, else its head's memory over 100 MB); waits for one to end"
                 for job in only_full})
    return decisions, held, len(only_full)


def replaced(snapshot: Snapshot, decided: Plan, cluster_of_node: Mapping[str, str], caps: Mapping[str, int],
             left: Mapping[str, int]) -> tuple[Decisions, dict[int, str]]:
    """The plan's placements within the caps, those past a cap placed again: a plan of the jobs
    held back alone, on the nodes of the clusters not full, beside every placement kept (`again`),
    as often as a cluster fills up. What the first plan reserved is left alone, and the second
    plans neither preempt nor reserve. Returns the decisions and the messages of the jobs still
    held back."""
    decisions = Decisions.of(decided)
    placements, held = capped(decisions.placements, cluster_of_node, caps, left)
    room = dict(left)
    for _, node in placements:
        if cluster_of_node.get(node) in room:
            room[cluster_of_node[node]] -= 1
    bundle_nodes = dict(decisions.bundle_nodes)
    while held:
        full = {name for name, count in room.items() if count <= 0}
        kept = {str(job): node for job, node in placements}
        more = Decisions.of(plan(again(snapshot, decided, kept, bundle_nodes, {str(job) for job in held}, full,
                                       cluster_of_node), worded=False))
        placed, still = capped(more.placements, cluster_of_node, caps, room)
        if not placed:
            break
        for job, node in placed:
            del held[job]
            if cluster_of_node.get(node) in room:
                room[cluster_of_node[node]] -= 1
        placements += placed
        bundle_nodes.update({job: more.bundle_nodes[job] for job, _ in placed if job in more.bundle_nodes})
        held.update(still)
    kept_ids = {job for job, _ in placements}
    return replace(decisions, placements=placements,
                   bundle_nodes={job: nodes for job, nodes in bundle_nodes.items() if job in kept_ids}), held


def again(snapshot: Snapshot, decided: Plan, kept: Mapping[str, str], bundle_nodes: Mapping[int, list[str]],
          held: set[str], full: set[str], cluster_of_node: Mapping[str, str]) -> Snapshot:
    """The snapshot of a plan of the `held` jobs alone: the nodes of the clusters not `full` but
    those the first plan reserved, the placements `kept` running where they go, the group's
    preemption and reservations off, the selector's state as the first plan left it."""
    reserved = {node for held_room in decided.reservations or []
                for node in (held_room["node"], *held_room.get("bundle_nodes", ()))}
    nodes = [node for node in snapshot.nodes if cluster_of_node.get(node.id) not in full and node.id not in reserved]
    placed = [started(job, kept[job.id], bundle_nodes.get(int(job.id), ())) for job in snapshot.pending if job.id in kept]
    group = snapshot.group.model_copy(update={"preemption": "off", "max_reservations": 0})
    return Snapshot.model_construct(group=group, now=snapshot.now, nodes=nodes, running=[*snapshot.running, *placed],
                                    pending=[job for job in snapshot.pending if job.id in held], users=snapshot.users,
                                    accounts=snapshot.accounts, state={**snapshot.state, **decided.state}, reservations=[])


def held_by_caps(snapshot: Snapshot, decided: Plan, full_nodes: list[Node]) -> set[str]:
    """The jobs the plan found Unschedulable that a node of the clusters left out for their driver
    caps (`full_nodes`) could hold: they wait for a driver to end there (DriverLimit), not for ever."""
    if not full_nodes:
        return set()
    # Only then a pass over the plan's waiting records: a million of them at a million pending.
    unschedulable = {record["job"] for record in decided.waiting if record["reason"] == "Unschedulable"}
    if not unschedulable:
        return set()
    # Whether a node could ever hold the job: its totals, empty, as the planner judges Unschedulable.
    empty = [node.model_copy(update={"outside": {}, "held": []}) for node in full_nodes]
    alone = Snapshot.model_construct(
        group=snapshot.group.model_copy(update={"preemption": "off", "max_reservations": 0}), now=snapshot.now,
        nodes=empty, running=[], pending=[job for job in snapshot.pending if job.id in unschedulable], users={},
        accounts={}, state={}, reservations=[])
    judged = plan(alone, worded=False)
    return unschedulable - {record["job"] for record in judged.waiting if record["reason"] == "Unschedulable"}


def driver_rooms(decided: Plan, held: Mapping[int, str], placements: list[tuple[int, str]], active: Mapping[str, str],
                 cluster_of_node: Mapping[str, str], caps: Mapping[str, int], wait: Callable[[int], WaitingOn]) -> Rooms:
    """What the jobs the caps held back (`held`) wait for, for their estimates: a room per cluster
    at its cap after this tick, held by our drivers there (`active`: job id -> cluster, and this
    tick's `placements`); each held job in plan order, with the cluster the plan chose for it, or,
    for one only a full cluster could hold, every full one (which of them could is not asked: the
    first to free a driver counts). `wait`: a job id -> what its run time is read from."""
    drivers: dict[str, list[str]] = {}
    for active_job, its_cluster in active.items():
        drivers.setdefault(its_cluster, []).append(active_job)
    for job, node in placements:
        if (placed_in := cluster_of_node.get(node)) is not None:
            drivers.setdefault(placed_in, []).append(str(job))
    # Named apart from the arrays' rooms (estimates.throttled_arrays), which the tick adds.
    rooms = {f"cluster {name}": Room(cap, drivers.get(name, []),
                                     f"when a driver of ours in cluster {name} should end (its driver cap)")
             for name, cap in caps.items() if len(drivers.get(name, ())) >= cap}
    planned = {int(placement["job"]): cluster_of_node.get(placement["node"]) for placement in decided.placements
               if int(placement["job"]) in held}
    order = list(planned)
    if len(order) < len(held):  # only then a pass over the plan's waiting records
        order += [job for record in decided.waiting if (job := int(record["job"])) in held and job not in planned]
    return Rooms(rooms, [(str(job), [f"cluster {cluster}"] if (cluster := planned.get(job)) is not None else list(rooms),
                          wait(job)) for job in order])
