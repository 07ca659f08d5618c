"""Accounts in the planner: fair share down the tree, account limits, reclaim across teams, and a
tree of one level planning exactly as the flat group."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st
from planner_helpers import PROPERTY, snapshot, snapshots
from preemption_helpers import CLASSES, ago, check_reclaim_never_ping_pongs, preempting_snapshots
from pydantic import ValidationError

from job.core.planner import Snapshot, plan
from job.core.planner.snapshot import describe_error


def placed_users(accounts: dict, users: dict, cpus: int, policy: str = "drf", jobs: int = 8, **group) -> list[str]:
    """The users of the placements in order, on one node of `cpus` CPUs, each user of `users`
    but those marked idle having `jobs` pending jobs of one CPU."""
    pending = [(f"{user}-{i}", user, {"CPU": 1}) for user, spec in users.items() if not spec.get("idle")
               for i in range(jobs)]
    users = {user: {key: value for key, value in spec.items() if key != "idle"} for user, spec in users.items()}
    document = snapshot(policy, nodes={"n": {"CPU": cpus}}, pending=pending, users=users, **group)
    document["accounts"] = accounts
    result = plan(Snapshot.model_validate(document)).document()
    return [placement["job"].split("-")[0] for placement in result["placements"]]


def member(account: str | None, shares: float = 1, usage: float = 0) -> dict:
    return {"account": account, "shares": shares, "usage": usage}


TEAMS = {"A": {}, "B": {}}
NESTED = {"A": {}, "B": {}, "A1": {"parent": "A"}, "A2": {"parent": "A"}}

# (name, accounts, users, CPUs, placed users in order)
ORDER = [
    ("two levels: two teams share half and half, whatever their sizes",
     TEAMS, {"a1": member("A"), "a2": member("A"), "a3": member("A"), "b": member("B")}, 8,
     ["a1", "b", "a2", "b", "a3", "b", "a1", "b"]),
    ("three levels: each level shares among its children",
     NESTED, {"x": member("A1"), "y": member("A1"), "z": member("A2"), "b": member("B")}, 8,
     ["x", "b", "z", "b", "y", "b", "z", "b"]),
    ("an inactive sibling leaves its part to the active ones",
     {**TEAMS, "C": {}}, {"a": member("A"), "b": member("B"), "c": {**member("C"), "idle": True}}, 6,
     ["a", "b", "a", "b", "a", "b"]),
    ("shares weigh the teams",
     {"A": {"shares": 2}, "B": {}}, {"a": member("A"), "b": member("B")}, 6,
     ["a", "b", "a", "a", "b", "a"]),
    ("a user's shares weigh it within its team only",
     TEAMS, {"a1": member("A", shares=3), "a2": member("A"), "b": member("B")}, 8,
     ["a1", "b", "a2", "b", "a1", "b", "a1", "b"]),
    ("a user in the root competes with the top accounts",
     TEAMS, {"a1": member("A"), "a2": member("A"), "r": member(None)}, 4,
     ["a1", "r", "a2", "r"]),
]


@pytest.mark.parametrize(("accounts", "users", "cpus", "expected"), [case[1:] for case in ORDER],
                         ids=[case[0] for case in ORDER])
def test_the_next_job_comes_from_the_lowest_scoring_path(accounts, users, cpus, expected):
    for policy in ("drf", "fairshare"):
        assert placed_users(accounts, users, cpus, policy, half_life_s=3600) == expected


def test_under_fairshare_a_team_remembers_the_usage_of_all_its_users():
    # Each of A's users has used less than b, A as a whole more: the flat group starts a1 first,
    # the tree b.
    users = {"a1": member("A", usage=3600), "a2": member("A", usage=3600), "b": member("B", usage=5000)}
    assert placed_users({}, {name: {**spec, "account": None} for name, spec in users.items()}, 1, "fairshare",
                        half_life_s=3600) == ["a1"]
    assert placed_users(TEAMS, users, 1, "fairshare", half_life_s=3600) == ["b"]
    # drf has no memory: the tie goes by name, A first.
    assert placed_users(TEAMS, users, 1, "drf") == ["a1"]


def test_running_jobs_count_in_their_teams_score():
    users = {"a1": member("A"), "a2": member("A"), "b": member("B")}
    document = snapshot("drf", nodes={"n": {"CPU": 4}}, running=[("r", "a1", "n", {"CPU": 2})],
                        pending=[("1", "a2", {"CPU": 1}), ("2", "b", {"CPU": 1}), ("3", "b", {"CPU": 1})], users=users)
    document["accounts"] = TEAMS
    result = plan(Snapshot.model_validate(document)).document()
    # A holds half the node already: B's jobs go first, then a2's (the tie at 1/2 by name: A).
    assert [p["job"] for p in result["placements"]] == ["2", "3"]


LIMITS = [
    ("an account's most running jobs count its subtree's",
     {"A": {"max_running": 3}, "A1": {"parent": "A"}}, {"x": member("A1"), "y": member("A")},
     "AccountJobLimit", "account A has 3 jobs running or starting, the most allowed is 3"),
    ("an account's most resources count its subtree's",
     {"A": {"max_resources": {"CPU": 2}}, "A1": {"parent": "A"}}, {"x": member("A1"), "y": member("A")},
     "AccountResourceLimit", "needs CPU 1; account A already uses CPU 2 of at most 2"),
    ("a child's limit holds within its parent's",
     {"A": {}, "A1": {"parent": "A", "max_running": 1}}, {"x": member("A1"), "y": member("A1")},
     "AccountJobLimit", "account A1 has 1 jobs running or starting, the most allowed is 1"),
]


@pytest.mark.parametrize(("accounts", "users", "reason", "message"), [case[1:] for case in LIMITS],
                         ids=[case[0] for case in LIMITS])
def test_account_limits_hold_jobs_back_with_their_own_reason(accounts, users, reason, message):
    running = [("r", "x", "n", {"CPU": 1})]
    pending = [(f"p{i}", user, {"CPU": 1}) for i, user in enumerate(["x", "y", "x", "y"])]
    document = snapshot("drf", nodes={"n": {"CPU": 16}}, running=running, pending=pending, users=users)
    document["accounts"] = accounts
    result = plan(Snapshot.model_validate(document)).document()
    most = accounts.get("A1", {}).get("max_running") or accounts["A"].get("max_running") or 2
    assert len(result["placements"]) == most - 1
    waiting = {(w["reason"], w["message"]) for w in result["waiting"]}
    assert waiting == {(reason, message)}


def test_user_limits_come_before_account_limits():
    users = {"x": {"account": "A", "max_running": 1}}
    document = snapshot("drf", nodes={"n": {"CPU": 4}}, running=[("r", "x", "n", {"CPU": 1})],
                        pending=[("1", "x", {"CPU": 1})], users=users)
    document["accounts"] = {"A": {"max_running": 1}}
    assert plan(Snapshot.model_validate(document)).document()["waiting"][0]["reason"] == "UserJobLimit"


BAD = [
    ({"A": {"shares": 0}}, {}, "accounts.A.shares: Input should be greater than 0"),
    ({"A": {"shares": -1}}, {}, "accounts.A.shares: Input should be greater than 0"),
    ({"A": {"parent": "Z"}}, {}, "accounts.A.parent: 'Z' is not one of accounts"),
    ({"A": {"parent": "B"}, "B": {"parent": "A"}}, {}, "accounts.A.parent: a cycle through 'A'"),
    ({"A": {"parent": "A"}}, {}, "accounts.A.parent: a cycle through 'A'"),
    ({"A": {}}, {"u": {"account": "B"}}, "users.u.account: 'B' is not one of accounts"),
    ({"A": {"share": 2}}, {}, "accounts.A.share: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("accounts", "users", "message"), BAD)
def test_a_bad_tree_is_refused_naming_the_field(accounts, users, message):
    document = snapshot("drf", nodes={"n": {"CPU": 1}}, users=users)
    document["accounts"] = accounts
    with pytest.raises(ValidationError) as caught:
        Snapshot.model_validate(document)
    assert describe_error(caught.value) == message


def _every_user(document: dict) -> dict:
    users = {job["user"] for job in document["running"] + document["pending"]} | set(document["users"])
    return {user: dict(document["users"].get(user, {})) for user in sorted(users)}


@PROPERTY
@given(snapshots(), st.sampled_from([0.5, 1, 3]))
def test_a_tree_of_one_level_plans_exactly_as_the_flat_group(document, team_shares):
    """Every user in one team (of any shares), or every user alone in a team of its own with its
    own shares: the same plan, byte for byte, as without accounts."""
    flat = plan(Snapshot.model_validate(document)).document()
    one_team = copy.deepcopy(document)
    one_team["users"] = {name: {**spec, "account": "team"} for name, spec in _every_user(document).items()}
    one_team["accounts"] = {"team": {"shares": team_shares}}
    assert plan(Snapshot.model_validate(one_team)).document() == flat
    alone = copy.deepcopy(document)
    alone["users"] = {name: {**spec, "account": name} for name, spec in _every_user(document).items()}
    alone["accounts"] = {name: {"shares": spec.get("shares", 1)} for name, spec in alone["users"].items()}
    assert plan(Snapshot.model_validate(alone)).document() == flat


@PROPERTY
@given(preempting_snapshots())
def test_preemption_in_one_team_decides_as_the_flat_group(document):
    flat = plan(Snapshot.model_validate(document)).document()
    document["users"] = {name: {**spec, "account": "team"} for name, spec in _every_user(document).items()}
    document["accounts"] = {"team": {}}
    assert plan(Snapshot.model_validate(document)).document() == flat


def _reclaim(users: dict, accounts: dict) -> dict:
    """One node of 6 CPUs, three jobs of 2 CPUs running (an hour old), a job of b's of 2 CPUs
    waiting; fairshare reclaim under drf."""
    document = {
        "group": {"policy": "drf", "selector": "dispersed", "preemption": "fairshare", "min_runtime_s": 600},
        "now": ago(0),
        "nodes": [{"id": "n", "resources": {"CPU": 6}}],
        "running": [{"id": f"r{i}", "user": user, "node": "n", "resources": {"CPU": 2}, "started_at": ago(60)}
                    for i, user in enumerate(["a1", "a2", "a3"])],
        "pending": [{"id": "p", "user": "b", "resources": {"CPU": 2}}],
        "users": users, "accounts": accounts,
    }
    return plan(Snapshot.model_validate(document)).document()


def test_reclaim_across_teams_compares_the_teams():
    team = {"a1": member("A"), "a2": member("A"), "a3": member("A"), "b": member("B")}
    # B with the job: 2/6, below A without one of its jobs, 4/6: b reclaims from A, the most
    # recently started of the highest-scoring side (ties by id).
    assert _reclaim(team, TEAMS)["preemptions"] == [{"job": "p", "node": "n", "victims": ["r0"]}]
    # Flat, b with the job (2/6) is not below any other user without its only job (0).
    assert _reclaim({}, {})["preemptions"] == []
    # Within one team the users are compared, as flat.
    same = {name: member("A") for name in team}
    assert _reclaim(same, TEAMS)["preemptions"] == []
    # B's shares a third of A's: 2/6 / 1/3 = 1 is not below 4/6.
    assert _reclaim(team, {"A": {"shares": 3}, "B": {}})["preemptions"] == []


TEAM_USERS = ["a1", "a2", "a3", "b1", "c1"]


@st.composite
def team_reclaims(draw):
    """Snapshots where reclaim across teams is common: one class, users of several teams (or of
    the root) holding nodes, others waiting."""
    accounts = draw(st.sampled_from([{"A": {}, "B": {}}, {"A": {"shares": 2}, "B": {}},
                                     {"A": {}, "B": {}, "A1": {"parent": "A"}}, {"A": {}, "B": {"shares": 3}, "C": {}}]))
    nodes = {f"n{i}": {"CPU": draw(st.sampled_from([2, 4]))} for i in range(draw(st.integers(1, 3)))}
    # Every node full: a waiting job fits only by reclaim.
    running = []
    for node, resources in nodes.items():
        free = resources["CPU"]
        while free > 0:
            cpus = min(free, draw(st.sampled_from([1, 2])))
            free -= cpus
            running.append({"id": f"r{len(running)}", "user": draw(st.sampled_from(TEAM_USERS)), "node": node,
                            "resources": {"CPU": cpus}, "class": "low", "started_at": ago(draw(st.integers(1, 60)))})
    pending = [{"id": f"p{i}", "user": draw(st.sampled_from(TEAM_USERS)), "resources": {"CPU": draw(st.sampled_from([1, 2]))},
                "class": "low", "submitted_at": ago(draw(st.integers(0, 50)))} for i in range(draw(st.integers(1, 5)))]
    users = {user: {"account": draw(st.sampled_from([None, *accounts])), "shares": draw(st.sampled_from([1, 2])),
                    "usage": draw(st.sampled_from([0, 900]))} for user in TEAM_USERS}
    return {
        "group": {"policy": draw(st.sampled_from(["drf", "fairshare"])), "half_life_s": 3600, "selector": "dispersed",
                  "preemption": "fairshare", "priority_classes": CLASSES, "default_class": "low",
                  "min_runtime_s": 0, "max_preemptions": draw(st.integers(1, 4))},
        "now": ago(0), "nodes": [{"id": ident, "resources": resources} for ident, resources in nodes.items()],
        "running": running, "pending": pending, "users": users, "accounts": accounts,
    }


@PROPERTY
@given(team_reclaims())
def test_reclaim_across_teams_never_ping_pongs(document):
    check_reclaim_never_ping_pongs(document)
