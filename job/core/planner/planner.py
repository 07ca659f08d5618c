"""The planner: a snapshot of one resource group in, a plan out. Pure: no I/O, no clock, no
randomness; the same snapshot gives the same plan.

A plan is five steps, each a function over the values the step before made (`_steps`):

1. the picture of the nodes and the users' books: free resources, and what each user and account
   holds and runs (books.py);
2. the queue: an entry per pending job, by class, and the reservations that still hold (queue.py);
3. the walk: each job placed, preempting, reserving or waiting, in policy order (walk.py);
4. the words: each waiting job's message, once per reason and subject (messages.py);
5. the plan itself.

A node's free resources start at its total, less what work outside the queue holds there
(`nodes[].outside`, at most the total) and what our running jobs hold. Outside load costs work per
node, once, and per waiting shape in its message: nothing per job.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from job.core.planner.books import Books, NodesPicture
from job.core.planner.entries import Entry
from job.core.planner.messages import MESSAGES, Words
from job.core.planner.preemption import Preemptor
from job.core.planner.queue import Shapes, held_reservations, queue_of
from job.core.planner.rules import PREEMPTIONS, SELECTORS
from job.core.planner.snapshot import Plan, Snapshot
from job.core.planner.walk import Results, Walk

if TYPE_CHECKING:
    from job.core.planner.carried import Carried


def plan(snapshot: Snapshot, carried: Carried | None = None, worded: bool = True) -> Plan:
    """The plan of `snapshot`; with `carried`, of the snapshot whose nodes and first running jobs
    are the carried picture's (carried.py), which the plan gives back as it found it. Not
    `worded`, its waiting records carry no message ("") and its `said` is None: for a caller that
    reads none, the simulation, whose plans' wording was a tenth of its time."""
    # A plan allocates a few objects per pending job and frees none before it returns, so the
    # cyclic collector would only walk them again and again: a quarter of the time at 100k jobs.
    # It makes no cycles worth collecting early; the collector's state is restored as it was.
    collecting = gc.isenabled()
    gc.disable()
    result = None
    try:
        result = _steps(snapshot, carried, worded)
        return result
    finally:
        if carried is not None:
            carried.restore(snapshot, result)
        if collecting:
            gc.enable()


def _steps(snapshot: Snapshot, carried: Carried | None, worded: bool) -> Plan:
    group = snapshot.group
    # 1. The picture of the nodes and the users' books, the running jobs charged.
    picture = NodesPicture.of(snapshot, carried)
    books = Books(snapshot, picture)
    if carried is not None:
        carried.charge(books.user)
    books.charge_running()

    # 2. The queue: the entries by class, and the reservations that still hold their room.
    results = Results(snapshot.running, snapshot.now, picture.carried_ends)
    wanted = {r["job"]: r for r in snapshot.reservations}
    reserving: dict[str, Entry] = {}
    shapes = Shapes(picture)
    tiers = queue_of(snapshot, books, shapes, wanted, reserving)
    reserved = held_reservations(snapshot, picture.by_id, wanted, reserving, results.ends)

    # 3. The walk, with the node selector and (a group that preempts) the preemptor.
    order = shapes.order(group.resource_priority)
    rule = SELECTORS[group.selector]
    stored = rule.kind.State.model_validate(snapshot.state.get(rule.state_name, {}))
    selector = (rule.kind(picture.nodes, order, stored) if carried is None
                else carried.selector(rule.kind, order, stored, snapshot))
    coming = [(held.user, held.shape.need) for held in reserved.values() if held.kind == "preemption"]
    preemptor = (Preemptor(group, picture.totals, books.candidates, coming, books.going)
                 if PREEMPTIONS[group.preemption].preempts else None)
    walk = Walk(snapshot, picture.totals, results, reserved, selector, preemptor)
    for value, entries in tiers:
        walk.tier(value, entries)
    walk.reclaim()

    # 4. The words: each waiting job's message, once per reason and subject.
    said = _words(Words.of(group, snapshot.now, order, picture.outside, books.holders), results) if worded else None

    # 5. The plan.
    document = selector.state_document()
    state = {} if document is None else {rule.state_name: document}
    if preemptor is None and not snapshot.reservations and not reserved:
        return Plan.model_construct(placements=results.placements, waiting=results.waiting, state=state, said=said)
    return Plan.model_construct(placements=results.placements, waiting=results.waiting, state=state, said=said,
                                preemptions=results.preemptions,
                                reservations=[held.document() for held in reserved.values()])


def _words(words: Words, results: Results) -> list[tuple]:
    """Each waiting job's message, once per reason and subject: the plan's `said`."""
    said = []
    for why, records in results.unsaid.items():
        reason = why[0]
        text = MESSAGES[reason](words, why[1])
        if why in results.reclaimed:
            records = [record for record in records if record["reason"] == reason]
        # Only the lists that a job left by reclaiming are read record by record: elsewhere
        # every record is given its message, and no more (a million of them in a large queue).
        for record in records:
            record["message"] = text
        said.append((reason, text, records))
    return said
