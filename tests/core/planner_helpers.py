"""Helpers for the planner tests: short snapshot builders, and a reference planner written straight
from docs/planner.md (slow and obvious) that the real planner must agree with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from job.core.planner import Snapshot, plan
from job.core.resources import dominant_share, fits, to_units
from job.core.usage import usage_share

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
GIB = 2**30


def at(minutes: float) -> str:
    """A time `minutes` after NOW (negative: before), as snapshot text."""
    return (NOW + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def snapshot(policy="fifo", selector="dispersed", nodes=None, running=(), pending=(), users=None, state=None, outside=None,
             **group) -> dict:
    """A snapshot document. `nodes` maps id to resources, or to (resources, labels); `pending` items
    are (id, user, resources) or (id, user, resources, extra fields); `running` items are
    (id, user, node, resources); `outside` maps a node's id to what outside load holds there."""
    node_list = []
    for ident, spec in (nodes or {}).items():
        resources, labels = spec if isinstance(spec, tuple) else (spec, {})
        node_list.append({"id": ident, "resources": resources, "labels": labels,
                          **({"outside": outside[ident]} if outside and ident in outside else {})})
    jobs = []
    for item in pending:
        ident, user, resources, *extra = item
        jobs.append({"id": ident, "user": user, "resources": resources, **(extra[0] if extra else {})})
    return {
        "group": {"name": "g", "policy": policy, "selector": selector, **group},
        "now": NOW.isoformat(),
        "nodes": node_list,
        "running": [{"id": i, "user": u, "node": n, "resources": r} for i, u, n, r in running],
        "pending": jobs,
        "users": users or {},
        "state": state or {},
    }


def run(document: dict) -> tuple[list[tuple[str, str]], dict[str, str], dict]:
    """The plan as (placements as (job, node) pairs, {job: reason}, state)."""
    result = plan(Snapshot.model_validate(document)).model_dump(mode="json")
    return (
        [(p["job"], p["node"]) for p in result["placements"]],
        {w["job"]: w["reason"] for w in result["waiting"]},
        result["state"],
    )


def _units(amounts) -> dict[str, int]:
    return {r: to_units(a) for r, a in amounts.items() if to_units(a)}


def reference(document: dict) -> tuple[list[tuple[str, str]], dict[str, str], dict]:
    """What docs/planner.md says the plan is, computed the slow way: every choice scans everything."""
    return _Reference(Snapshot.model_validate(document)).plan()


