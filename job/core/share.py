"""The fair-share report (`python -m job share`, the metrics and the status page): per group and
user, what the policy sees and what each user is entitled to. Pure: it takes what the store read.

Definitions (docs/observability.md), for a user u of a group, where the group's users are those with
jobs pending or active there, or with usage there, and its active users those with jobs pending or
active:

    normalized shares   shares(u) / the sum of shares over the group's users
    entitlement         shares(u) / the sum of shares over the active users, for an active user; 0
                        for the others: the part of the group u would get if every user with jobs
                        were busy (as sshare's normalized shares among siblings that have work)
    normalized usage    usage(u) / the sum of usage over the group's users (0 when none has any)
    dominant share      max over resources of what u's active jobs hold / the group's total
    score               the policy's: (dominant share + usage · ln 2 / half life) / shares under
                        fairshare, dominant share / shares under drf, none under fifo and lifo
                        (lowest goes first)

With accounts (docs/planner.md, "Accounts") the same figures are given per account, of its
subtree: its usage the sum of its users', its dominant share that of what their jobs hold
together. Normalized shares and usage are then among siblings (the users and accounts of one
parent; every user is a sibling of every other without accounts), and the entitlement goes down
the tree: at each level the shares over those of the active siblings, times the parent's part."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from job.core.accounts import entitlements as tree_entitlements
from job.core.accounts import walk
from job.core.group import GroupConfig
from job.core.job import ActiveJob
from job.core.members import Member
from job.core.planner.picture import user_score
from job.core.planner.rules import POLICIES, memory
from job.core.resources import Resources, dominant_share, footprint


@dataclass
class UserShare:
    group: str
    user: str
    shares: float
    usage: float
    # Its account; None: the root.
    account: str | None = None
    running: int = 0
    pending: int = 0
    # Units per resource held by the user's active jobs.
    held: dict[str, int] = field(default_factory=dict)
    # Waiting reason -> pending jobs.
    waiting: Counter = field(default_factory=Counter)
    normalized_shares: float = 0.0
    normalized_usage: float = 0.0
    entitlement: float = 0.0
    dominant_share: float = 0.0
    score: float | None = None

    @property
    def active(self) -> bool:
        return self.running > 0 or self.pending > 0


@dataclass
class AccountShare:
    """An account's figures in a group: those of its subtree's users together."""

    group: str
    account: str
    parent: str | None
    # Its depth in the tree: 0 for a top account.
    depth: int
    shares: float
    usage: float = 0.0
    running: int = 0
    pending: int = 0
    held: dict[str, int] = field(default_factory=dict)
    normalized_shares: float = 0.0
    normalized_usage: float = 0.0
    entitlement: float = 0.0
    dominant_share: float = 0.0
    score: float | None = None


def entitlements(shares: Mapping[str, float], active: Iterable[str]) -> dict[str, float]:
    """Each user's entitlement without accounts: its shares over the sum of the active users'
    shares; 0 if not active."""
    return tree_entitlements({}, {user: (None, amount) for user, amount in shares.items()},
                             [user for user in active if user in shares])[0]


def normalized(values: Mapping[str, float]) -> dict[str, float]:
    """Each value over their sum (0 for all when the sum is 0)."""
    total = sum(values.values())
    return {key: (value / total if total > 0 else 0.0) for key, value in values.items()}


def policy_score(policy: str, dominant: float, usage: float, half_life_s: float, shares: float) -> float | None:
    """The planner's score of a user (job/core/planner/picture.py UserState.score), or None when the
    policy orders jobs by time, not by user."""
    if not POLICIES[policy].scores_users:
        return None
    return user_score(dominant, memory(policy, usage, half_life_s), shares)


def totals_of(nodes: Iterable[Mapping]) -> dict[str, int]:
    """The group's total units per resource, from the nodes a tick recorded ({"resources": ...})."""
    return dict(Resources.total(Resources.of(node["resources"]) for node in nodes))


