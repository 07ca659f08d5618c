"""The account tree as people read it (core/accounts.py): the walk's order, entitlements down the
tree, and the share report's account figures (core/share.py account_shares)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from job.core.accounts import entitlements, walk
from job.core.share import account_shares, group_shares

PARENTS = {"physics": None, "theory": "physics", "bio": None, "lab": "bio"}


def test_the_walk_is_depth_first_accounts_before_users_children_by_name():
    members = {"zoe": None, "alice": "theory", "bob": "physics", "carol": "lab", "ann": None}
    assert walk(PARENTS, members) == [
        (0, "bio", "account"), (1, "lab", "account"), (2, "carol", "user"),
        (0, "physics", "account"), (1, "theory", "account"), (2, "alice", "user"), (1, "bob", "user"),
        (0, "ann", "user"), (0, "zoe", "user")]
    # A parent not read counts as the root: nothing is lost.
    assert walk({"theory": "physics"}) == [(0, "theory", "account")]


ENTITLED = [
    ("two teams of one share, one of three users and one of one",
     {"A": (None, 1), "B": (None, 1)}, {"a1": ("A", 1), "a2": ("A", 1), "a3": ("A", 1), "b": ("B", 1)},
     {"a1", "a2", "a3", "b"}, {"a1": 1 / 6, "a2": 1 / 6, "a3": 1 / 6, "b": 1 / 2}, {"A": 1 / 2, "B": 1 / 2}),
    ("an idle team leaves its part to the others",
     {"A": (None, 1), "B": (None, 3)}, {"a": ("A", 1), "b": ("B", 1)}, {"a"}, {"a": 1.0, "b": 0.0}, {"A": 1.0, "B": 0.0}),
    ("three levels, and a user in the root beside the teams",
     {"A": (None, 2), "A1": ("A", 1), "A2": ("A", 3)}, {"x": ("A1", 1), "y": ("A2", 1), "r": (None, 2)},
     {"x", "y", "r"}, {"x": 0.125, "y": 0.375, "r": 0.5}, {"A": 0.5, "A1": 0.125, "A2": 0.375}),
]


@pytest.mark.parametrize(("accounts", "users", "active", "people", "teams"), [case[1:] for case in ENTITLED],
                         ids=[case[0] for case in ENTITLED])
def test_entitlements_go_down_the_tree(accounts, users, active, people, teams):
    got_people, got_teams = entitlements(accounts, users, active)
    assert got_people == pytest.approx(people) and got_teams == pytest.approx(teams)


@st.composite
def trees(draw):
    names = [f"t{i}" for i in range(draw(st.integers(0, 6)))]
    # A parent is always an earlier account: no cycle.
    accounts = {name: (draw(st.sampled_from([None, *names[:index]])), draw(st.sampled_from([0.5, 1, 3])))
                for index, name in enumerate(names)}
    users = {f"u{i}": (draw(st.sampled_from([None, *names])), draw(st.sampled_from([1, 2])))
             for i in range(draw(st.integers(1, 8)))}
    return accounts, users, draw(st.sets(st.sampled_from(sorted(users))))


@given(trees())
def test_the_active_users_get_the_whole_group_and_each_account_its_childrens_sum(tree):
    accounts, users, active = tree
    people, teams = entitlements(accounts, users, active)
    assert math.isclose(sum(people.values()), 1.0 if active else 0.0, abs_tol=1e-9)
    for name in accounts:
        below = sum(people[u] for u, (a, _) in users.items() if a == name)
        below += sum(teams[t] for t, (p, _) in accounts.items() if p == name)
        assert math.isclose(teams[name], below, abs_tol=1e-9)


def test_account_figures_are_their_subtrees():
    group = {"name": "g", "policy": "fairshare", "half_life_s": 3600}
    totals = {"CPU": 80_000}
    members = {"alice": "theory", "bob": "physics", "carol": "bio"}
    tree = {"physics": (None, 2.0), "theory": ("physics", 1.0), "bio": (None, 1.0), "idle": (None, 1.0)}
    active = [("alice", {"resources": {"CPU": 2}}), ("bob", {"resources": {"CPU": 2}}), ("carol", {"resources": {"CPU": 4}})]
    users = group_shares(group, {"alice": 1.0, "bob": 1.0, "carol": 1.0}, {"alice": 100.0, "bob": 50.0, "carol": 30.0},
                         [("alice", "Resources", 3)], active, totals, members, tree)
    teams = {row.account: row for row in account_shares(group, users, tree, totals)}
    # Only the accounts above the group's users, in the tree's order.
    assert list(teams) == ["bio", "physics", "theory"]
    physics, theory = teams["physics"], teams["theory"]
    assert (physics.running, physics.pending, physics.usage, physics.held) == (2, 3, 150.0, {"CPU": 40_000})
    assert physics.dominant_share == 0.5 and theory.dominant_share == 0.25 and theory.depth == 1
    assert physics.score == pytest.approx((0.5 + 150 * math.log(2) / 3600) / 2)
    # physics (2) and bio (1) are the root's children: 2/3 and 1/3; theory and bob split physics's part.
    assert physics.entitlement == pytest.approx(2 / 3) and theory.entitlement == pytest.approx(1 / 3)
    assert physics.normalized_shares == pytest.approx(2 / 3) and physics.normalized_usage == pytest.approx(150 / 180)
    by_user = {row.user: row for row in users}
    assert by_user["bob"].entitlement == pytest.approx(1 / 3) and by_user["bob"].normalized_shares == pytest.approx(0.5)
    # bob beside theory (usage 100): 50 of 150.
    assert by_user["bob"].normalized_usage == pytest.approx(1 / 3) and by_user["alice"].account == "theory"
