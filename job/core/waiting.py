"""Which waiting reasons a tick writes: those that changed, bounded per tick."""

from __future__ import annotations

from job.core.group_snapshot import PendingRow

# A burst of submissions gets its first reasons over a few ticks rather than in one huge write.
NEW_REASONS_PER_TICK = 5_000
MESSAGE_REFRESH_PER_TICK = 1_000


def waiting_changes(pending: list[PendingRow], waiting: list[tuple[int, str, str]]) -> dict[int, tuple[str, str]]:
    """The waiting reasons to write, in queue order, bounded so that a tick's writes stay bounded
    with 100k jobs waiting. A new reason goes first (at most NEW_REASONS_PER_TICK; after a burst
    of submissions the rest follow over the next ticks). A message that only restates figures
    (the most CPU free on any node) changes whenever the cluster does, for every job of that
    shape: it is refreshed for the first MESSAGE_REFRESH_PER_TICK jobs only, so the head of the
    queue is always current. `waiting`: Decisions.waiting."""
    known = {row.id: row for row in pending}
    changed = {}
    refreshes = []
    for job_id, reason, message in waiting:
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
