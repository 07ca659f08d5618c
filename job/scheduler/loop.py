"""The CronJob's loop: a tick every few seconds until a deadline."""

from __future__ import annotations

import signal
import time

from job import log
from job.scheduler.config import TickConfig
from job.scheduler.report import GroupResult
from job.scheduler.tick import run_tick


def exit_status(results: list[GroupResult]) -> int:
    """0 when every group was ticked or skipped, 1 when one failed."""
    return 1 if any(result.status == "failed" for result in results) else 0


def loop(config: TickConfig, run_for_s: float, every_s: float, group: str | None = None) -> int:
    """Tick every `every_s` until `run_for_s` has passed. A tick is started only if it can finish
    before the deadline, judging by the longest tick so far; SIGTERM ends the loop after the
    current tick. Returns the worst exit status of its ticks."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    start = time.monotonic()
    deadline = start + run_for_s
    longest = 0.0
    status = 0
    ticks = 0
    while not stopping:
        began = time.monotonic()
        if began + longest > deadline:
            break
        status = max(status, exit_status(run_tick(config, group)))
        ticks += 1
        longest = max(longest, time.monotonic() - began)
        next_start = start + ticks * every_s
        while not stopping and time.monotonic() < min(next_start, deadline):
            time.sleep(min(0.2, max(0.0, next_start - time.monotonic())))
        if time.monotonic() >= deadline:
            break
    log.event("loop_finished", ticks=ticks, reason="sigterm" if stopping else "deadline",
              longest_tick_s=round(longest, 2), status=status)
    return status
