"""Autoscaling clusters: the node types a group can grow to, which waiting jobs wait for the
cluster to grow (`ScalingUp`), and the demand to hand to Ray's autoscaler. Pure.

Ray's autoscaler adds nodes for the demand it sees inside Ray; our jobs wait in PostgreSQL, so the
tick tells it what the queue needs through `ray.autoscaler.sdk.request_resources`. That request
is a target, not an increment: the autoscaler makes the cluster able to hold all its bundles at
once, counting them against the nodes' totals (its docstring: "This takes into account existing
resource usage"). So the demand holds the requests of our running jobs as well as those of the
pending jobs that would run if the cluster were bigger, and it is emptied when none waits, so that
idle nodes can go.

A job with bundles is asked for part by part, as its placement needs them: its driver, then each
bundle, each with its label selector; `request_resources` takes shapes and label selectors only,
no placement strategy (autoscaler v1 bin-packs them; v2 makes them one cluster resource
constraint of shapes and counts, which it satisfies whole or not at all). So a STRICT_PACK gang's
bundles are asked as one shape, their sum, which only one node can hold, as its strategy says. A
STRICT_SPREAD gang's bundles cannot be asked to stay apart from each other; the demand's own count
of what the cluster could hold at its largest keeps them apart, and a bundle it counts on a node
still to come is asked off the group's nodes (`_elsewhere`), so that the cluster grows by a node
for it, at least (README.md, "The demand").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from job.core.clusters import CLUSTER_LABEL
from job.core.planner import Plan, Snapshot
from job.core.planner.snapshot import Pending, Running, Waiting, account_path, limits_of
from job.core.resources import Resources, accumulate, describe, fits, footprint_of, to_units
from job.core.specs import NodeType

# Reasons of jobs that wait for resources alone (kept off a reserved node too): those the cluster
# growing would let run.
WAITS_FOR_RESOURCES = ("Resources", "Reserved", "ScalingUp")
# Ray's own label of each node, its id; and the most nodes a STRICT_SPREAD bundle is asked off
# (`_elsewhere`): a node id is 56 characters, and the demand travels in an environment variable.
NODE_ID = "ray.io/node-id"
ELSEWHERE_NODES = 64


def of_group(types: Iterable[NodeType], group_labels: Mapping[str, str]) -> list[NodeType]:
    """The node types whose nodes belong to the group: those carrying the group's node labels."""
    return [t for t in types if all(t.labels.get(k) == v for k, v in group_labels.items())]


class _Requests:
    """Each job's whole request (its footprint: the driver's and its bundles') and label selector
    (its own labels and the group's), built once per distinct request as written: 100k jobs share
    a few dozen."""

    def __init__(self, group_labels: Mapping[str, str]):
        self.group_labels = group_labels
        self.known: dict[tuple, tuple[Resources, tuple[tuple[str, str], ...]]] = {}

    def __call__(self, job: Running | Pending) -> tuple[Resources, tuple[tuple[str, str], ...]]:
        # A running job has no labels.
        labels, bundles = getattr(job, "node_labels", None), job.bundles
        key = (tuple(job.resources.items()), tuple(labels.items()) if labels else (),
               tuple(tuple(bundle.items()) for bundle in bundles) if bundles else ())
        found = self.known.get(key)
        if found is None:
            found = self.known[key] = (footprint_of(job.resources, bundles or None),
                                       tuple(sorted({**self.group_labels, **(labels or {})}.items())))
        return found

    def parts(self, job: Running | Pending) -> list[Resources]:
        """The shapes Ray's autoscaler is asked for, in the order of the job's nodes: the driver's
        request (empty when the driver asks for nothing), then each bundle; STRICT_PACK's bundles
        as one, their sum, since they go on one node."""
        if not job.bundles:
            return [self(job)[0]]
        bundles = [Resources.of(part) for part in job.bundles]
        if job.bundle_strategy == "STRICT_PACK":
            bundles = [Resources.total(bundles)]
        return [Resources.of(job.resources), *bundles]