class _Reference:
    """The reference planner's steps, each over the whole snapshot: what each node has free, what
    each user holds, and in which order the pending jobs are taken."""

    def __init__(self, snap: Snapshot):
        self.snap = snap
        self.group = snap.group
        self.priority = list(self.group.resource_priority)
        requested = sorted({r for job in snap.pending for r in job.resources} - set(self.priority))
        self.order = self.priority + requested
        self.nodes = sorted(snap.nodes, key=lambda n: n.id)
        self.total = {n.id: _units(n.resources) for n in self.nodes}
        # Outside load holds at most what the node has.
        self.free = {n.id: {r: a - min(to_units(n.outside.get(r, 0)), a) for r, a in self.total[n.id].items()}
                     for n in self.nodes}
        self.totals: dict[str, int] = {}
        for n in self.nodes:
            for r, a in self.total[n.id].items():
                self.totals[r] = self.totals.get(r, 0) + a
        self.used: dict[str, dict[str, int]] = {}
        self.count: dict[str, int] = {}
        self.next_index = dict((snap.state.get("selector.roundrobin") or {}).get("next_index", {}))
        self.take_running()

    def take_running(self):
        for job in self.snap.running:
            need = _units(job.resources)
            mine = self.used.setdefault(job.user, {})
            for r, a in need.items():
                mine[r] = mine.get(r, 0) + a
                if job.node in self.free:
                    self.free[job.node][r] = self.free[job.node].get(r, 0) - a
            self.count[job.user] = self.count.get(job.user, 0) + 1

    def limits(self, user):
        s = self.snap.users.get(user)
        max_running = s.max_running if s and s.max_running is not None else self.group.max_running_per_user
        max_res = s.max_resources if s and s.max_resources is not None else self.group.max_resources_per_user
        return max_running, None if max_res is None else {r: to_units(a) for r, a in max_res.items()}

    def score(self, user):
        s = self.snap.users.get(user)
        shares, usage = (s.shares, s.usage) if s else (1.0, 0.0)
        past = usage_share(usage, self.group.half_life_s) if self.group.policy == "fairshare" else 0.0
        return (dominant_share(self.used.get(user, {}), self.totals) + past) / shares

    def by_age(self):
        def age(pair):
            position, job = pair
            when = job.submitted_at
            return (-job.priority, when or datetime.min.replace(tzinfo=UTC), 0 if when else position, len(job.id), job.id)

        jobs = [job for _, job in sorted(enumerate(self.snap.pending), key=age)]
        if self.group.policy == "lifo":
            by_priority: dict[int, list] = {}
            for job in jobs:
                by_priority.setdefault(job.priority, []).append(job)
            jobs = [job for p in sorted(by_priority, reverse=True) for job in reversed(by_priority[p])]
        return jobs

    def in_order(self):
        jobs = self.by_age()
        if self.group.policy in ("fifo", "lifo"):
            yield from jobs
            return
        queues: dict[str, list] = {}
        for job in jobs:
            queues.setdefault(job.user, []).append(job)
        while queues:
            user = min(queues, key=lambda u: (self.score(u), u))
            yield queues[user].pop(0)
            if not queues[user]:
                del queues[user]

    def pool(self, job):
        labels = job.node_labels or {}
        return [n for n in self.nodes if all(n.labels.get(k) == v for k, v in labels.items())]

    def choose(self, job, need):
        candidates = [n for n in self.pool(job) if fits(need.items(), self.free[n.id])]
        if self.group.selector == "roundrobin":
            return self.next_in_ring(job, candidates)
        if not candidates:
            return None
        return self.best(need, candidates)

    def next_in_ring(self, job, candidates):
        ring = self.pool(job)
        key = ",".join(f"{k}={v}" for k, v in sorted((job.node_labels or {}).items()))
        start = self.next_index.get(key, 0) % len(ring)
        for step in range(len(ring)):
            position = (start + step) % len(ring)
            if ring[position] in candidates:
                self.next_index[key] = position + 1
                return ring[position]
        return None

    def best(self, need, candidates):
        total, free, order = self.total, self.free, self.order

        def extras(n):
            return sum(1 for r in self.priority if total[n.id].get(r, 0) > 0 and r not in need)

        vector = {
            "legacy": lambda n: tuple(-total[n.id].get(r, 0) for r in order),
            "dispersed": lambda n: tuple(-free[n.id].get(r, 0) for r in order),
            "concentrated": lambda n: tuple(free[n.id].get(r, 0) for r in order),
        }[self.group.selector]
        return min(candidates, key=lambda n: (extras(n), vector(n), n.id))

    def reason_to_wait(self, job, need, blocked):
        """Why `job` cannot be placed whatever is free, or None."""
        user = job.user
        max_running, max_res = self.limits(user)
        mine = self.used.setdefault(user, {})
        not_before = job.not_before
        if not any(fits(need.items(), self.total[n.id]) for n in self.pool(job)):
            return "Unschedulable"
        if not_before is not None and not_before > self.snap.now:
            return "NotBefore"
        if max_running is not None and self.count.get(user, 0) >= max_running:
            return "UserJobLimit"
        if max_res is not None and any(r in max_res and mine.get(r, 0) + a > max_res[r] for r, a in need.items()):
            return "UserResourceLimit"
        if blocked:
            return "Priority"
        return None

    def place(self, job, node, need):
        mine = self.used.setdefault(job.user, {})
        for r, a in need.items():
            self.free[node.id][r] -= a
            mine[r] = mine.get(r, 0) + a
        self.count[job.user] = self.count.get(job.user, 0) + 1

    def plan(self):
        placements, waiting, blocked = [], {}, False
        for job in self.in_order():
            need = _units(job.resources)
            reason = self.reason_to_wait(job, need, blocked)
            if reason is not None:
                waiting[job.id] = reason
                continue
            node = self.choose(job, need)
            if node is None:
                waiting[job.id] = "Resources"
                blocked = self.group.strict_order
                continue
            self.place(job, node, need)
            placements.append((job.id, node.id))
        roundrobin = self.group.selector == "roundrobin"
        state = {"selector.roundrobin": {"next_index": dict(sorted(self.next_index.items()))}} if roundrobin else {}
        return placements, waiting, state


# --- random snapshots, for the property tests ---------------------------------------------------

NODE_IDS = ["n1", "n2", "n3", "n4", "n5", "n10"]
USERS = ["ann", "bob", "cy"]

