"""Which waiting reasons a tick writes: those that changed, bounded per tick."""

from __future__ import annotations

from itertools import filterfalse
from operator import attrgetter, itemgetter

from job.core.group_snapshot import PendingRow

# A burst of submissions gets its first reasons over a few ticks rather than in one huge write.
NEW_REASONS_PER_TICK = 5_000
MESSAGE_REFRESH_PER_TICK = 1_000

_IDS, _REASONS, _MESSAGES = attrgetter("id"), attrgetter("reason"), attrgetter("message")
_WAITING = itemgetter("job", "reason", "message")


def waiting_changes(pending: list[PendingRow], waiting: list[dict]) -> dict[int, tuple[str, str]]:
    """The waiting reasons to write, in queue order, bounded so that a tick's writes stay bounded
    with 100k jobs waiting. A new reason goes first (at most NEW_REASONS_PER_TICK; after a burst
    of submissions the rest follow over the next ticks). A message that only restates figures
    (the most CPU free on any node) changes whenever the cluster does, for every job of that
    shape: it is refreshed for the first MESSAGE_REFRESH_PER_TICK jobs only, so the head of the
    queue is always current. `waiting`: the plan's waiting records."""
    ids = list(map(_IDS, pending))
    # The stored reasons in the plan's words (its ids are strings), matched in C: in a steady queue
    # nearly every job's is unchanged, and only the others are looked at one by one.
    stored = set(zip(map(str, ids), map(_REASONS, pending), map(_MESSAGES, pending)))
    fresh = list(filterfalse(stored.__contains__, map(_WAITING, waiting)))
    if not fresh:
        return {}
    reasons = dict(zip(ids, map(_REASONS, pending)))
    changed = {}
    refreshes = []
    for job, reason, message in fresh:
        job_id = int(job)
        if job_id not in reasons or reasons[job_id] != reason:
            if len(changed) < NEW_REASONS_PER_TICK:
                changed[job_id] = (reason, message)
        elif len(refreshes) < MESSAGE_REFRESH_PER_TICK:
            refreshes.append((job_id, (reason, message)))
    changed.update(refreshes)
    return changed