def scale_up(snapshot: Snapshot, plan: Plan, types: list[NodeType], group_labels: Mapping[str, str]) -> None:
    """Jobs the plan left `Unschedulable` that a node type can hold wait for the cluster to grow:
    their reason becomes `ScalingUp`, with a message naming the node type. Like Unschedulable, it
    comes before the time and user limits: those decide only whether the job counts in `demand`.
    The plan's waiting records are changed in place; a job no node type holds stays Unschedulable,
    and its message says that no node type helps either."""
    if not types:
        return
    pending = None
    request = _Requests(group_labels)
    said: dict[tuple, tuple[str, str]] = {}
    # Resources named in the group's priority order first, as the planner's messages name them.
    first = {name: index for index, name in enumerate(snapshot.group.resource_priority)}

    def rank(item: tuple[str, int]) -> tuple[int, str]:
        return first.get(item[0], len(first)), item[0]

    for record in plan.waiting:
        if record["reason"] != "Unschedulable":
            continue
        if pending is None:
            pending = {job.id: job for job in snapshot.pending}
        job = pending[record["job"]]
        need, selector = request(job)
        # A gang's parts may go on several nodes (STRICT_PACK's bundles as one): a type holding
        # each part alone helps it.
        bundles = job.bundles
        key = (need, selector, (job.bundle_strategy, tuple(tuple(b.items()) for b in bundles)) if bundles else None)
        change = said.get(key)
        if change is None:
            shapes = [part for part in request.parts(job) if part]
            fitting = next((t for t in types if all(t.holds(part, dict(selector)) for part in shapes)), None)
            # A gang must also fit whole, by its strategy, in the cluster at its largest (a
            # STRICT_SPREAD gang of 3 bundles, on a type of at most 2 nodes, never does).
            if fitting is not None and bundles and _Bins(snapshot, types).take_all(
                    request.parts(job), selector, job.bundle_strategy == "STRICT_SPREAD") is None:
                fitting = None
            if fitting is None:
                change = said[key] = ("Unschedulable", f"{record['message']}; nor can any node type the cluster may add")
            else:
                where = f" on a node labelled {','.join(f'{k}={v}' for k, v in selector)}" if selector else ""
                change = said[key] = ("ScalingUp", f"needs {describe(sorted(need.items(), key=rank))}{where}; no node of group "
                                      f"{snapshot.group.name} can hold it: waits for the cluster to add a node "
                                      f"of type {fitting}")
        record["reason"], record["message"] = change
    if said and plan.said is not None:
        plan.said = _regrouped(plan.said)


def _regrouped(said: list[tuple[str, str, list[Waiting]]]) -> list[tuple[str, str, list[Waiting]]]:
    """The plan's waiting records grouped again (Plan.said) where scale_up changed them."""
    changed: dict[tuple[str, str], list[Waiting]] = {}
    for reason, _, records in said:
        if reason == "Unschedulable":
            for record in records:
                changed.setdefault((record["reason"], record["message"]), []).append(record)
    return [group for group in said if group[0] != "Unschedulable"] + [(*key, records) for key, records in changed.items()]


