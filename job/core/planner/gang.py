"""All-or-nothing placement of a job's whole footprint: its bundles, by their strategy, then its
driver (docs/planner.md, "Bundles").

Bundles go first: they are what a strategy constrains, and a small driver fits beside them more
often than a gang fits beside a driver placed first. Each part is taken off its node's free
resources as it is chosen, so later parts see what earlier ones took; if any part finds no node,
every part is given back and nothing of the job is placed. The choice among nodes is the caller's
(`choose`: the selector's order), which must not change anything it keeps: a placement given back
would leave the selectors' caches, which assume free resources only go down, wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from job.core.clusters import CLUSTER_LABEL
from job.core.planner.picture import Gang, NodeState, Shape, add_to
from job.core.resources import fits

# Among `nodes`, the one the shape goes to (one whose free resources cover it), or None.
Choose = Callable[[Shape, Sequence[NodeState]], "NodeState | None"]


def place(gang: Gang, nodes: Sequence[NodeState], choose: Choose) -> list[NodeState] | None:
    """The node of each bundle, then the driver's, all taken off their free resources; None, with
    nothing taken, when the whole footprint does not fit. A footprint is never split across Ray
    clusters (core/clusters.py CLUSTER_LABEL): in a group of several, it is tried in one cluster
    after another, first in the cluster of the node `choose` takes for its first part."""
    clusters = _by_cluster(nodes)
    if len(clusters) == 1:
        return _place(gang, nodes, choose)
    first = choose(gang.bundles[0] if gang.bundles else gang.driver, nodes)
    if first is not None:
        clusters.sort(key=lambda part: first not in part)
    for part in clusters:
        chosen = _place(gang, part, choose)
        if chosen is not None:
            return chosen
    return None


def _by_cluster(nodes: Sequence[NodeState]) -> list[list[NodeState]]:
    """The nodes of each cluster, in their order."""
    parts: dict[str | None, list[NodeState]] = {}
    for node in nodes:
        parts.setdefault(node.labels.get(CLUSTER_LABEL), []).append(node)
    return list(parts.values()) or [[]]


def _place(gang: Gang, nodes: Sequence[NodeState], choose: Choose) -> list[NodeState] | None:
    taken: list[tuple[NodeState, Shape]] = []
    if _bundles(gang, nodes, choose, taken) and _take(gang.driver, choose(gang.driver, nodes), taken):
        return [node for node, _ in taken]
    for node, shape in taken:
        add_to(node.free, shape.need)
    return None


def first_fit(shape: Shape, nodes: Sequence[NodeState]) -> NodeState | None:
    """The first node that fits: the order-free choice, for the questions that are not a plan's."""
    return next((node for node in nodes if fits(shape.items, node.free)), None)


def on_empty(nodes: Sequence[NodeState], held: str = "total") -> list[NodeState]:
    """Copies of the nodes whose free resources are their `held` ("total" or "free"): a gang can be
    tried on them without touching the plan's picture."""
    return [NodeState(id=node.id, labels=node.labels, total=node.total, free=dict(getattr(node, held).items()),
                      has=node.has) for node in nodes]


def _take(shape: Shape, node: NodeState | None, taken: list[tuple[NodeState, Shape]]) -> bool:
    if node is None:
        return False
    add_to(node.free, shape.need, -1)
    taken.append((node, shape))
    return True


def _bundles(gang: Gang, nodes: Sequence[NodeState], choose: Choose, taken: list[tuple[NodeState, Shape]]) -> bool:
    strategy = gang.strategy
    if strategy in ("PACK", "STRICT_PACK"):
        node = choose(gang.together, nodes)
        if node is not None:
            for bundle in gang.bundles:
                _take(bundle, node, taken)
            return True
        if strategy == "STRICT_PACK":
            return False
    for bundle in gang.bundles:
        used = list(dict.fromkeys(node for node, _ in taken))
        unused = [node for node in nodes if node not in used]
        if strategy == "STRICT_SPREAD":
            node = choose(bundle, unused)
        elif strategy == "SPREAD":
            node = choose(bundle, unused) or choose(bundle, used)
        else:  # PACK: fewest nodes, so those it holds already first
            node = choose(bundle, used) or choose(bundle, unused)
        if not _take(bundle, node, taken):
            return False
    return True
