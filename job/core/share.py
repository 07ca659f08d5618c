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
                        (lowest goes first)"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from job.core.group import GroupConfig
from job.core.jobs import ActiveJob
from job.core.planner.picture import user_score
from job.core.planner.rules import POLICIES, memory
from job.core.resources import Resources, dominant_share, footprint


@dataclass
class UserShare:
    group: str
    user: str
    shares: float
    usage: float
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


def entitlements(shares: Mapping[str, float], active: Iterable[str]) -> dict[str, float]:
    """Each user's entitlement: its shares over the sum of the active users' shares; 0 if not active."""
    busy = set(active)
    total = sum(shares[user] for user in busy if user in shares)
    return {user: (amount / total if user in busy and total > 0 else 0.0) for user, amount in shares.items()}


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
                 totals: Mapping[str, int]) -> list[UserShare]:
    """One group's users, by name. `group`: name, policy, half_life_s; `users`: every user's
    shares; `usage`: decayed usage in this group; `pending`: (user, reason, jobs); `active`:
    (user, job) per active job, a row with its `resources` and `bundles`, its whole footprint
    counted; `totals`: the group's units per resource."""
    rows: dict[str, UserShare] = {}

    def row(user: str) -> UserShare:
        if user not in rows:
            rows[user] = UserShare(group["name"], user, users.get(user, 1.0), usage.get(user, 0.0))
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
    shares = {user: entry.shares for user, entry in rows.items()}
    normal_shares = normalized(shares)
    entitled = entitlements(shares, [user for user, entry in rows.items() if entry.active])
    normal_usage = normalized({user: entry.usage for user, entry in rows.items()})
    for user, entry in rows.items():
        entry.held = dict(held.get(user, {}))
        entry.normalized_shares = normal_shares[user]
        entry.entitlement = entitled[user]
        entry.normalized_usage = normal_usage[user]
        entry.dominant_share = dominant_share(entry.held, totals)
        entry.score = policy_score(group["policy"], entry.dominant_share, entry.usage, group["half_life_s"],
                                   entry.shares)
    return [rows[user] for user in sorted(rows)]


def placement_figures(group: GroupConfig, members: Iterable[Mapping], active: Iterable[ActiveJob],
                      totals: Mapping[str, int], placements: Iterable[tuple[int, str]], pending: Iterable
                      ) -> dict[int, dict]:
    """What put each placed job first, in the plan's order: under drf and fairshare its user's
    shares, usage, dominant share and score just before the planner took it (the jobs placed
    earlier in the plan counted, as the planner counts them); under fifo and lifo its priority and
    submission time; always its class (classes go first, highest value first). `placements`:
    Decisions.placements; `pending`: the tick's PendingRow-like rows (id, user_name, resources and
    bundles as JSON text, priority, submitted_at). A job counts its whole footprint, bundles too."""
    placements = list(placements)
    placed = {job_id for job_id, _ in placements}
    rows = {row.id: row for row in pending if row.id in placed}
    people = {member["name"]: member for member in members}
    held: dict[str, Resources] = defaultdict(Resources)
    for job in active:
        held[job.user_name] += footprint({"resources": job.resources, "bundles": job.bundles})
    requests: dict[tuple[str, str | None], Resources] = {}
    figures = {}
    for job_id, node in placements:
        row = rows[job_id]
        figure = {"policy": group.policy, "class": group.job_class(row.priority_class),
                  "node": node, "priority": row.priority, "submitted_at": row.submitted_at.isoformat()}
        if POLICIES[group.policy].scores_users:
            person = people.get(row.user_name, {})
            shares, usage = person.get("shares", 1.0), person.get("usage", 0.0)
            dominant = dominant_share(held[row.user_name], totals)
            figure.update(shares=shares, usage=round(usage, 3), dominant_share=round(dominant, 6),
                          score=round(policy_score(group.policy, dominant, usage, group.half_life_s, shares), 6))
        figures[row.id] = figure
        written = (row.resources, row.bundles)
        if written not in requests:
            requests[written] = footprint({"resources": json.loads(written[0]),
                                           "bundles": json.loads(written[1]) if written[1] else None})
        held[row.user_name] += requests[written]
    return figures
