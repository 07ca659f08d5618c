"""A Ray cluster answered from a table: two nodes of 4 CPUs, the jobs it was given, and a refusal
of any submission whose entrypoint is REFUSED. For tests whose subject is PostgreSQL (the
statements a real tick sends, what a database role may do), never for behaviour that crosses Ray."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from job.adapters.ray_cluster import RayJob, RayNode, RaySubmitRefused
from job.core import states
from job.core.observed import ClusterWork

REFUSED = "refused-by-ray"


def finished(submission_id: str, node: str) -> RayJob:
    now = datetime.now(UTC)
    return RayJob(submission_id, states.SUCCEEDED, node, now - timedelta(minutes=9), now, None, 0)


def running(submission_id: str, node: str, minutes: int = 9) -> RayJob:
    return RayJob(submission_id, states.RAY_RUNNING, node, datetime.now(UTC) - timedelta(minutes=minutes),
                  None, None, None)


class FakeRay:
    def __init__(self, *known: RayJob, nodes: tuple[str, ...] = ("node-a", "node-b")) -> None:
        self.known = {job.submission_id: job for job in known}
        self.submitted: list[str] = []
        # What each submission asked besides its entrypoint: node_id, resources, runtime_env, metadata.
        self.requests: dict[str, dict[str, Any]] = {}
        self.stopped: list[str] = []
        self.node_names = nodes
        # A head node of this `memory` (Ray's resource), if set: its cluster's default driver cap.
        self.head_memory: float | None = None

    def nodes(self, *_: Any, **__: Any) -> list[RayNode]:
        return [RayNode(id=name, resources={"CPU": 4.0}, labels={}, is_head=False) for name in self.node_names]

    def head_node_id(self) -> str:
        return f"head-{self.node_names[0] if self.node_names else 'none'}"

    def alive_nodes(self, labels: dict[str, str] | None = None) -> list[RayNode]:
        head = ([RayNode(id=f"head-{self.node_names[0]}", resources={"memory": self.head_memory}, labels={}, is_head=True)]
                if self.head_memory else [])
        return [msgspec.structs.replace(node, labels={**node.labels, **(labels or {})}) for node in [*head, *self.nodes()]]

    def jobs(self, submission_ids: list[str]) -> dict[str, RayJob]:
        return {i: self.known[i] for i in submission_ids if i in self.known}

    def supervisors(self) -> frozenset[str]:
        """One per job Ray has not ended, as Ray's alive job supervisors."""
        return frozenset(i for i, job in self.known.items() if job.status in (states.RAY_PENDING, states.RAY_RUNNING))

    def work(self) -> ClusterWork:
        return ClusterWork()

    def job(self, submission_id: str) -> RayJob | None:
        return self.known.get(submission_id)

    def submit(self, *, submission_id: str, entrypoint: str, **fields: Any) -> None:
        if entrypoint == REFUSED:
            raise RaySubmitRefused("the fake Ray refuses this one")
        self.submitted.append(submission_id)
        self.requests[submission_id] = fields
        self.known[submission_id] = RayJob(submission_id, states.RAY_PENDING, None, None, None, None, None)

    def stop(self, submission_id: str) -> bool:
        self.stopped.append(submission_id)
        return True
