"""What a tick needs to know of its process, handed down by the CLI (which reads the environment)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TickConfig:
    database_url: str
    # Submissions to Ray in flight at once, per group.
    submit_concurrency: int
    # Seconds before a request to Ray counts as unanswered.
    ray_timeout_s: float
    # Crash-test aid (failpoints.py): the point of the tick at which to die, if any.
    failpoint: str | None = None