class _Bins:
    """What the cluster could hold at its largest, filled in order: the group's nodes as they are,
    then new nodes of each type, up to its max less the nodes of that type already there. A node
    is of a type when it carries the type's labels (a type without labels is never recognised, so
    its max is counted in full: the cap is then looser, never tighter)."""

    def __init__(self, snapshot: Snapshot, types: list[NodeType]):
        self.nodes = [(node.labels, dict(Resources.of(node.resources).items())) for node in snapshot.nodes]
        self.by_id = {node.id: free for node, (_, free) in zip(snapshot.nodes, self.nodes, strict=False)}
        # [node type, nodes of it left to add], a pair counted down in place.
        self.left: list[list[Any]] = []
        for t in types:
            present = sum(1 for node in snapshot.nodes if t.labels and all(node.labels.get(k) == v for k, v in t.labels.items()))
            self.left.append([t, max(t.max - present, 0)])
        # Per request, the first node that may still hold it: nodes only fill up, so a node that
        # could not hold a request never can later in the same demand.
        self.start: dict[tuple, int] = {}

    def take_all(self, parts: list[Resources], selector: tuple[tuple[str, str], ...], apart: bool) -> list[int] | None:
        """Every part of a job (the driver first, then its bundles), or none: the index of each
        part's node (-1 for a part of nothing), or None with what was taken given back when one
        finds no room. `apart` (STRICT_SPREAD): each bundle on a node holding no other."""
        mark = (len(self.nodes), [entry[1] for entry in self.left])
        taken: list[tuple[int, Resources]] = []
        held: set[int] = set()  # the nodes holding a bundle of it
        where = []
        for position, part in enumerate(parts):
            if not part:
                where.append(-1)
                continue
            index = self._take(part, selector, held if apart and position else set())
            if index is None:
                self._give_back(mark, taken)
                return None
            taken.append((index, part))
            where.append(index)
            if position:
                held.add(index)
        return where

    def _take(self, need: Resources, selector: tuple[tuple[str, str], ...], avoid: set[int]) -> int | None:
        """The index of the node `need` is taken on, the first with room that is not in `avoid`."""
        key = (need, selector)
        index = self.start.get(key, 0)
        nodes = self.nodes
        # The first node passed over only for being avoided: it may still hold the request later.
        kept = None
        while index < len(nodes):
            labels, free = nodes[index]
            if fits(need.items(), free) and all(labels.get(k) == v for k, v in selector):
                if index not in avoid:
                    accumulate(free, need, -1)
                    self.start[key] = index if kept is None else kept
                    return index
                kept = index if kept is None else kept
            index += 1
        self.start[key] = index if kept is None else kept
        for entry in self.left:
            node_type, count = entry
            if count and node_type.holds(need, dict(selector)):
                entry[1] -= 1
                free = dict(Resources.of(node_type.resources).items())
                accumulate(free, need, -1)
                nodes.append((node_type.labels, free))
                if kept is None:
                    self.start[key] = len(nodes) - 1
                return len(nodes) - 1
        return None

    def _give_back(self, mark: tuple[int, list[int]], taken: list[tuple[int, Resources]]) -> None:
        count, left = mark
        for index, part in taken:
            if index < count:
                accumulate(self.nodes[index][1], part)
        del self.nodes[count:]
        for entry, before in zip(self.left, left, strict=False):
            entry[1] = before
        # Nodes filled up again here only: where each request may go is looked for anew.
        self.start.clear()


class _Limits:
    """Each user's and account's running jobs and resources, as the plan leaves them, to hold back
    from the demand the jobs their limits would keep waiting once the cluster grew."""

    def __init__(self, snapshot: Snapshot, plan: Plan, pending: Mapping[str, Pending], request: _Requests):
        self.snapshot = snapshot
        # Keyed by user name, and by ("account", name) for accounts.
        self.running: dict[str | tuple, int] = {}
        self.used: dict[str | tuple, dict[str, int]] = {}
        for held in snapshot.running:
            self.add(held.user, request(held)[0])
        for placement in plan.placements:
            job = pending[placement["job"]]
            self.add(job.user, request(job)[0])

    def _keys(self, user: str) -> list:
        spec = self.snapshot.users.get(user)
        return [user, *(("account", name) for name in account_path(self.snapshot.accounts,
                                                                   None if spec is None else spec.account))]

    def add(self, user: str, need: Resources) -> None:
        for key in self._keys(user):
            self.running[key] = self.running.get(key, 0) + 1
            accumulate(self.used.setdefault(key, {}), need)

    def allow(self, job: Pending, need: Resources) -> bool:
        later = job.not_before
        # A snapshot with a not_before has its now (Snapshot's validator): the checker cannot know.
        if later is not None and later > self.snapshot.now:  # type: ignore[operator]
            return False
        user, *accounts = self._keys(job.user)
        limits = [(user, *limits_of(self.snapshot.group, self.snapshot.users.get(user)))]
        for key in accounts:
            spec = self.snapshot.accounts[key[1]]
            cap = None if spec.max_resources is None else {name: to_units(a) for name, a in spec.max_resources.items()}
            limits.append((key, spec.max_running, cap))
        return all((most is None or self.running.get(key, 0) < most)
                   and (cap is None or need.within(cap, self.used.get(key, {}))) for key, most, cap in limits)


