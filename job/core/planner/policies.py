"""Queue policies: the order in which the planner considers pending jobs (docs/planner.md, "Choosing the
next job").

Each policy takes the planner's entries (entries.py) in any order. Sorted, they are the fifo order
(higher priority first, then older first, then by id), and the order within one user for drf and
fairshare.

A policy is an iterator of runs: it yields `(entries, start)`, and the planner takes the entries
from `start` on, in order, until it places one or reaches the end. Before the next run the policy
asks the planner, through the callback `taken`, for the index after the last entry it took.
Nothing a policy looks at changes between two placements, so it decides once per placement rather
than once per job. The drf/fairshare order is lazy: it depends on what the planner has placed so
far, which it reads from the users' state as it goes. The policies are declared, with their
traits, in rules.py.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from heapq import heapify, heappop, heapreplace
from operator import itemgetter

from job.core.planner.entries import NEG_PRIORITY, USER, Entry
from job.core.planner.picture import UserState

Runs = Iterator[tuple[list[Entry], int]]
# The index after the last entry the planner took from the run last yielded.
Taken = Callable[[], int]
Order = Callable[[list[Entry], Taken], Runs]


def _in_turn(entries: list[Entry], taken: Taken) -> Runs:
    """The entries in the order given, whatever is placed."""
    index = 0
    while index < len(entries):
        yield entries, index
        index = taken()


def fifo(entries: list[Entry], taken: Taken) -> Runs:
    entries.sort()
    yield from _in_turn(entries, taken)


def lifo(entries: list[Entry], taken: Taken) -> Runs:
    """Higher priority first still; newest first within a priority."""
    entries.sort()
    priority = itemgetter(NEG_PRIORITY)
    start = 0
    while start < len(entries):
        end = bisect_right(entries, priority(entries[start]), lo=start, key=priority)
        yield from _in_turn(entries[start:end][::-1], taken)
        start = end


def fair(entries: list[Entry], taken: Taken) -> Runs:
    """drf and fairshare: the user with the lowest score goes next, ties by user name; the score is
    read again after each of the user's jobs is placed."""
    queues: dict[UserState, list[Entry]] = {}
    for entry in entries:
        queues.setdefault(entry[USER], []).append(entry)
    # Each queue sorted on its own: fewer comparisons than one sort of every entry.
    for queue in queues.values():
        queue.sort()
    # Names are unique, so the comparison never goes past them.
    heap = [(user.score(), user.name, 0, queue) for user, queue in queues.items()]
    heapify(heap)
    while heap:
        score, name, index, queue = heap[0]
        # Until one of the user's jobs is placed, the score does not change and the user stays
        # first in line.
        yield queue, index
        index = taken()
        if index == len(queue):
            heappop(heap)
        else:
            heapreplace(heap, (queue[0][USER].score(), name, index, queue))
