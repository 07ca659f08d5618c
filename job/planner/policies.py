"""Queue policies: the order in which the planner considers pending jobs (DESIGN.md, "Choosing the
next job").

Each policy takes the planner's entries `(-priority, submitted_at, position, len(id), id, job,
shape, user)`, already sorted: higher priority first, then older first, then by id. That is the fifo order, and the order within one
user for drf and fairshare. The drf/fairshare order is lazy: it depends on what the planner has
placed so far, which it reads from the users' state as it goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from heapq import heapify, heappop, heapreplace
from itertools import groupby

from job.planner.picture import Shape, UserState
from job.planner.usage import usage_share

Entry = tuple[int, datetime, int, int, str, dict, Shape, UserState]


def fifo(entries: list[Entry]) -> Iterable[Entry]:
    return entries


def lifo(entries: list[Entry]) -> Iterator[Entry]:
    """Higher priority first still; newest first within a priority."""
    for _, same_priority in groupby(entries, key=lambda entry: entry[0]):
        yield from reversed(list(same_priority))


def fair(entries: list[Entry]) -> Iterator[Entry]:
    """drf and fairshare: the user with the lowest score goes next, ties by user name; the score is
    read again after each of the user's jobs is placed."""
    queues: dict[UserState, list[Entry]] = {}
    for entry in entries:
        queues.setdefault(entry[7], []).append(entry)
    # Names are unique, so the comparison never goes past them.
    heap = [(user.score(), user.name, 0, queue) for user, queue in queues.items()]
    heapify(heap)
    while heap:
        score, name, index, queue = heap[0]
        user = queue[0][7]
        running = user.running
        end = len(queue)
        # Until one of the user's jobs is placed, the score does not change and the user stays
        # first in line: no need to go through the heap for each job.
        while index < end and user.running == running:
            yield queue[index]
            index += 1
        if index == end:
            heappop(heap)
        else:
            heapreplace(heap, (user.score(), name, index, queue))


POLICIES: dict[str, Callable[[list[Entry]], Iterable[Entry]]] = {
    "fifo": fifo,
    "lifo": lifo,
    "drf": fair,
    "fairshare": fair,
}


def memory(policy: str, usage: float, half_life_s: float) -> float:
    """The part of a user's score that comes from the past: only fairshare remembers."""
    return usage_share(usage, half_life_s) if policy == "fairshare" else 0.0
