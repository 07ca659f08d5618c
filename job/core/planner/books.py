"""The planner's first step: the picture of the nodes and the users' books as the plan starts.

The nodes' free resources start at their total, less what work outside the queue holds there
(`nodes[].outside`, at most the total) and what our running jobs hold; each running job is charged
to its user and the user's accounts. In a group that preempts, every running job is also a
possible victim (a `Candidate`) or, being stopped already, going."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from job.core.observed import naming
from job.core.planner.nodes import node_states
from job.core.planner.picture import AccountState, NodeState, Pool, UserState, add_to
from job.core.planner.preemption import Candidate
from job.core.planner.rules import PREEMPTIONS, memory
from job.core.planner.snapshot import DEFAULT_USER, Running, Snapshot, account_path, limits_of
from job.core.resources import Resources, dominant_share, footprint_of, to_units

if TYPE_CHECKING:
    from job.core.planner.carried import Carried


@dataclass(slots=True)
class NodesPicture:
    """The group's nodes as the plan starts: made from the snapshot, or the carried picture's."""

    nodes: list[NodeState]
    by_id: dict[str, NodeState]
    # Whether any node has outside load or our jobs' use beyond their declaration: the waiting
    # messages look for them only then.
    outside: bool
    # The running jobs that hold a node beyond their declaration.
    holding: set[str] | frozenset[str]
    totals: dict[str, int]
    # The nodes that carry a set of labels, by the labels' key (picture.Pool).
    pools: dict[str, Pool]
    # A carried picture's running jobs, by node id (what the reservations expect to end).
    carried_ends: dict[str, list[Running]]

    @classmethod
    def of(cls, snapshot: Snapshot, carried: Carried | None) -> NodesPicture:
        group = snapshot.group
        if carried is not None:
            carried.check(group)
            return cls(carried.nodes, carried.by_id, carried.outside, carried.holding, dict(carried.totals),
                       carried.pools, carried.on_node)
        nodes = node_states(snapshot.nodes, group.resource_priority)
        totals: dict[str, int] = {}
        for node in nodes:
            add_to(totals, node.total)
        return cls(nodes, {node.id: node for node in nodes}, any(node.outside or node.held for node in nodes),
                   {job for node in nodes for job in node.held}, totals, {}, {})


def _charged(need: Resources, job: Running) -> Resources:
    """What a running job's user is charged: per resource, the larger of its declaration (`need`)
    and what Ray shows it holding (`uses`)."""
    uses = job.uses
    if not uses:
        return need
    used = Resources.of(uses)
    return Resources((name, max(need.get(name), used.get(name))) for name in {*need, *used})


class Books:
    """The users' and accounts' books: what each holds and runs, and the running jobs that may be
    stopped (a group that preempts)."""

    def __init__(self, snapshot: Snapshot, picture: NodesPicture):
        self.snapshot = snapshot
        self.group = group = snapshot.group
        self.picture = picture
        self.preempts = PREEMPTIONS[group.preemption].preempts
        self.users: dict[str, UserState] = {}
        self.accounts = self._accounts()
        self.values = {c.name: c.value for c in group.priority_classes}
        self.preemptible = {c.name for c in group.priority_classes if c.preemptible}
        # Running jobs that may be stopped, by node id, and those being stopped (user, request):
        # filled only when the group preempts.
        self.candidates: dict[str, list[Candidate]] = {}
        self.going: list[tuple[UserState, Resources]] = []
        # The words naming each running job that holds a node beyond its declaration, by id.
        self.holders: dict[str, str] = {}
        self.requests: dict[tuple, Resources] = {}

    def user(self, name: str) -> UserState:
        user = self.users.get(name)
        if user is None:
            group, snapshot = self.group, self.snapshot
            spec = snapshot.users.get(name, DEFAULT_USER)
            max_running, max_resources = limits_of(group, spec)
            user = self.users[name] = UserState(
                name=name,
                shares=spec.shares,
                memory=memory(group.policy, spec.usage, group.half_life_s),
                max_running=max_running,
                max_resources=max_resources,
                accounts=tuple(self.accounts[account] for account in account_path(snapshot.accounts, spec.account)),
            )
        return user

    def _accounts(self) -> dict[str, AccountState]:
        """The snapshot's accounts, each with the memory of every user below it (an account's
        usage is the sum of its users')."""
        snapshot, group = self.snapshot, self.group
        accounts = {}
        for name, account in snapshot.accounts.items():
            limits = None if account.max_resources is None else {r: to_units(a) for r, a in account.max_resources.items()}
            accounts[name] = AccountState(name, account.shares, 0.0, account.max_running, limits)
        for user in snapshot.users.values():
            if user.account is not None and user.usage:
                past = memory(group.policy, user.usage, group.half_life_s)
                for name in account_path(snapshot.accounts, user.account):
                    accounts[name].memory += past
        return accounts

    def charge_running(self) -> None:
        by_id = self.picture.by_id
        preempts = self.preempts
        holding = self.picture.holding
        users, user_of = self.users, self.user
        # A plain job (no bundles, no use shown beyond its request) charged inline: a thousand
        # nodes' running jobs are a few thousand per plan, every plan.
        # Per request as written, its units as (name, units) pairs.
        units_of: dict[tuple, tuple[tuple[str, int], ...]] = {}
        for job in self.snapshot.running:
            name = job.user
            user = users.get(name) or user_of(name)
            user.running += 1
            if job.bundles or job.uses or preempts or job.id in holding:
                self._charge_one(job, user, by_id, holding)
                continue
            raw = tuple(job.resources.items())
            units = units_of.get(raw)
            if units is None:
                units = units_of[raw] = tuple(self._request(raw).items())
            used = user.used
            node = by_id.get(job.node)
            if node is None:
                for resource, amount in units:
                    used[resource] = used.get(resource, 0) + amount
                continue
            free = node.free
            for resource, amount in units:
                used[resource] = used.get(resource, 0) + amount
                free[resource] = free.get(resource, 0) - amount
        totals = self.picture.totals
        for user in self.users.values():
            user.dominant = dominant_share(user.used, totals)
            for account in user.accounts:
                add_to(account.used, user.used)
                account.running += user.running
        for account in self.accounts.values():
            account.dominant = dominant_share(account.used, totals)

    def _charge_one(self, job: Running, user: UserState, by_id: dict[str, NodeState],
                    holding: set[str] | frozenset[str]) -> None:
        """A running job charged on its own: one with bundles, one that uses more than it asked
        for or holds a node beyond it, or any when the group preempts (each a possible victim)."""
        if job.id in holding:
            self.holders[job.id] = naming(job.id, user.name, Resources.of(job.uses or {}),
                                          footprint_of(job.resources, job.bundles or None))
        if job.bundles:
            self._charge_gang(job, user, by_id)
            return
        need = self._request(tuple(job.resources.items()))
        add_to(user.used, _charged(need, job))
        node = by_id.get(job.node)
        if node is not None:
            add_to(node.free, need, -1)
            if self.preempts:
                self._may_be_victim(job, user, need, {node.id: need})

    def _request(self, raw: tuple) -> Resources:
        """A running job's request from its items as written, made once per distinct one."""
        need = self.requests.get(raw)
        if need is None:
            need = self.requests[raw] = Resources.of(dict(raw))
        return need

    def _charge_gang(self, job: Running, user: UserState, by_id: dict[str, NodeState]) -> None:
        """A running job with bundles holds its driver's request on its node and each bundle on the
        bundle's node; its user is charged the whole footprint."""
        bundles, homes = job.bundles, job.bundle_nodes
        assert bundles and homes, "a running job's bundles each name their node (Snapshot._consistent)"
        need = footprint_of(job.resources, bundles)
        add_to(user.used, _charged(need, job))
        here: dict[str, dict[str, int]] = {}
        for node_id, part in zip([job.node, *homes], [job.resources, *bundles], strict=False):
            if node_id in by_id:
                add_to(here.setdefault(node_id, {}), Resources.of(part))
        for node_id, amounts in here.items():
            add_to(by_id[node_id].free, amounts, -1)
        if here and self.preempts:
            self._may_be_victim(job, user, need, {node_id: Resources(amounts) for node_id, amounts in here.items()})

    def _may_be_victim(self, job: Running, user: UserState, need: Resources, holds: dict[str, Resources]) -> None:
        """A running job of a group that preempts: being stopped already, it is going; old enough
        and of a preemptible class, a candidate on each node it holds something on (`holds`)."""
        group = self.group
        started = job.started_at
        if job.stopping:
            self.going.append((user, need))
        elif started is not None:
            now = self.snapshot.now
            assert now is not None, "a group that preempts plans at a time (Snapshot._consistent)"
            run_s = (now - started).total_seconds()
            name = job.priority_class or group.default_class
            if run_s >= group.min_runtime_s and name in self.preemptible:
                nodes = tuple(holds)
                for node_id, here in holds.items():
                    self.candidates.setdefault(node_id, []).append(
                        Candidate(job.id, user, self.values[name], need, started, run_s, here, nodes))
