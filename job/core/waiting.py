"""Which waiting reasons a tick writes: those that changed, bounded per tick."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import compress
from operator import attrgetter, itemgetter

from job.core.job import PendingRow

# A burst of submissions gets its first reasons over a few ticks rather than in one huge write.
NEW_REASONS_PER_TICK = 5_000
MESSAGE_REFRESH_PER_TICK = 1_000

_ID = attrgetter("id")
_JOB = itemgetter("job")


class Compared:
    """What the last comparison of a group's plan with its pending rows found, for the next one, so
    that a steady tick compares the plan's 100,000 waiting records with their rows by set
    operations, without fetching each record's row (the memory reads were most of the comparison's
    cost): a job whose reason and message in the plan are those of the last plan, whose row
    stored them then and was not read again since, stores them still. Kept with the rows from one
    tick to the next (scheduler/pending.py), which notes each row read again (`read_again`)."""

    def __init__(self) -> None:
        # The last plan's waiting jobs by (reason, message).
        self.said: dict[tuple[str, str], set[str]] = {}
        # Of those, the jobs whose row did not store them (whether written since or not).
        self.differed: set[str] = set()
        # The jobs whose row was read again since (ids as the plan names them).
        self.read_again: set[str] = set()

    def unsure(self, waiting: list[dict], said: Iterable[tuple[str, str, list[dict]]]) -> list[dict]:
        """The waiting records, in queue order, whose row may not store their reason and message:
        those of jobs not waiting so in the last plan, not found stored so then, or read again.
        `said`: the same records grouped by reason and message (Plan.said). The plan's groups are
        kept for the next comparison."""
        groups: dict[tuple[str, str], set[str]] = {}
        unsure = self.differed | self.read_again
        for reason, message, records in said:
            key = reason, message
            before = self.said.get(key)
            # The same jobs as the last plan's (a job waits once): the last set serves again,
            # checked without building one (most steady ticks).
            if (before is not None and key not in groups and len(before) == len(records)
                    and before.issuperset(map(_JOB, records))):
                groups[key] = before
                continue
            ids = set(map(_JOB, records))
            unsure |= ids if before is None else ids - before
            # Two subjects of the planner may read alike.
            groups[key] = ids | groups[key] if key in groups else ids
        self.said, self.read_again = groups, set()
        if not unsure:
            return []
        return list(compress(waiting, map(unsure.__contains__, map(_JOB, waiting))))


def counted(said: Iterable[tuple[str, str, list[dict]]]) -> Counter:
    """How many jobs wait for each reason, from the plan's records grouped (Plan.said)."""
    counts: Counter = Counter()
    for reason, _, records in said:
        if records:
            counts[reason] += len(records)
    return counts


def waiting_changes(pending: list[PendingRow], waiting: list[dict], compared: Compared | None = None,
                    said: Iterable[tuple[str, str, list[dict]]] | None = None) -> dict[int, tuple[str, str]]:
    """The waiting reasons to write, in queue order, bounded so that a tick's writes stay bounded
    with 100k jobs waiting. A new reason goes first (at most NEW_REASONS_PER_TICK; after a burst
    of submissions the rest follow over the next ticks). A message that only restates figures
    (the most CPU free on any node) changes whenever the cluster does, for every job of that
    shape: it is refreshed for the first MESSAGE_REFRESH_PER_TICK jobs only, so the head of the
    queue is always current. `waiting`: the plan's waiting records, read in this one pass (in
    queue order, each record and row is a fetch from memory of its own at 100k jobs). With the
    last comparison (`compared`, brought up to date) and the records grouped (`said`, Plan.said),
    only the records it leaves unsure are read."""
    if compared is not None:
        assert said is not None, "a comparison reads the records grouped"
        waiting = compared.unsure(waiting, said)
    known = dict(zip(map(_ID, pending), pending, strict=True)) if waiting else {}
    differed: set[str] = set()
    changed: dict[int, tuple[str, str]] = {}
    refreshes: list[tuple[int, tuple[str, str]]] = []
    for record in waiting:
        ident, reason, message = record["job"], record["reason"], record["message"]
        job_id = int(ident)
        row = known.get(job_id)
        if row is not None and row.reason == reason and row.message == message:
            continue
        differed.add(ident)
        if row is None or row.reason != reason:
            if len(changed) < NEW_REASONS_PER_TICK:
                changed[job_id] = (reason, message)
        elif len(refreshes) < MESSAGE_REFRESH_PER_TICK:
            refreshes.append((job_id, (reason, message)))
    changed.update(refreshes)
    if compared is not None:
        compared.differed = differed
    return changed
