"""Queue policies: the order in which the planner considers pending jobs (docs/planner.md, "Choosing the
next job").

Each policy takes the planner's entries (entries.py) in the order of their last fields that sort
(POSITION, ID_LENGTH, ID): `in_order` relies on it. Sorted, they are the fifo order (higher priority
first, then older first, then by id), and the order within one user for drf and fairshare.

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

from job.core.planner.entries import NEG_PRIORITY, SUBMITTED_AT, USER, Entry
from job.core.planner.picture import AccountState, UserState

Runs = Iterator[tuple[list[Entry], int]]
# The index after the last entry the planner took from the run last yielded.
Taken = Callable[[], int]
Order = Callable[[list[Entry], Taken], Runs]


def in_order(entries: list[Entry]) -> None:
    """The entries, given in the order of their last fields that sort, sorted in place as they
    compare (entries.py): the fifo order. Sorted by one field at a time, from the last that decides
    to the first (a stable sort keeps the order of the fields after): comparing whole entries is what
    costs, in a large list more than the comparisons, each reading two entries and their times
    scattered in memory (a million jobs, the bench's: 1.5 s sorted at once, 0.8 s so)."""
    entries.sort(key=itemgetter(SUBMITTED_AT))
    entries.sort(key=itemgetter(NEG_PRIORITY))


def _in_turn(entries: list[Entry], taken: Taken) -> Runs:
    """The entries in the order given, whatever is placed."""
    index = 0
    while index < len(entries):
        yield entries, index
        index = taken()


def fifo(entries: list[Entry], taken: Taken) -> Runs:
    in_order(entries)
    yield from _in_turn(entries, taken)


def lifo(entries: list[Entry], taken: Taken) -> Runs:
    """Higher priority first still; newest first within a priority."""
    in_order(entries)
    priority = itemgetter(NEG_PRIORITY)
    start = 0
    while start < len(entries):
        end = bisect_right(entries, priority(entries[start]), lo=start, key=priority)
        yield from _in_turn(entries[start:end][::-1], taken)
        start = end


def fair(entries: list[Entry], taken: Taken) -> Runs:
    """drf and fairshare: the user with the lowest score goes next, ties by user name; the score is
    read again after each of the user's jobs is placed. With accounts, the order goes down the
    tree: the lowest-scoring child at each level, from the root to a user (`_down_the_tree`)."""
    queues: dict[UserState, list[Entry]] = {}
    for entry in entries:
        queues.setdefault(entry[USER], []).append(entry)
    # Each queue sorted on its own: fewer comparisons than one sort of every entry.
    for queue in queues.values():
        in_order(queue)
    if any(user.accounts for user in queues):
        yield from _down_the_tree(queues, taken)
        return
    # Names are unique, so the comparison never goes past them.
    heap = [(user.score(), user.name, 0, queue) for user, queue in queues.items()]
    heapify(heap)
    while heap:
        _score, name, index, queue = heap[0]
        # Until one of the user's jobs is placed, the score does not change and the user stays
        # first in line.
        yield queue, index
        index = taken()
        if index == len(queue):
            heappop(heap)
        else:
            heapreplace(heap, (queue[0][USER].score(), name, index, queue))


# A child in its parent's heap: [score, name, kind, index, queue] for a user (kind 0), [score,
# name, kind, 0, heap of its children] for an account (kind 1). A user and an account of one name
# under one parent part by kind; the payload is never compared.
_USER, _ACCOUNT = 0, 1


def _down_the_tree(queues: dict[UserState, list[Entry]], taken: Taken) -> Runs:
    """Siblings compete by score (their subtree's dominant share plus memory, over their shares:
    over shares normalized among the active siblings gives the same order, since the siblings
    share the sum), the lowest first; the user reached at the bottom gives its next job. After
    each run the scores along its path are read again, from the bottom up."""
    root: list[list] = []
    children: dict[AccountState, list[list]] = {}
    for user, queue in queues.items():
        heap = root
        for account in user.accounts:
            below = children.get(account)
            if below is None:
                below = children[account] = []
                heap.append([account.score(), account.name, _ACCOUNT, 0, below])
            heap = below
        heap.append([user.score(), user.name, _USER, 0, queue])
    heapify(root)
    for heap in children.values():
        heapify(heap)
    while root:
        path = [root]
        item = root[0]
        while item[2] == _ACCOUNT:
            path.append(item[4])
            item = item[4][0]
        queue = item[4]
        yield queue, item[3]
        index = taken()
        user = queue[0][USER]
        gone = index == len(queue)
        for heap, sharer in zip(reversed(path), (user, *reversed(user.accounts)), strict=False):
            if gone:
                heappop(heap)
                gone = not heap
            else:
                top = heap[0]
                heapreplace(heap, [sharer.score(), top[1], top[2], index if top[2] == _USER else 0, top[4]])
