"""The simulated cluster's nodes, from `--nodes` text (`4x{CPU:32,GPU:8,memory:256GiB}`, several
kinds joined by `+`) or from a JSON list of nodes written as in the planner's snapshot."""

from __future__ import annotations

import re

from pydantic import TypeAdapter, ValidationError

from job.core.errors import BadInput
from job.core.planner.snapshot import Node, describe_error
from job.core.simulate.trace import parse_resource_text

_KIND = re.compile(r"\s*(?:(\d+)\s*[x*]\s*)?(\{[^{}]*\})\s*")
_NODES = TypeAdapter(list[Node])
# Ten times bench/clusters.py's 10,000 nodes: `100000000x{CPU:1}` ran for minutes making them.
MAX_NODES = 100_000


def parse_nodes(text: str) -> list[Node]:
    """Nodes named n0001, n0002... in the order written."""
    nodes: list[Node] = []
    for part in text.split("+"):
        match = _KIND.fullmatch(part)
        if match is None:
            raise BadInput("--nodes: expected COUNTx{NAME:AMOUNT,...}, e.g. 4x{CPU:32,GPU:8,memory:256GiB}; "
                           f"got {part.strip()!r}")
        digits = match.group(1) or "1"
        # More digits than MAX_NODES has: too many, before int() reads them.
        count = int(digits) if len(digits) <= len(str(MAX_NODES)) else MAX_NODES + 1
        if count < 1:
            raise BadInput(f"--nodes: at least one node of each kind, got {part.strip()!r}")
        if len(nodes) + count > MAX_NODES:
            raise BadInput(f"--nodes: at most {MAX_NODES} nodes in all")
        resources = parse_resource_text(match.group(2), "--nodes")
        for _ in range(count):
            nodes.append(Node(id=f"n{len(nodes) + 1:04d}", resources=resources))
    return nodes


def parse_nodes_json(text: str | bytes, source: str) -> list[Node]:
    """A JSON list of nodes as in the planner's snapshot (`id`, `resources`, optional `labels`)."""
    try:
        nodes = _NODES.validate_json(text)
    except ValidationError as exc:
        raise BadInput(f"{source}: {describe_error(exc)}") from None
    ids = [node.id for node in nodes]
    if not nodes:
        raise BadInput(f"{source}: no nodes")
    if len(nodes) > MAX_NODES:
        raise BadInput(f"{source}: at most {MAX_NODES} nodes, got {len(nodes)}")
    if len(set(ids)) != len(ids):
        raise BadInput(f"{source}: a node id appears more than once")
    return nodes
