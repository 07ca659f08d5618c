"""The CronJob's loop: a tick on every change (a submit, a cancel, a job's end in Ray: wake.py)
and every few seconds at least, until a deadline, riding out a database that goes away meanwhile
(a restart, a managed server's fail-over).

A tick that loses PostgreSQL midway is safe by construction: its intents were committed before Ray
was called, and a group's advisory lock goes with its connection, so nothing is written without it
(the next tick takes it again on a new connection before its first write). The loop then waits for
the database, retrying with backoff for the rest of its window, and goes on ticking in the same
process once it answers.

The exit status says whether the loop scheduled: 0 when at least one of its ticks scheduled (some
group ticked, or every group was rightly skipped), also when it rode out faults meanwhile; 1 only
when none did for its whole window (every group failed every time, or PostgreSQL never answered)."""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from job import log
from job.core.errors import DatabaseUnavailable
from job.core.redact import redact_url
from job.scheduler.config import TickConfig
from job.scheduler.pending import PendingRows
from job.scheduler.report import GroupResult
from job.scheduler.tick import run_tick
from job.scheduler.wake import Wakes
from job.store.connection import answers

# The longest wait between two tries of a database that went away: a try is one connection
# attempt, and the loop resumes at most this long after the database is back.
RETRY_MAX_S = 2.0
# How long after a job's due instant (tick.due_at) the loop ticks for it.
DUE_MARGIN_S = 0.05
# How soon a loop tries again a group another loop held.
LOCKED_RETRY_S = 1.0


def exit_status(results: list[GroupResult]) -> int:
    """One tick's: 0 when every group was ticked or skipped, 1 when one failed."""
    return 1 if any(result.status == "failed" for result in results) else 0


def scheduled(results: list[GroupResult]) -> bool:
    """Whether a tick scheduled: some group ticked, or none failed (skipped, or no group at all)."""
    return any(result.status == "ticked" for result in results) or not exit_status(results)


@dataclass
class _Window:
    """The loop's deadline and SIGTERM, which end its ticks and its waits for the database."""

    deadline: float
    stopping: list

    def over(self) -> bool:
        return bool(self.stopping) or time.monotonic() >= self.deadline

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


def _tick(config: TickConfig, group: str | None, window: _Window, pending: PendingRows
          ) -> list[GroupResult] | None:
    """One tick's results, or None when PostgreSQL did not answer (waited for)."""
    try:
        return run_tick(config, group, pending=pending)
    except (DatabaseUnavailable, psycopg.OperationalError) as exc:
        _wait_for_database(config.database_url, str(exc).strip().splitlines()[0] if str(exc).strip() else "", window)
        return None


def _wait_for_database(url: str, cause: str, window: _Window) -> None:
    """Retry with backoff until the database answers or the window ends: one line when it went
    away and one when it is back, whatever the number of tries."""
    began = time.monotonic()
    log.warning("database_unavailable", database=redact_url(url), cause=cause, retry_for_s=round(window.left(), 1))
    tries = 0

    def attempt() -> None:
        nonlocal tries
        tries += 1
        answers(url)

    # Either stop ends it; tenacity's `|` joins only its own stops, not a function.
    by_delay = stop_after_delay(window.left())
    try:
        Retrying(retry=retry_if_exception_type(DatabaseUnavailable), reraise=True,
                 stop=lambda state: by_delay(state) or window.over(),
                 wait=wait_exponential(multiplier=0.2, max=RETRY_MAX_S), sleep=_sleeper(window))(attempt)
    except DatabaseUnavailable:
        log.error("database_still_unavailable", database=redact_url(url), tries=tries,
                  down_s=round(time.monotonic() - began, 2))
        return
    log.event("database_available", database=redact_url(url), tries=tries, down_s=round(time.monotonic() - began, 2))


def _sleeper(window: _Window):
    def sleep(seconds: float) -> None:
        end = time.monotonic() + min(seconds, window.left())
        while not window.over() and time.monotonic() < end:
            time.sleep(min(0.2, max(0.0, end - time.monotonic())))

    return sleep


def _monotonic(at: datetime) -> float:
    """`at` on the loop's clock, a little after: a runtime limit counts as passed once exceeded."""
    return time.monotonic() + (at - datetime.now(UTC)).total_seconds() + DUE_MARGIN_S


def loop(config: TickConfig, run_for_s: float, every_s: float, group: str | None = None) -> int:
    """Tick until `run_for_s` has passed: at once on a wake (wake.py: a NOTIFY, a job of ours that
    starts or ends in Ray), else `every_s` after its last tick (wake.py: one loop's timer of two). A tick is started only if it
    can finish before the deadline, judging by the longest tick so far; SIGTERM ends the loop after
    the current tick. Returns 0 if some tick scheduled (or none was started), else 1."""
    stopping: list = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    start = time.monotonic()
    window = _Window(start + run_for_s, stopping)
    longest, ticks, good, bad = 0.0, 0, 0, 0
    pending = PendingRows()
    wakes = Wakes(config.database_url, every_s, group)
    woke: Counter = Counter()
    try:
        wakes.listen()
        if not wakes.leads():
            # Started while another loop runs (the last pod, handing over): that loop ticks on its
            # timer, and this one's first tick waits for a change or for that loop's end.
            woke[wakes.wait(start + every_s, window.over)] += 1
        while not stopping:
            began = time.monotonic()
            if began + longest > window.deadline:
                break
            results = _tick(config, group, window, pending)
            ticks += 1
            if results is None:
                # The database that answers again may not be the one that went away (a fail-over to
                # a replica behind it): none of the rows kept from before is trusted.
                pending = PendingRows()
                bad += 1
                if window.over():
                    break
                continue  # back: tick at once
            outcome = scheduled(results)
            good, bad = good + outcome, bad + (not outcome)
            longest = max(longest, time.monotonic() - began)
            wakes.watch(list(dict.fromkeys(cluster for r in results for cluster in r.busy_clusters)))
            until = min([began + every_s, *(_monotonic(r.due_at) for r in results if r.due_at is not None)])
            if any(result.cause == "locked" for result in results):
                # Another loop holds the group (the last pod, handing over): try again soon, not
                # only at the next wake, since that loop may end before it ticks what woke both.
                until = min(until, time.monotonic() + LOCKED_RETRY_S)
            woke[wakes.wait(until, window.over)] += 1
            if window.over():
                break
    finally:
        wakes.close()
    status = 0 if good or not ticks else 1
    log.event("loop_finished", ticks=ticks, scheduled=good, unscheduled=bad,
              reason="sigterm" if stopping else "deadline", longest_tick_s=round(longest, 2), status=status,
              woken_by_notify=woke["notify"], woken_by_ray=woke["ray"], woken_by_timer=woke["timer"])
    return status
