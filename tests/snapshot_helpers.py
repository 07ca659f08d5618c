"""Helpers of the tests that build the tick's snapshot from rows and nodes: a group, a node as the
Ray adapter gives it, an active job row."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from job.core.group import GroupConfig
from job.core.job import ActiveJob

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
GIB = 2**30
GROUP = GroupConfig(name="g", clusters=["http://ray:8265"], policy="fifo", selector="dispersed",
                    resource_priority=["GPU", "CPU", "memory"], half_life_s=0, max_running_per_user=None,
                    max_resources_per_user=None, strict_order=False,
                    priority_classes=[{"name": "default", "value": 0, "preemptible": True}], default_class="default",
                    preemption="off", min_runtime_s=600, max_preemptions=10, start_timeout_s=300)


class Node(NamedTuple):
    """A node as the Ray adapter gives it (the fields build_snapshot reads)."""

    id: str
    resources: dict[str, float]
    labels: dict[str, str]
    free: dict[str, float] | None


def node(ident: str, resources: dict[str, float], free: dict[str, float] | None) -> Node:
    return Node(ident, resources, {}, free)


def job(ident: int, state: str, node_id: str | None, resources: dict[str, float], **fields) -> ActiveJob:
    return ActiveJob(**{"id": ident, "user_name": "u", "state": state, "node": node_id, "resources": resources,
                        "attempt": 1, "submission_id": f"s{ident}", "priority_class": None, "started_at": None,
                        "cancel_requested_at": None, "preempted_at": None, "reason": None, **fields})