def demand(snapshot: Snapshot, plan: Plan, types: list[NodeType], group_labels: Mapping[str, str],
           cluster: str | None = None) -> list[dict]:
    """The bundles to request of Ray's autoscaler, by shape: `[{"resources", "label_selector",
    "count"}]`, sorted. Empty when no job waits for resources alone. Otherwise the requests of the
    running and just placed jobs, then those of the jobs waiting for `Resources` or `ScalingUp`,
    in plan order, except the jobs a start time or their user's limits would still hold back (the
    jobs before them in this order counted as running), and those the cluster could not hold even
    at its largest (the nodes of the group and the node types up to their max).

    `cluster`, in a group over several: that cluster's part, the requests on its nodes and on its
    node types (CLUSTER_LABEL): a waiting job is asked of the cluster whose room, or node type, the
    demand found for it first."""
    waiting = [record["job"] for record in plan.waiting if record["reason"] in WAITS_FOR_RESOURCES]
    if not waiting:
        return []
    pending = {job.id: job for job in snapshot.pending}
    bins = _Bins(snapshot, types)
    request = _Requests(group_labels)
    limits = _Limits(snapshot, plan, pending, request)
    counts = _Counts(cluster)
    group_selector = tuple(sorted(group_labels.items()))
    labels_of = {node.id: node.labels for node in snapshot.nodes}

    def hold(job: Running | Pending, nodes: list[str], selector: tuple) -> None:
        for node, need in zip(nodes, request.parts(job), strict=False):
            if not need:
                continue
            free = bins.by_id.get(node)
            if free is not None:
                accumulate(free, need, -1)
            counts.add(need, selector, labels_of.get(node, {}))

    for held in snapshot.running:
        hold(held, [held.node, *(held.bundle_nodes or ())], group_selector)
    for placement in plan.placements:
        job = pending[placement["job"]]
        hold(job, [placement["node"], *placement.get("bundle_nodes", ())], request(job)[1])
    clusters = sorted({labels[CLUSTER_LABEL] for labels in [*(node.labels for node in snapshot.nodes),
                                                            *(node_type.labels for node_type in types)]
                       if CLUSTER_LABEL in labels})
    asked = _ask(snapshot, [pending[ident] for ident in waiting], bins, request, limits, counts, clusters)
    return counts.bundles() if asked else []


def _ask(snapshot: Snapshot, waiting: list[Pending], bins: _Bins, request: _Requests, limits: _Limits,
         counts: _Counts, clusters: list[str]) -> int:
    """The waiting jobs counted into the demand, in order, each where the bins find it room: how
    many of them the demand's cluster (`counts`) is asked for."""
    asked = 0
    full: set[tuple] = set()
    for job in waiting:
        need, selector = request(job)
        if (need, selector) in full or not limits.allow(job, need):
            continue
        # A gang's parts are taken one by one, by its strategy; one that finds no room leaves the
        # whole job out of the demand, and gives back what the others took.
        parts = request.parts(job)
        apart = job.bundle_strategy == "STRICT_SPREAD"
        where = None
        for within in _one_cluster(selector, clusters) if len(parts) > 1 else (selector,):
            where = bins.take_all(parts, within, apart)
            if where is not None:
                break
        if where is None:
            full.add((need, selector))
            continue
        limits.add(job.user, need)
        here = counts.cluster is None
        for position, (part, index) in enumerate(zip(parts, where, strict=False)):
            if part:
                new = apart and position and index >= len(snapshot.nodes)
                here |= counts.add(part, _elsewhere(selector, snapshot) if new else selector, bins.nodes[index][0])
        asked += here
    return asked


