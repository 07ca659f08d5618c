"""A job as the tick's statements read it, one typed row per statement's columns (job/store/tick_jobs.py
builds them with psycopg's class_row): the names are the columns', the ids the table's ints. The
pending rows, read by the hundred thousand, are `group_snapshot.PendingRow`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from job.core.states import State


@dataclass(frozen=True, slots=True)
class ActiveJob:
    """One of our jobs Ray knows of, or is about to (SUBMITTING, SUBMITTED, RUNNING)."""

    id: int
    user_name: str
    state: State
    resources: dict[str, float]
    node: str | None
    attempt: int
    submission_id: str | None
    ray_status: str | None = None
    ray_message: str | None = None
    reason: str | None = None
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    max_runtime_s: float | None = None
    cancel_requested_at: datetime | None = None
    requeues: int = 0
    accepted_at: datetime | None = None
    priority_class: str | None = None
    preempted_at: datetime | None = None
    preempted_by: int | None = None
    # Whether Ray builds something for it before the driver starts (env_vars alone: no).
    builds_runtime_env: bool = False
    # Its bundles and the node planned for each (None: its driver alone); held there until it ends.
    bundles: list[dict[str, float]] | None = None
    bundle_strategy: str | None = None
    bundle_nodes: list[str] | None = None
    # Its use as the last tick observed it (core/observed.py `record`), None before any.
    observed: dict[str, Any] | None = None
    # The array it is a task of (None: none), whose throttle counts it.
    array_id: int | None = None
    # The cluster of its group it was placed in (None: the first).
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class Intent:
    """What the submit step sends to Ray for a SUBMITTING job."""

    id: int
    user_name: str
    group_name: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, Any]
    resources: dict[str, float]
    node: str
    attempt: int
    submission_id: str
    priority_class: str | None
    # What the job learns of its footprint: its bundles, their strategy and planned nodes.
    bundles: list[dict[str, float]] | None = None
    bundle_strategy: str | None = None
    bundle_nodes: list[str] | None = None
    # Of an array's task: the array's id and its index (JOB_ARRAY_ID, JOB_ARRAY_INDEX).
    array_id: int | None = None
    array_index: int | None = None
    # The cluster of its node.
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class Victim:
    """A running job the commit marked to stop for `preempted_by`."""

    id: int
    user_name: str
    priority_class: str | None
    node: str | None
    started_at: datetime | None
    submission_id: str
    preempted_by: int
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class Moved:
    """A job a tick's write moved, with what its log line says: its state after the write, and its
    count of requeues or preemptions for the writes that add one."""

    id: int
    user_name: str
    state: State | None = None
    requeues: int | None = None
    preemptions: int | None = None