def group_shares(group: Mapping, users: Mapping[str, float], usage: Mapping[str, float],
                 pending: Iterable[tuple[str, str, int]], active: Iterable[tuple[str, Mapping[str, Any]]],
                 totals: Mapping[str, int], member_of: Mapping[str, str | None] | None = None,
                 accounts: Mapping[str, tuple[str | None, float]] | None = None) -> list[UserShare]:
    """One group's users, by name. `group`: name, policy, half_life_s; `users`: every user's
    shares; `usage`: decayed usage in this group; `pending`: (user, reason, jobs); `active`:
    (user, job) per active job, a row with its `resources` and `bundles`, its whole footprint
    counted; `totals`: the group's units per resource; `member_of`: each user's account (missing:
    the root), `accounts`: every account's (parent, shares)."""
    member_of, accounts = member_of or {}, accounts or {}
    rows: dict[str, UserShare] = {}

    def row(user: str) -> UserShare:
        if user not in rows:
            rows[user] = UserShare(group["name"], user, users.get(user, 1.0), usage.get(user, 0.0), member_of.get(user))
        return rows[user]

    for user, amount in usage.items():
        if amount > 0:
            row(user)
    for user, reason, count in pending:
        entry = row(user)
        entry.pending += count
        entry.waiting[reason] += count
    held: dict[str, Resources] = defaultdict(Resources)
    for user, job in active:
        row(user).running += 1
        held[user] += footprint(job)
    normal_shares = _among_siblings({user: (entry.account, entry.shares) for user, entry in rows.items()})
    entitled = tree_entitlements(accounts, {user: (entry.account, entry.shares) for user, entry in rows.items()},
                                 [user for user, entry in rows.items() if entry.active])[0]
    normal_usage = _among_siblings({user: (entry.account, entry.usage) for user, entry in rows.items()})
    for user, entry in rows.items():
        entry.held = dict(held.get(user, {}))
        entry.normalized_shares = normal_shares[user]
        entry.entitlement = entitled[user]
        entry.normalized_usage = normal_usage[user]
        entry.dominant_share = dominant_share(entry.held, totals)
        entry.score = policy_score(group["policy"], entry.dominant_share, entry.usage, group["half_life_s"],
                                   entry.shares)
    return [rows[user] for user in sorted(rows)]


def _among_siblings(values: Mapping[str, tuple[str | None, float]]) -> dict[str, float]:
    """Each value over the sum of its siblings' (those of one parent), 0 when that sum is 0.
    `values`: name -> (parent, value)."""
    sums: dict[str | None, float] = defaultdict(float)
    for parent, value in values.values():
        sums[parent] += value
    return {name: value / sums[parent] if sums[parent] > 0 else 0.0 for name, (parent, value) in values.items()}


def account_shares(group: Mapping, users: list[UserShare], accounts: Mapping[str, tuple[str | None, float]],
                   totals: Mapping[str, int]) -> list[AccountShare]:
    """The accounts above the group's users (those of `group_shares`), in the tree's order (depth
    first, children by name), each with its subtree's figures; the users' normalized shares and
    usage set again among their siblings, the accounts beside them included. `accounts`: every
    account's (parent, shares)."""
    present: set[str] = set()
    for user in users:
        at = user.account
        while at is not None and at not in present:
            present.add(at)
            at = accounts[at][0]
    rows = {name: AccountShare(group["name"], name, accounts[name][0], depth, accounts[name][1])
            for depth, name, _ in walk({name: accounts[name][0] for name in present})}
    held: dict[str, Resources] = defaultdict(Resources)
    for user in users:
        at = user.account
        while at is not None:
            entry = rows[at]
            entry.usage += user.usage
            entry.running += user.running
            entry.pending += user.pending
            held[at] += Resources(user.held.items())
            at = entry.parent
    entitled = tree_entitlements(accounts, {user.user: (user.account, user.shares) for user in users},
                                 [user.user for user in users if user.active])[1]
    siblings = {user.user: (user.account, user.shares) for user in users}
    used = {user.user: (user.account, user.usage) for user in users}
    for name, entry in rows.items():
        siblings[f"account {name}"] = (entry.parent, entry.shares)
        used[f"account {name}"] = (entry.parent, entry.usage)
    normal_shares, normal_usage = _among_siblings(siblings), _among_siblings(used)
    # A user's siblings are the accounts beside it too.
    for user in users:
        user.normalized_shares, user.normalized_usage = normal_shares[user.user], normal_usage[user.user]
    for name, entry in rows.items():
        entry.held = dict(held.get(name, {}))
        entry.normalized_shares = normal_shares[f"account {name}"]
        entry.normalized_usage = normal_usage[f"account {name}"]
        entry.entitlement = entitled.get(name, 0.0)
        entry.dominant_share = dominant_share(entry.held, totals)
        entry.score = policy_score(group["policy"], entry.dominant_share, entry.usage, group["half_life_s"], entry.shares)
    return list(rows.values())


