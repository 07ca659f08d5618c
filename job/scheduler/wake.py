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
timer's ticks send, as before.

Two loops that overlap (a CronJob pod and the next) tick on the timer as one: the loop whose
LISTEN connection holds the timer's advisory lock ticks when its timer is due; another tries the
lock when its own is (one statement), and ticks only once it has it, that is once the first loop
ended and its connection let the lock go. Both wake on changes; a loop without its connection
ticks on its timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

from job import log
from job.core.errors import DatabaseUnavailable, Unavailable
from job.store import DictConnection, one
from job.store.connection import connect

CHANNEL = "job_wake"
# Advisory lock namespace of the timer, pg_try_advisory_lock(int, int) with the hash of the loop's
# --group ('' for all): apart from the groups' tick locks (store/groups.py).
TIMER_LOCK_CLASS = 0x6A6F6274  # "jobt"
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
    """The loop's waits (of its --group, if any). `wait(until, over)` returns why it woke:
    "notify", "ray" or "timer"
    ("over" when `over()` ended the wait: the loop's deadline or SIGTERM)."""

    def __init__(self, database_url: str, every_s: float, group: str | None = None) -> None:
        self.url = database_url
        self.every_s = every_s
        self.group = group or ""
        self._conn: DictConnection | None = None
        self._timer = False
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
            conn.execute(f"LISTEN {CHANNEL}")
            self._conn = conn
            self._timer = self._take_timer(conn)
        except psycopg.Error:
            conn.close()
            self._conn = None
            return
        log.debug("wake_listening", channel=CHANNEL)

    def watch(self, clusters: list[Any]) -> None:
        """After a tick: the clusters that hold jobs of ours, polled from now on. One watched
        before the tick keeps what it had then, so that a job that started or ended during the
        tick wakes the loop; a new one is compared with its first poll."""
        self._watched = {cluster: self._watched.get(cluster) for cluster in clusters}
        self._next_poll = time.monotonic()

    def wait(self, until: float, over: Callable[[], bool]) -> str:
        """Until a change, or `until` for the loop that holds the timer (else `every_s` more, as
        long as another loop holds it)."""
        self.listen()
        while not over():
            now = time.monotonic()
            if now >= until:
                if self.leads():
                    return "timer"
                until = now + self.every_s
            if self._watched and now >= self._next_poll:
                if self._changed():
                    return "ray"
                self._next_poll = now + POLL_S
            end = min(until, self._next_poll if self._watched else until, now + SLICE_S)
            if self._notified(max(0.0, end - time.monotonic())):
                return "notify"
        return "over"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._timer = False

    def leads(self) -> bool:
        """Whether this loop ticks on its timer: it holds the timer's lock (taken now if free),
        or it has no connection to tell."""
        if self._conn is not None and not self._timer:
            self._timer = self._take_timer(self._conn)
        return self._timer or self._conn is None

    def _take_timer(self, conn: DictConnection) -> bool:
        """Whether this loop's connection took the timer's lock (kept until it closes)."""
        try:
            return one(conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS taken",
                                    (TIMER_LOCK_CLASS, self.group)))["taken"]
        except psycopg.Error as exc:
            self._lost(exc)
            return False

    def _lost(self, exc: psycopg.Error) -> None:
        log.warning("wake_listen_lost", cause=str(exc).strip().splitlines()[0] if str(exc).strip() else "",
                    message="waking on the timer alone until PostgreSQL answers again")
        self.close()

    def _notified(self, timeout: float) -> bool:
        """Whether a NOTIFY came within `timeout`, the rest of its burst gathered and drained."""
        if self._conn is None:
            time.sleep(timeout)
            return False
        try:
            if not any(True for _ in self._conn.notifies(timeout=timeout, stop_after=1)):
                return False
            for _ in self._conn.notifies(timeout=GATHER_S):
                pass
            return True
        except psycopg.Error as exc:
            self._lost(exc)
            return False

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
