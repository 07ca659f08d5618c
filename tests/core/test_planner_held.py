"""Our running jobs' use beyond their declaration in the planner (docs/planner.md, Snapshot, `nodes[].held`):
`nodes[].held` is kept free like outside load and named in the waiting messages by job and user;
`running[].uses` is what their users are charged, per resource the larger of it and the
declaration."""

from __future__ import annotations

import pytest

from job.core.planner import Snapshot, plan
from tests.core.planner_helpers import run, snapshot

# Greedy's job 42 declares CPU 0.5 on a and holds three 1-CPU actors: two on a, one on b.
NODES = {"a": {"CPU": 2}, "b": {"CPU": 2}}
GREEDY = {"id": "42", "user": "greedy", "node": "a", "resources": {"CPU": 0.5}, "uses": {"CPU": 3.5}}
HELD = {"a": [{"job": "42", "resources": {"CPU": 1.5}}], "b": [{"job": "42", "resources": {"CPU": 1}}]}
NAMED = "held by job 42 of greedy, which uses CPU 3.5 and declared CPU 0.5"


def document(pending, held=HELD, outside=None, running=(GREEDY,), **group) -> dict:
    doc = snapshot("fifo", "dispersed", nodes=NODES, pending=pending, outside=outside, **group)
    for node in doc["nodes"]:
        if node["id"] in held:
            node["held"] = held[node["id"]]
    doc["running"] = [dict(job) for job in running]
    return doc


def waiting(doc: dict) -> dict[str, tuple[str, str]]:
    return {w["job"]: (w["reason"], w["message"]) for w in plan(Snapshot.model_validate(doc)).waiting}


def test_what_a_job_holds_beyond_its_declaration_is_kept_free():
    # a: 2 - 0.5 declared - 1.5 held = 0; b: 2 - 1 held = 1.
    placements, reasons, _ = run(document([("1", "modest", {"CPU": 1}), ("2", "modest", {"CPU": 1})]))
    assert placements == [("1", "b")] and reasons == {"2": "Resources"}


def test_a_job_held_back_by_another_jobs_use_names_it_and_its_user():
    assert waiting(document([("1", "modest", {"CPU": 1.5})])) == {"1": (
        "Resources", f"needs CPU 1.5; the most free on any node is CPU 1 ({NAMED}, over by CPU 1.5 on node a, CPU 1 on node b)")}


def test_our_jobs_are_named_before_outside_load_and_each_only_where_it_is_in_the_way():
    doc = document([("1", "modest", {"CPU": 1.5})], held={"a": HELD["a"]}, outside={"b": {"CPU": 1}})
    assert waiting(doc)["1"][1] == ("needs CPU 1.5; the most free on any node is CPU 1 "
                                    f"({NAMED}, over by CPU 1.5 on node a; work outside the queue holds CPU 1 on node b)")


def test_not_named_where_the_job_would_not_fit_even_without_it():
    assert waiting(document([("1", "modest", {"CPU": 3})]))["1"][0] == "Unschedulable"
    # b could take CPU 2 but for job 42; a could not (its declared 0.5 stays).
    assert waiting(document([("1", "modest", {"CPU": 2})]))["1"][1] == (
        f"needs CPU 2; the most free on any node is CPU 1 ({NAMED}, over by CPU 1 on node b)")


def test_held_counts_at_most_what_outside_load_left_of_the_node():
    doc = document([("1", "modest", {"CPU": 1})], held={"b": [{"job": "42", "resources": {"CPU": 5}}]},
                   outside={"b": {"CPU": 1.5}})
    # b: 2 - 1.5 outside - at most 0.5 held is 0; a: 2 - 0.5 declared leaves 1.5.
    assert run(doc)[0] == [("1", "a")]


@pytest.mark.parametrize("uses, first", [
    # Charged only its declaration, greedy's share (0.5 of 4) is below modest's (1 of 4).
    ({}, "g"),
    # Charged its use, greedy's 3.5 of 4 puts it after modest.
    ({"CPU": 3.5}, "m"),
    # The larger per resource: a use below the declaration charges the declaration.
    ({"CPU": 0.25}, "g"),
])
def test_a_running_jobs_user_is_charged_the_larger_of_declared_and_used(uses, first):
    running = [{**GREEDY, "uses": uses}, {"id": "7", "user": "modest", "node": "b", "resources": {"CPU": 1}}]
    doc = document([("g", "greedy", {"CPU": 0.5}), ("m", "modest", {"CPU": 0.5})], held={}, running=running)
    doc["group"]["policy"] = "drf"
    doc["nodes"] = [{"id": "a", "resources": {"CPU": 2}}, {"id": "b", "resources": {"CPU": 2}}]
    assert run(doc)[0][0][0] == first
