"""The fair-share report's figures (job/core/share.py), pure: entitlement, normalized shares and
usage, the policy's score, a group's rows, and the figures noted at a placement."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from job.core.group import GroupConfig
from job.core.job import ActiveJob, PendingRow
from job.core.members import Member
from job.core.planner.picture import UserState
from job.core.share import entitlements, group_shares, normalized, placement_figures, policy_score, totals_of

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("shares, active, expected", [
    ({"a": 1, "b": 1}, {"a", "b"}, {"a": 0.5, "b": 0.5}),
    ({"a": 1, "b": 3}, {"a", "b"}, {"a": 0.25, "b": 0.75}),
    # b has no job: a would get the whole group, b nothing.
    ({"a": 1, "b": 3}, {"a"}, {"a": 1.0, "b": 0.0}),
    ({"a": 2, "b": 1, "c": 1}, {"a", "c"}, {"a": 2 / 3, "b": 0.0, "c": 1 / 3}),
    ({"a": 1}, set(), {"a": 0.0}),
    ({}, set(), {}),
    # An active name without shares (not a user) counts for nothing.
    ({"a": 1}, {"a", "ghost"}, {"a": 1.0}),
])
def test_entitlement(shares, active, expected):
    got = entitlements(shares, active)
    assert got.keys() == expected.keys()
    for user, value in expected.items():
        assert got[user] == pytest.approx(value)


@pytest.mark.parametrize("values, expected", [
    ({"a": 1.0, "b": 3.0}, {"a": 0.25, "b": 0.75}),
    ({"a": 0.0, "b": 0.0}, {"a": 0.0, "b": 0.0}),
    ({"a": 5.0}, {"a": 1.0}),
])
def test_normalized(values, expected):
    assert normalized(values) == pytest.approx(expected)


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.floats(min_value=0.01, max_value=1e6), min_size=1),
       st.sets(st.sampled_from("abcdefgh")))
def test_the_active_users_entitlements_add_up_to_the_whole_group(shares, active):
    got = entitlements(shares, active)
    busy = active & shares.keys()
    assert math.isclose(sum(got.values()), 1.0 if busy else 0.0, abs_tol=1e-9)
    assert all(got[user] == 0 for user in shares.keys() - busy)
    # More shares, more entitlement, among the busy.
    for a in busy:
        for b in busy:
            if shares[a] > shares[b]:
                assert got[a] >= got[b]


@pytest.mark.parametrize("policy, dominant, usage, half_life, shares, expected", [
    ("fifo", 0.5, 10.0, 3600.0, 1.0, None),
    ("lifo", 0.5, 10.0, 3600.0, 1.0, None),
    ("drf", 0.5, 1000.0, 3600.0, 2.0, 0.25),  # drf remembers nothing
    ("fairshare", 0.5, 0.0, 3600.0, 2.0, 0.25),
    ("fairshare", 0.0, 3600.0, 3600.0, 1.0, math.log(2)),
    ("fairshare", 0.25, 3600.0, 0.0, 1.0, 0.25),  # a half life of 0 keeps no memory
])
def test_policy_score(policy, dominant, usage, half_life, shares, expected):
    assert policy_score(policy, dominant, usage, half_life, shares) == pytest.approx(expected)


@given(st.floats(0, 1), st.floats(0, 1e6), st.floats(1, 1e5), st.floats(0.1, 100))
def test_the_score_is_the_planners(dominant, usage, half_life, shares):
    from job.core.planner.rules import memory

    user = UserState("u", shares, memory("fairshare", usage, half_life), None, None, dominant=dominant)
    assert policy_score("fairshare", dominant, usage, half_life, shares) == pytest.approx(user.score())


def test_a_groups_rows():
    group = {"name": "gpu", "policy": "fairshare", "half_life_s": 3600.0}
    users = {"alice": 1.0, "bob": 3.0, "carol": 1.0, "dave": 1.0}
    usage = {"alice": 1800.0, "bob": 0.0, "carol": 600.0}
    pending = [("alice", "Resources", 3), ("alice", "Limit", 1), ("bob", "Resources", 2)]
    active = [("alice", {"resources": {"CPU": 2, "GPU": 1}}), ("bob", {"resources": {"CPU": 4}})]
    totals = totals_of([{"resources": {"CPU": 8, "GPU": 2}}, {"resources": {"CPU": 8}}])
    rows = {row.user: row for row in group_shares(group, users, usage, pending, active, totals)}
    # dave has no job and no usage: not a user of the group; carol has usage only.
    assert sorted(rows) == ["alice", "bob", "carol"]
    alice, bob, carol = rows["alice"], rows["bob"], rows["carol"]
    assert (alice.running, alice.pending, dict(alice.waiting)) == (1, 4, {"Resources": 3, "Limit": 1})
    assert alice.normalized_shares == pytest.approx(1 / 5) and bob.normalized_shares == pytest.approx(3 / 5)
    assert alice.entitlement == pytest.approx(1 / 4) and bob.entitlement == pytest.approx(3 / 4)
    assert carol.entitlement == 0 and not carol.active
    assert alice.normalized_usage == pytest.approx(0.75) and carol.normalized_usage == pytest.approx(0.25)
    assert alice.dominant_share == pytest.approx(0.5)  # 1 of 2 GPUs
    assert bob.dominant_share == pytest.approx(0.25)  # 4 of 16 CPUs
    assert alice.score == pytest.approx(0.5 + 1800 * math.log(2) / 3600)
    assert bob.score == pytest.approx(0.25 / 3)


def _pending(job_id: int, user: str, cpus: int, priority: int = 0) -> PendingRow:
    return PendingRow(job_id, user, json.dumps({"CPU": cpus}), "{}", priority, T0, None, "Queued", None)


def test_placement_figures_count_the_plans_earlier_placements():
    group = GroupConfig(name="g", clusters=["http://ray:8265"], policy="fairshare", half_life_s=3600.0)
    members = [Member("alice", 1.0, None, None, None, 0.0), Member("bob", 2.0, None, None, None, 3600.0)]
    active = [ActiveJob(id=9, user_name="bob", state="RUNNING", resources={"CPU": 2}, node="n2", attempt=1,
                        submission_id="s9")]
    pending = [_pending(1, "alice", 4), _pending(2, "alice", 4), _pending(3, "bob", 1)]
    placements = [(1, "n1"), (3, "n2"), (2, "n1")]
    figures = placement_figures(group, members, active, {"CPU": 8 * 10_000 * 2}, placements, pending)
    assert figures[1]["dominant_share"] == 0 and figures[1]["score"] == 0
    # bob: 2 of 16 CPUs held, and his memory.
    assert figures[3]["dominant_share"] == pytest.approx(2 / 16)
    assert figures[3]["score"] == pytest.approx((2 / 16 + math.log(2)) / 2, abs=1e-6)
    # alice's second job counts her first, placed earlier in the same plan.
    assert figures[2]["dominant_share"] == pytest.approx(4 / 16) and figures[2]["node"] == "n1"


def test_placement_figures_under_fifo_are_the_order_it_used():
    group = GroupConfig(name="g", clusters=["http://ray:8265"], policy="fifo", half_life_s=3600.0,
                        priority_classes=[{"name": "normal", "value": 0}, {"name": "high", "value": 1}],
                        default_class="normal")
    figures = placement_figures(group, [], [], {}, [(7, "n"), (8, "n")],
                                [_pending(7, "alice", 1, priority=5), _pending(8, "bob", 1)._replace(priority_class="high")])
    assert figures == {7: {"policy": "fifo", "class": "normal", "node": "n", "priority": 5, "submitted_at": T0.isoformat()},
                       8: {"policy": "fifo", "class": "high", "node": "n", "priority": 0, "submitted_at": T0.isoformat()}}
