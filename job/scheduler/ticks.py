"""The tick's record: one row per group ticked, written right after the groups' ticks, so that the
metrics (`python -m job serve`) cover the CronJob's short-lived pods; and the counts the triggers
keep, folded to one row per key. A record that cannot be written is logged and the tick's outcome
stands: the queue matters more than its record."""

from __future__ import annotations

from contextlib import suppress

import psycopg

from job import log
from job.core.errors import JobError
from job.scheduler.report import GroupResult
from job.store import DictConnection, events, ticks


def tick_row(result: GroupResult) -> dict:
    return {
        "group_name": result.group, "outcome": result.status, "cause": result.cause or None,
        "seconds": round(result.seconds, 4), "steps": {step: round(ms / 1000, 4) for step, ms in result.steps_ms.items()},
        "ray_seconds": round(result.ray_ms / 1000, 4), "placed": result.placed, "preempted": result.preempted,
        "running": result.running,
        "finished": result.finished, "waiting": dict(result.waiting), "reasons_written": result.reasons_written,
        "statements": result.statements, "nodes": result.nodes,
    }


def record_ticks(conn: DictConnection, results: list[GroupResult]) -> None:
    """On the tick's own connection, committed here. One lost meanwhile (the database restarted
    during the groups' ticks) loses this record, not the tick."""
    try:
        ticks.record(conn, [tick_row(result) for result in results])
        events.fold_counts(conn)
        conn.commit()
    except (JobError, psycopg.Error) as exc:
        log.warning("ticks_not_recorded", groups=len(results), cause=str(exc).strip().splitlines()[0] if str(exc) else "")
        with suppress(psycopg.Error):
            conn.rollback()