# Whole requests and options are drawn from short lists: one draw each keeps examples cheap.
REQUESTS = [
    {}, {"CPU": 1}, {"CPU": 0.5}, {"CPU": 2}, {"CPU": 3}, {"CPU": 4, "memory": 4 * GIB}, {"CPU": 1, "memory": 16 * GIB},
    {"GPU": 1}, {"GPU": 2, "CPU": 1}, {"memory": 2 * GIB}, {"CPU": 1, "licence": 1}, {"CPU": 8},
]
NODE_RESOURCES = [
    {"CPU": 4, "memory": 8 * GIB}, {"CPU": 8, "memory": 4 * GIB}, {"CPU": 2, "memory": 32 * GIB},
    {"CPU": 4, "memory": 16 * GIB, "GPU": 2}, {"CPU": 1, "GPU": 1}, {"CPU": 4, "licence": 2},
    {"CPU": 8, "memory": 32 * GIB, "GPU": 1},
]
LABELS = [{}, {}, {"zone": "a"}, {"zone": "b"}, {"zone": "a", "gpu": "yes"}]
# What work outside the queue holds on a node: on resources the node may or may not have, and more
# than any node has.
OUTSIDE = [{"CPU": 1}, {"CPU": 2}, {"CPU": 0.5, "memory": 4 * GIB}, {"CPU": 99}, {"GPU": 1}, {"memory": 64 * GIB}, {"licence": 1}]
JOB_OPTIONS = [
    {"priority": priority, "submitted_at": submitted, "not_before": not_before, "node_labels": labels}
    for priority in (0, 0, 1)
    for submitted in (None, at(-30), at(-30), at(-10))
    for not_before in (None, None, at(-5), at(5))
    for labels in ({}, {}, {}, {"zone": "a"}, {"gpu": "yes"})
]
USER_OPTIONS = [
    {"shares": shares, "usage": usage, **limits}
    for shares in (1, 1, 2)
    for usage in (0, 0, 1800, 7200)
    for limits in ({}, {}, {"max_running": 2}, {"max_resources": {"CPU": 4}})
]
GROUP_OPTIONS = [
    {"resource_priority": priority, "half_life_s": half_life, "strict_order": strict, "max_running_per_user": max_running,
     "max_resources_per_user": max_resources}
    for priority in (["GPU", "CPU", "memory"], ["CPU", "memory"], ["memory", "GPU", "CPU"])
    for half_life in (0, 3600)
    for strict in (False, True)
    for max_running in (None, None, 3)
    for max_resources in (None, None, {"GPU": 1})
]


@st.composite
def snapshots(draw, policy=None, loaded=False):
    """A snapshot; `loaded`: the first node always has outside load."""
    node_ids = draw(st.lists(st.sampled_from(NODE_IDS), min_size=1, max_size=5, unique=True))
    nodes = {ident: (draw(st.sampled_from(NODE_RESOURCES)), draw(st.sampled_from(LABELS))) for ident in node_ids}
    outside = {ident: draw(st.sampled_from(OUTSIDE if loaded and ident == node_ids[0] else [{}, {}, *OUTSIDE]))
               for ident in node_ids}
    running = [
        (f"r{i}", draw(st.sampled_from(USERS)), draw(st.sampled_from([*node_ids, "gone"])), draw(st.sampled_from(REQUESTS)))
        for i in range(draw(st.integers(0, 4)))
    ]
    # Ids around 9 and 10: "10" must come after "9".
    ids = draw(st.lists(st.integers(1, 12), max_size=10, unique=True))
    pending = [
        (str(ident), draw(st.sampled_from(USERS)), draw(st.sampled_from(REQUESTS)), draw(st.sampled_from(JOB_OPTIONS)))
        for ident in ids
    ]
    users = {name: draw(st.sampled_from(USER_OPTIONS)) for name in draw(st.lists(st.sampled_from(USERS), unique=True))}
    state = draw(st.sampled_from([{}, {"selector.roundrobin": {"next_index": {"": 3, "zone=a": 1}}}]))
    return snapshot(
        policy=policy or draw(st.sampled_from(["fifo", "lifo", "drf", "fairshare"])),
        selector=draw(st.sampled_from(["legacy", "concentrated", "dispersed", "roundrobin"])),
        nodes=nodes,
        running=running,
        pending=pending,
        users=users,
        state=state,
        outside=outside,
        **draw(st.sampled_from(GROUP_OPTIONS)),
    )


# Modest counts: the planner tests stay well under a minute on two shared cores.
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def said_as_waiting(decided) -> bool:
    """Whether the plan's grouped records (Plan.said) are its waiting records, each once, under its
    own reason and message."""
    grouped = [(record["job"], reason, message) for reason, message, records in decided.said for record in records]
    return sorted(grouped) == sorted((r["job"], r["reason"], r["message"]) for r in decided.waiting)
