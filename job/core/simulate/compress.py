"""The simulator's compressed snapshot: the planner's own, built for a cost that does not grow
with the jobs running or waiting (without preemption; with it, every job goes in as it is):

- our running jobs are given as two sets of running entries that the planner adds up as it
  does single jobs: per node, one entry holding what they hold there, charged to a user of its
  own that has no pending job (so the node's free resources are right); per user with a job in
  the snapshot, one entry holding what its jobs hold, on a node outside the group, which the
  planner charges to the user (its dominant share) and to no node. Where a per-user job limit
  applies, the user has one entry per running job (the others empty), so that the planner counts
  them. The dominant shares of users without a job to plan order nothing.
- pending jobs that this plan cannot place are left out. Of a shape (a distinct request) k jobs
  at most can be placed, k being the copies of it that the nodes' free resources hold, node by
  node (for the first TRACKED_SHAPES shapes of the trace; beyond, what is free on all nodes
  together bounds k). A user's jobs of one shape are placed in the user's order (class, priority,
  age), so at most its first k are: the others are left out, and all of a shape with k = 0. A job
  with bundles is a shape of its own (its footprint, bundles and strategy), bounded by the total.

The nodes and the per-node entries are not made again for each plan: the engine keeps them in the
planner's carried picture (core/planner/carried.py), which it updates as jobs start and end.

Left out, they change no placement: the plan's placements are those of the whole queue on every
node (tests/core/test_simulate_engine.py replays traces both ways). Which rules allow which of these
shortcuts is said by their traits (core/planner/rules.py); the engine asks them.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from itertools import islice

from job.core.planner.snapshot import Pending, Running
from job.core.resources import Resources

# The node that holds the users' running jobs in the snapshot, not a node of the group; and the
# user that holds the nodes' running jobs, which has no job of its own.
USERS_NODE = "simulation:users"
NODES_USER = "simulation:nodes"
# Shapes whose copies on each node are counted; later ones are bounded by the group's free total.
TRACKED_SHAPES = 64


def copies(free: dict[str, int], need: Resources) -> int:
    """How many jobs of `need` fit in `free` side by side."""
    # A loop, not min() over a generator: this runs for every tracked shape at every start and end.
    most = None
    for name, amount in need.items():
        here = free.get(name, 0) // amount
        if most is None or here < most:
            most = here
    return most or 0


def candidates(waiting: dict[Resources | tuple, dict[str, list[tuple]]], fit: Mapping[Resources | tuple, int],
               free: dict[str, int], every_job: bool, one_order: bool = False,
               reserving: dict[Resources | tuple, dict[str, int]] | None = None) -> list[Pending]:
    """The pending jobs this plan may place, from `waiting` (per shape, per user, the user's
    queue of keys ending with the job), `fit` (the copies the nodes hold of each tracked shape)
    and the group's `free` total; with `every_job`, all of them. Of a shape with k copies, each
    user's first k, or where the plan takes every job in the order of the keys whoever its user
    (`one_order`), the first k of all. A job that holds a reservation goes to its own node alone:
    per shape and user, `reserving` counts them, and as many more may be placed behind them."""
    jobs: list[Pending] = []
    reserving = reserving or {}
    for need, queues in waiting.items():
        if not queues:
            continue
        if every_job:
            for queue in queues.values():
                jobs.extend(entry[-1] for entry in queue)
            continue
        most = fit.get(need)
        if most is None:
            # A gang's shape is (footprint, bundles, strategy), its copies never counted per node
            # (its parts may go to several): each placed takes its footprint off the free total.
            most = copies(free, need if isinstance(need, Resources) else need[0])
        behind = reserving.get(need, {})
        if one_order:
            most += sum(behind.values())
            if most > 0:
                jobs.extend(entry[-1] for entry in islice(heapq.merge(*queues.values()), most))
        elif most > 0 or behind:
            for user, queue in queues.items():
                jobs.extend(entry[-1] for entry in queue[:most + behind.get(user, 0)])
    return jobs


def node_entry(node: str, held: dict[str, int]) -> Running | None:
    """The running entry of what our jobs hold on `node`, charged to NODES_USER; None for nothing."""
    amounts = Resources(held).amounts()
    return Running(id=f"{node}:running", user=NODES_USER, node=node, resources=amounts) if amounts else None


def user_entries(user: str, held: dict[str, int], running: int, limited: bool) -> list[Running]:
    """The running entries of what `user`'s jobs hold, on USERS_NODE: one holding it all, and
    where a per-user job limit applies (`limited`), an empty one per other running job."""
    amounts = Resources(held).amounts()
    entries = [Running(id=f"{user}:running", user=user, node=USERS_NODE, resources=amounts)] if amounts else []
    if limited and running > 1:
        entries += [Running(id=f"{user}:running:{n}", user=user, node=USERS_NODE, resources={})
                    for n in range(1, running)]
    return entries
