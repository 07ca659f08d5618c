"""The nodes as a plan starts, before our running jobs: the planner's (planner.py) and the
simulation's carried picture's (carried.py)."""

from __future__ import annotations

from job.core.planner.picture import NodeState
from job.core.planner.snapshot import Node
from job.core.resources import Resources, to_units


def node_states(nodes: list[Node], priority: list[str]) -> list[NodeState]:
    """The nodes as a plan starts, by id, before our running jobs (`_node`)."""
    kinds: dict[tuple, tuple[Resources, frozenset[str]]] = {}
    return [_node(node, priority, kinds) for node in sorted(nodes, key=lambda node: node.id)]


def _node(node: Node, priority: list[str], kinds: dict[tuple, tuple[Resources, frozenset[str]]]) -> NodeState:
    """The node as the plan starts: free is its total less what outside load holds there, and what
    our running jobs hold beyond their declaration (`held`). Each counts at most what is left of
    the node's total of a resource, and not at all on a resource the node has none of: no more
    than a node has can be held there. `kinds`: the totals and priority resources
    of each distinct node resources met so far in this plan (a thousand nodes are of a few kinds)."""
    kind = tuple(node.resources.items())
    known = kinds.get(kind)
    if known is None:
        total = Resources.of(node.resources)
        known = kinds[kind] = (total, frozenset(name for name in priority if total.get(name) > 0))
    total, has = known
    free = dict(total.items())
    if not node.outside and not node.held:
        return NodeState(id=node.id, labels=node.labels, total=total, free=free, has=has)
    outside = _taken(node.outside, free)
    held = {entry["job"]: taken for entry in node.held if (taken := _taken(entry["resources"], free))}
    return NodeState(id=node.id, labels=node.labels, total=total, free=free, has=has, outside=outside, held=held)


def _taken(amounts: dict[str, float], free: dict[str, int]) -> dict[str, int]:
    """`amounts` (Ray's) taken off `free` in place, each at most what is left of it; what was taken."""
    taken = {}
    for name, amount in amounts.items():
        part = min(to_units(amount), free.get(name, 0))
        if part > 0:
            taken[name] = part
            free[name] -= part
    return taken
