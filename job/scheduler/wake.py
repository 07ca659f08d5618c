"""What the loop waits for between its ticks: a NOTIFY from PostgreSQL (sql/0024_wake.sql: a
submit, a cancel, a group's, user's or account's change, whoever wrote it), a job of ours that
starts or ends in Ray, or its timer, whichever comes first.

PostgreSQL: one autocommit connection LISTENs on job_wake; it sends nothing while it waits. A burst
of submits is gathered for GATHER_S after its first NOTIFY, and every NOTIFY already received is
drained, so that one tick serves the whole burst. A connection that fails (the database restarted)
is dropped: the timer alone wakes the loop until it connects again, tried at most once a RECONNECT_S.

Ray has no callbacks: while a tick left jobs of ours in a cluster, that cluster's alive job
supervisors (one per running job, `RayCluster.supervisors`) are polled every POLL_S, one request of
a few milliseconds, and any change (a job started or ended, ours or not) wakes the loop. Nothing
is polled while nothing of ours is in Ray: an idle loop sends Ray and PostgreSQL exactly what its
timer's ticks send, as before. Two loops that overlap (a CronJob pod and the next) hear each other's
ticks (job_ticked) and put back their timers: together they tick on the timer as one does."""

from __future__ import annotations

import time
from typing import Any, Callable

import psycopg

from job import log
from job.core.errors import DatabaseUnavailable, Unavailable
from job.store.connection import connect

CHANNEL = "job_wake"
# Where every loop's recorded ticks are told (sql/0024_wake.sql): a loop that hears another's tick
# puts its own timer back, so that two overlapping loops tick on their timers as one.
TICKED = "job_ticked"
# After a first NOTIFY, how long to wait for the rest of a burst: a client submitting 20 jobs one
# transaction each sends them within a few milliseconds of each other.
GATHER_S = 0.02
# How often the clusters of our running jobs are polled for a job's start or end: an ended job's
# room waits half of this on average, once per wave of a burst (bench/latency.py). Four small
# requests a second, and none while nothing of ours runs.
POLL_S = 0.25
# How soon to try a lost LISTEN connection again.
RECONNECT_S = 5.0
# The longest a wait blocks at once, so that SIGTERM (which only sets a flag) ends it promptly.
SLICE_S = 0.2


class Wakes:
    """The loop's waits. `wait(until, over)` returns why it woke: "notify", "ray" or "timer"
    ("over" when `over()` ended the wait: the loop's deadline or SIGTERM)."""

    def __init__(self, database_url: str, every_s: float) -> None:
        self.url = database_url
        self.every_s = every_s
        self._conn: psycopg.Connection | None = None
        self._tried = -RECONNECT_S
        # The clusters watched since the last tick, each with the supervisors it had when last
        # polled (None: not polled yet).
        self._watched: dict[Any, frozenset[str] | None] = {}
        self._next_poll = 0.0

    def listen(self) -> None:
        """(Re)connect and LISTEN, unless it failed less than RECONNECT_S ago."""
        if self._conn is not None or time.monotonic() - self._tried < RECONNECT_S:
            return
        self._tried = time.monotonic()
        try:
            conn = connect(self.url, autocommit=True)
        except DatabaseUnavailable:
            return
        try:
            conn.execute(f"LISTEN {CHANNEL}; LISTEN {TICKED}")
        except psycopg.Error:
            conn.close()
            return
        self._conn = conn
        log.debug("wake_listening", channel=CHANNEL)

    def watch(self, clusters: list[Any]) -> None:
        """After a tick: the clusters that hold jobs of ours, polled from now on. One watched
        before the tick keeps what it had then, so that a job that started or ended during the
        tick wakes the loop; a new one is compared with its first poll."""
        self._watched = {cluster: self._watched.get(cluster) for cluster in clusters}
        self._next_poll = time.monotonic()

    def wait(self, until: float, over: Callable[[], bool]) -> str:
        """Until `until` at most. Another loop's tick heard meanwhile puts it back to half as
        much again as `every_s` from then: that loop, due `every_s` after its tick, ticks first,
        and this one only if it stops (its pod ended). The ticks heard at once were this loop's
        own (recorded as its tick ended, just before this wait)."""
        self.listen()
        if CHANNEL in self._notified(0.0):
            return "notify"
        while not over():
            now = time.monotonic()
            if now >= until:
                return "timer"
            if self._watched and now >= self._next_poll:
                if self._changed():
                    return "ray"
                self._next_poll = now + POLL_S
            end = min(until, self._next_poll if self._watched else until, now + SLICE_S)
            heard = self._notified(max(0.0, end - time.monotonic()))
            if CHANNEL in heard:
                return "notify"
            if TICKED in heard:
                until = max(until, time.monotonic() + 1.5 * self.every_s)
        return "over"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _notified(self, timeout: float) -> set[str]:
        """The channels of the NOTIFYs that came within `timeout`, the rest of a burst gathered
        and every one received drained."""
        if self._conn is None:
            time.sleep(timeout)
            return set()
        try:
            heard = {notify.channel for notify in self._conn.notifies(timeout=timeout, stop_after=1)}
            if heard:
                heard.update(notify.channel for notify in self._conn.notifies(timeout=GATHER_S))
            return heard
        except psycopg.Error as exc:
            log.warning("wake_listen_lost", cause=str(exc).strip().splitlines()[0] if str(exc).strip() else "",
                        message="waking on the timer alone until PostgreSQL answers again")
            self.close()
            return set()

    def _changed(self) -> bool:
        """Whether a watched cluster's supervisors changed. A cluster that does not answer is no
        longer polled: the next tick finds out what became of it, with its own retries."""
        changed = False
        for cluster, before in list(self._watched.items()):
            try:
                now = cluster.supervisors()
            except Unavailable:
                del self._watched[cluster]
                continue
            changed = changed or (before is not None and now != before)
            self._watched[cluster] = now
        return changed