def placement_figures(group: GroupConfig, members: Iterable[Member], active: Iterable[ActiveJob],
                      totals: Mapping[str, int], placements: Iterable[tuple[int, str]], pending: Iterable,
                      accounts: Mapping[str, Any] | None = None,
                      bundle_nodes: Mapping[int, list[str]] | None = None) -> dict[int, dict]:
    """What put each placed job first, in the plan's order: under drf and fairshare its user's
    shares, usage, dominant share and score just before the planner took it (the jobs placed
    earlier in the plan counted, as the planner counts them), and with accounts the same figures
    of each of its accounts from the top (`accounts`: the snapshot's, each with parent and
    shares; an account's usage is its members'); under fifo and lifo its priority and submission
    time; always its class (classes go first, highest value first). `placements`:
    Decisions.placements; `pending`: the tick's PendingRow-like rows (id, user_name, resources and
    bundles as JSON text, priority, submitted_at). A job counts its whole footprint, bundles too;
    one with bundles gives their planned nodes (`bundle_nodes`: Decisions.bundle_nodes)."""
    placements = list(placements)
    placed = {job_id for job_id, _ in placements}
    rows = {row.id: row for row in pending if row.id in placed}
    people = {member.name: member for member in members}
    levels = _Levels(people, accounts or {})
    held: dict[str, Resources] = defaultdict(Resources)
    for job in active:
        need = footprint({"resources": job.resources, "bundles": job.bundles})
        for key in levels.keys(job.user_name):
            held[key] += need
    requests: dict[tuple[str, str | None], Resources] = {}
    figures = {}
    for job_id, node in placements:
        row = rows[job_id]
        figure = {"policy": group.policy, "class": group.job_class(row.priority_class),
                  "node": node, "priority": row.priority, "submitted_at": row.submitted_at.isoformat()}
        if bundle_nodes and job_id in bundle_nodes:
            figure["bundle_nodes"] = bundle_nodes[job_id]
        if POLICIES[group.policy].scores_users:
            person = people.get(row.user_name)
            figure.update(_level(group, held[row.user_name], totals, person.shares if person else 1.0,
                                 person.usage if person else 0.0))
            if levels.keys(row.user_name)[1:]:
                figure["accounts"] = [{"account": key[1], **_level(group, held[key], totals, *levels.of(key[1]))}
                                      for key in levels.keys(row.user_name)[1:]]
        figures[row.id] = figure
        written = (row.resources, row.bundles)
        if written not in requests:
            requests[written] = footprint({"resources": json.loads(written[0]),
                                           "bundles": json.loads(written[1]) if written[1] else None})
        for key in levels.keys(row.user_name):
            held[key] += requests[written]
    return figures


def _level(group: GroupConfig, held: Resources, totals: Mapping[str, int], shares: float, usage: float) -> dict:
    # Of a policy that scores users only (the caller's check): policy_score's, never None.
    dominant = dominant_share(held, totals)
    return {"shares": shares, "usage": round(usage, 3), "dominant_share": round(dominant, 6),
            "score": round(user_score(dominant, memory(group.policy, usage, group.half_life_s), shares), 6)}


class _Levels:
    """Per user, the keys its jobs count under: its name, then ("account", name) for each of its
    accounts from the top; an account's shares and usage (its members' together)."""

    def __init__(self, people: Mapping[str, Member], accounts: Mapping[str, Any]):
        self.people, self.accounts = people, accounts
        self.paths: dict[str, list] = {}
        self.usage: dict[str, float] = defaultdict(float)
        for name, person in people.items():
            for key in self.keys(name)[1:]:
                self.usage[key[1]] += person.usage

    def keys(self, user: str) -> list:
        path = self.paths.get(user)
        if path is None:
            person = self.people.get(user)
            account = person.account if person else None
            chain = []
            while account is not None and account in self.accounts:
                chain.append(("account", account))
                account = self.accounts[account].parent
            path = self.paths[user] = [user, *chain[::-1]]
        return path

    def of(self, account: str) -> tuple[float, float]:
        return self.accounts[account].shares, self.usage[account]