class _Counts:
    """The demand's requests by shape; in a group over several clusters, those of one cluster only:
    the parts counted on its nodes or its node types (CLUSTER_LABEL)."""

    def __init__(self, cluster: str | None):
        self.cluster = cluster
        self.by_shape: dict[tuple, int] = {}

    def add(self, need: Resources, selector: tuple, labels: Mapping[str, str]) -> bool:
        """Counts the part taken on a node of these labels; whether it was this cluster's."""
        if self.cluster is not None and labels.get(CLUSTER_LABEL) != self.cluster:
            return False
        self.by_shape[(need, selector)] = self.by_shape.get((need, selector), 0) + 1
        return True

    def bundles(self) -> list[dict]:
        return sorted(({"resources": need.amounts(), "label_selector": dict(selector), "count": n}
                       for (need, selector), n in self.by_shape.items()),
                      key=lambda item: json.dumps(item, sort_keys=True))


def _one_cluster(selector: tuple[tuple[str, str], ...], clusters: list[str]) -> list[tuple[tuple[str, str], ...]]:
    """Where a gang's parts may be taken in a group over several clusters: within one cluster,
    each in turn (the planner never splits a gang across clusters, nor may the demand ask so)."""
    if len(clusters) < 2 or any(key == CLUSTER_LABEL for key, _ in selector):
        return [selector]
    return [tuple(sorted((*selector, (CLUSTER_LABEL, name)))) for name in clusters]


def _elsewhere(selector: tuple[tuple[str, str], ...], snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """A STRICT_SPREAD bundle counted on a node still to come: asked off the group's nodes (its
    label selector also says `ray.io/node-id` `!in(...)` of them), so that Ray's autoscaler adds a
    node for it rather than count it on one that the gang's other bundles need. Two such bundles
    may still be counted on one new node: the next ticks then ask for the rest, one more node at
    least each time. Left as it is when the job names a node itself, or the group has more than
    ELSEWHERE_NODES nodes (the request would grow too long)."""
    if not snapshot.nodes or len(snapshot.nodes) > ELSEWHERE_NODES or any(key == NODE_ID for key, _ in selector):
        return selector
    ids = ",".join(sorted(node.id for node in snapshot.nodes))
    return tuple(sorted((*selector, (NODE_ID, f"!in({ids})"))))


def digest(bundles: list[dict]) -> str:
    """A short fingerprint of a demand: the same demand, the same digest."""
    return hashlib.sha256(json.dumps(bundles, sort_keys=True).encode()).hexdigest()[:16]


def describe_demand(bundles: list[dict]) -> str:
    """`3x{CPU 1}; 1x{CPU 8, GPU 1 @pool=gpu}`, or `none`."""
    parts = []
    for item in bundles:
        labels = "".join(f" @{k}={v}" for k, v in item["label_selector"].items())
        parts.append(f"{item['count']}x{{{describe(Resources.of(item['resources']).items())}{labels}}}")
    return "; ".join(parts) or "none"


def request_payload(bundles: list[dict], max_bytes: int) -> tuple[str, int]:
    """The demand as the demand job reads it: JSON `[[resources, label_selector, count], ...]`,
    at most `max_bytes` long (it travels in an environment variable); shapes that would make it
    longer are left out. Returns the text and how many shapes were left out."""
    parts, size = [], 2  # the brackets
    for item in bundles:
        part = json.dumps([item["resources"], item["label_selector"], item["count"]], separators=(",", ":"))
        if size + len(part) + 1 > max_bytes:
            break
        parts.append(part)
        size += len(part) + 1
    return f"[{','.join(parts)}]", len(bundles) - len(parts)
