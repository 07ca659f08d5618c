"""Which waiting reasons a tick writes: those that changed, bounded per tick."""

from __future__ import annotations

from operator import attrgetter

from job.core.group_snapshot import PendingRow

# A burst of submissions gets its first reasons over a few ticks rather than in one huge write.
NEW_REASONS_PER_TICK = 5_000
MESSAGE_REFRESH_PER_TICK = 1_000

_ID = attrgetter("id")


def waiting_changes(pending: list[PendingRow], waiting: list[dict]) -> dict[int, tuple[str, str]]:
    """The waiting reasons to write, in queue order, bounded so that a tick's writes stay bounded
    with 100k jobs waiting. A new reason goes first (at most NEW_REASONS_PER_TICK; after a burst
    of submissions the rest follow over the next ticks). A message that only restates figures
    (the most CPU free on any node) changes whenever the cluster does, for every job of that
    shape: it is refreshed for the first MESSAGE_REFRESH_PER_TICK jobs only, so the head of the
    queue is always current. `waiting`: the plan's waiting records, read in this one pass (in
    queue order, each record and row is a fetch from memory of its own at 100k jobs)."""
    known = dict(zip(map(_ID, pending), pending))
    changed = {}
    refreshes = []
    for record in waiting:
        job_id, reason, message = int(record["job"]), record["reason"], record["message"]
        row = known.get(job_id)
        if row is not None and row.reason == reason and row.message == message:
            continue
        if row is None or row.reason != reason:
            if len(changed) < NEW_REASONS_PER_TICK:
                changed[job_id] = (reason, message)
        elif len(refreshes) < MESSAGE_REFRESH_PER_TICK:
            refreshes.append((job_id, (reason, message)))
    changed.update(refreshes)
    return changed
