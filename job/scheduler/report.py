"""What a group's tick did, for the CLI, the summary log line and the benchmark."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from job import log


@dataclass
class GroupResult:
    group: str
    status: str  # ticked | skipped | failed
    cause: str = ""
    placed: int = 0
    waiting: Counter = field(default_factory=Counter)
    running: int = 0
    finished: int = 0
    # Victims Ray was asked to stop this tick.
    preempted: int = 0
    steps_ms: dict[str, float] = field(default_factory=dict)
    reasons_written: int = 0
    # Time spent waiting on Ray, within the steps: the rest is ours and PostgreSQL's.
    ray_ms: float = 0.0
    statements: int = 0
    plan: dict | None = None
    # Wall time of the whole group's tick, and the alive nodes it saw (id, resources, free): the
    # tick's record (scheduler/ticks.py).
    seconds: float = 0.0
    nodes: list[dict] = field(default_factory=list)
    # For a group that autoscales: its demand (describe_demand), and whether it was sent this tick.
    demand: str | None = None
    demand_sent: bool = False
    # Why the tick counted its running jobs as declared rather than as observed (a list Ray truncated,
    # the state API unavailable).
    observed_fallback: str | None = None
    # The Ray clusters the tick spoke to that hold jobs of ours (some running, or placed by this
    # tick): the loop watches them for a job's start or end until its next tick.
    busy_clusters: list[Any] = field(default_factory=list, repr=False, compare=False)
    # When the group has something to do that no event announces (tick.due_at), if ever.
    due_at: datetime | None = None


class Steps:
    """Wall time per step of a group's tick, and of its Ray calls."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self.ray_ms = 0.0
        self._last = time.perf_counter()

    def ray(self, call, *args, **kwargs):
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.ray_ms += (time.perf_counter() - began) * 1000

    def done(self, step: str) -> None:
        now = time.perf_counter()
        self.ms[step] = round(self.ms.get(step, 0) + (now - self._last) * 1000, 1)
        self._last = now

    def record(self, result: GroupResult, statements: int) -> None:
        result.steps_ms, result.ray_ms, result.statements = self.ms, self.ray_ms, statements


def summary(result: GroupResult) -> None:
    log.event("group_ticked", group=result.group, placed=result.placed, waiting=sum(result.waiting.values()),
              reasons_written=result.reasons_written,
              **{f"waiting_{reason}": count for reason, count in sorted(result.waiting.items())},
              running=result.running, finished=result.finished, preempted=result.preempted,
              statements=result.statements,
              **({} if result.demand is None else {"demand": result.demand, "demand_sent": result.demand_sent}),
              **({} if result.observed_fallback is None else {"observed": result.observed_fallback}),
              **{f"{step}_ms": ms for step, ms in result.steps_ms.items()}, ray_ms=round(result.ray_ms, 1))
