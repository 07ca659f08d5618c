"""The planner end to end: reasons, limits, strict order, messages, the worked example, the
command, and the module boundary."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from planner_helpers import GIB, at, run, snapshot

from job.cli import main
from job.cli import plan as plan_cli
from job.core.planner import Snapshot, plan
from job.core.resources import Resources, describe, dominant_share, format_amount, to_units

ROOT = Path(__file__).resolve().parents[2]
# The worked example of the planner's JSON interface: a snapshot and the plan it must give.
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# (name, group options, users, running, pending, expected placements, expected reasons)
REASONS = [
    ("unschedulable: too big for any node", {}, {}, [], [("1", "u", {"CPU": 9})], [], {"1": "Unschedulable"}),
    ("unschedulable: no node has the resource", {}, {}, [], [("1", "u", {"GPU": 1})], [], {"1": "Unschedulable"}),
    ("unschedulable: no node has the labels", {}, {}, [], [("1", "u", {"CPU": 1}, {"node_labels": {"zone": "mars"}})], [],
     {"1": "Unschedulable"}),
    ("resources: fits when empty, not now", {}, {}, [("r", "v", "n1", {"CPU": 7})], [("1", "u", {"CPU": 2})], [],
     {"1": "Resources"}),
    ("no head-of-line blocking", {}, {}, [], [("1", "u", {"CPU": 8}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 8})],
     [("1", "n1")], {"2": "Resources", "3": "Resources"}),
    ("small job behind a big waiting one goes", {}, {}, [("r", "v", "n1", {"CPU": 4})],
     [("1", "u", {"CPU": 8}), ("2", "u", {"CPU": 1})], [("2", "n1")], {"1": "Resources"}),
    ("not before: in the future waits", {}, {}, [],
     [("1", "u", {"CPU": 1}, {"not_before": at(10)}), ("2", "u", {"CPU": 1}, {"not_before": at(-10)})],
     [("2", "n1")], {"1": "NotBefore"}),
    ("user job limit counts running and placed", {"max_running_per_user": 2}, {}, [("r", "u", "n1", {"CPU": 1})],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "v", {"CPU": 1})], [("1", "n1"), ("3", "n1")], {"2": "UserJobLimit"}),
    ("running jobs on a node that left still count", {"max_running_per_user": 1}, {}, [("r", "u", "gone", {"CPU": 1})],
     [("1", "u", {"CPU": 1})], [], {"1": "UserJobLimit"}),
    ("user override replaces the group job limit", {"max_running_per_user": 1}, {"u": {"max_running": 3}}, [],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 1}), ("4", "u", {"CPU": 1})],
     [("1", "n1"), ("2", "n1"), ("3", "n1")], {"4": "UserJobLimit"}),
    ("user resource limit", {"max_resources_per_user": {"CPU": 3}}, {}, [("r", "u", "n1", {"CPU": 1})],
     [("1", "u", {"CPU": 2}), ("2", "u", {"CPU": 1}), ("3", "u", {"memory": GIB})], [("1", "n1"), ("3", "n1")],
     {"2": "UserResourceLimit"}),
    ("user override replaces the group resource limit", {"max_resources_per_user": {"CPU": 1}},
     {"u": {"max_resources": {"CPU": 2}}}, [],
     [("1", "u", {"CPU": 2}), ("2", "v", {"CPU": 2})], [("1", "n1")], {"2": "UserResourceLimit"}),
    ("a resource limit of 0 is a limit", {"max_resources_per_user": {"CPU": 0}}, {}, [], [("1", "u", {"CPU": 1})], [],
     {"1": "UserResourceLimit"}),
    ("strict order: the rest waits behind", {"strict_order": True}, {}, [("r", "v", "n1", {"CPU": 6})],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 4}), ("3", "u", {"CPU": 1}), ("4", "u", {"CPU": 1}, {"not_before": at(5)}),
      ("5", "u", {"CPU": 99})],
     [("1", "n1")], {"2": "Resources", "3": "Priority", "4": "NotBefore", "5": "Unschedulable"}),
    ("strict order: unschedulable does not block", {"strict_order": True}, {}, [],
     [("1", "u", {"CPU": 99}), ("2", "u", {"CPU": 1})], [("2", "n1")], {"1": "Unschedulable"}),
    ("precedence: unschedulable before not before", {}, {}, [], [("1", "u", {"CPU": 99}, {"not_before": at(5)})], [],
     {"1": "Unschedulable"}),
    ("precedence: not before before job limit", {"max_running_per_user": 1}, {}, [("r", "u", "n1", {})],
     [("1", "u", {"CPU": 1}, {"not_before": at(5)})], [], {"1": "NotBefore"}),
    ("precedence: job limit before resource limit", {"max_running_per_user": 1, "max_resources_per_user": {"CPU": 1}}, {},
     [("r", "u", "n1", {"CPU": 1})], [("1", "u", {"CPU": 1})], [], {"1": "UserJobLimit"}),
    ("precedence: resource limit before resources", {"max_resources_per_user": {"CPU": 1}}, {}, [("r", "v", "n1", {"CPU": 8})],
     [("1", "u", {"CPU": 2})], [], {"1": "UserResourceLimit"}),
]


def stdin(text: str) -> io.TextIOWrapper:
    """Standard input holding `text`, with the bytes beneath it that `plan -` reads."""
    return io.TextIOWrapper(io.BytesIO(text.encode()))


@pytest.mark.parametrize("group, users, running, pending, placements, reasons", [c[1:] for c in REASONS],
                         ids=[c[0] for c in REASONS])
@pytest.mark.parametrize("policy", ["fifo", "drf"])
def test_reasons_and_limits(policy, group, users, running, pending, placements, reasons):
    document = snapshot(policy, "concentrated", nodes={"n1": {"CPU": 8, "memory": 16 * GIB}}, running=running, pending=pending,
                        users=users, **group)
    placed, waiting, _ = run(document)
    # Which jobs go and why; the order of placements is the policies' business.
    assert (sorted(placed), waiting) == (sorted(placements), reasons)


def _messages(document: dict) -> dict[str, str]:
    return {w["job"]: w["message"] for w in plan(Snapshot.model_validate(document)).model_dump(mode="json")["waiting"]}


def test_messages_say_what_is_needed_and_what_stands_in_the_way():
    document = snapshot(
        "fifo", "dispersed", max_running_per_user=1, strict_order=True,
        nodes={"n1": {"CPU": 4, "memory": 8 * GIB}, "n2": ({"CPU": 2, "memory": 32 * GIB, "GPU": 1}, {"zone": "a"})},
        running=[("r", "cap", "n1", {"CPU": 1})],
        users={"lim": {"max_resources": {"memory": 4 * GIB}, "max_running": 9}},
        pending=[
            ("1", "u", {"CPU": 3, "memory": 1.5 * GIB}),
            ("2", "v", {"CPU": 4, "memory": 8 * GIB}),
            ("3", "w", {"GPU": 2}),
            ("4", "x", {"CPU": 1}, {"node_labels": {"zone": "b"}}),
            ("5", "y", {"CPU": 4, "memory": 16 * GIB}),
            ("6", "cap", {"CPU": 0.5}),
            ("7", "lim", {"memory": 5 * GIB}),
            ("8", "z", {"CPU": 0.5}, {"not_before": at(90)}),
            ("9", "q", {"CPU": 1}),
        ],
    )
    messages = _messages(document)
    assert messages["2"] == "needs CPU 4, memory 8 GiB; the most free on any node is CPU 2, memory 32 GiB"
    assert messages["3"] == "needs GPU 2; no node of group g has more than GPU 1"
    assert messages["4"] == "needs CPU 1 on a node labelled zone=b; no node of group g labelled zone=b"
    assert messages["5"] == ("needs CPU 4, memory 16 GiB; no single node of group g has all of it"
                             " (the most of each on any node: CPU 4, memory 32 GiB)")
    assert messages["6"] == "user cap has 1 jobs running or starting, the most allowed is 1"
    assert messages["7"] == "needs memory 5 GiB; user lim already uses memory 0 B of at most 4 GiB"
    assert messages["8"] == "not to start before 2026-11-29T09:30:00Z, in 1h30m"
    assert messages["9"] == "strict order: waits behind job 2, which is first in line and waits for resources"


def test_message_when_no_single_node_has_all_free():
    document = snapshot("fifo", "dispersed", nodes={"a": {"CPU": 4, "memory": 4 * GIB}, "b": {"CPU": 4, "memory": 8 * GIB}},
                        running=[("r", "v", "a", {"CPU": 3}), ("s", "v", "b", {"memory": 7 * GIB})],
                        pending=[("1", "u", {"CPU": 2, "memory": 2 * GIB})])
    assert _messages(document)["1"] == ("needs CPU 2, memory 2 GiB; no node has all of it free at once"
                                        " (the most free of each on any node: CPU 4, memory 4 GiB)")


# Outside load: what work outside the queue holds on a node (nodes[].outside).
# (name, nodes, outside, running, pending, expected placements, expected reasons)
OUTSIDE = [
    ("a node whose CPUs are held outside gets no job, the other takes them", {"a": {"CPU": 2}, "b": {"CPU": 2}},
     {"a": {"CPU": 2}}, [],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 1}), ("4", "u", {"CPU": 1})],
     [("1", "b"), ("2", "b")], {"3": "Resources", "4": "Resources"}),
    ("outside load and running jobs both count", {"a": {"CPU": 4}}, {"a": {"CPU": 2}}, [("r", "v", "a", {"CPU": 1})],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1})], [("1", "a")], {"2": "Resources"}),
    ("part of a resource held outside", {"a": {"CPU": 4}}, {"a": {"CPU": 1.5}}, [],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1.5}), ("3", "u", {"CPU": 0.5}), ("4", "u", {"CPU": 0.5})],
     [("1", "a"), ("2", "a")], {"3": "Resources", "4": "Resources"}),
    ("outside larger than the total: the node takes nothing, and the job still fits an empty node", {"a": {"CPU": 2}},
     {"a": {"CPU": 5}}, [],
     [("1", "u", {"CPU": 1})], [], {"1": "Resources"}),
    ("outside larger than the total of one resource leaves the others", {"a": {"CPU": 2, "memory": 4 * GIB}},
     {"a": {"CPU": 5}}, [],
     [("1", "u", {"memory": GIB}), ("2", "u", {"CPU": 1})], [("1", "a")], {"2": "Resources"}),
    ("outside on a resource the job does not ask for does not matter", {"a": {"CPU": 2, "memory": 4 * GIB}},
     {"a": {"memory": 4 * GIB}}, [],
     [("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1, "memory": GIB})], [("1", "a")], {"2": "Resources"}),
    ("outside on a resource the node does not have does not matter", {"a": {"CPU": 2}}, {"a": {"GPU": 1, "licence": 3}}, [],
     [("1", "u", {"CPU": 2})], [("1", "a")], {}),
    ("outside load does not make a job unschedulable", {"a": {"CPU": 2}}, {"a": {"CPU": 2}}, [],
     [("1", "u", {"CPU": 3}), ("2", "u", {"CPU": 2})], [], {"1": "Unschedulable", "2": "Resources"}),
    ("outside load counted in Ray's fixed point", {"a": {"CPU": 1}}, {"a": {"CPU": 0.1 + 0.2}}, [],
     [("1", "u", {"CPU": 0.7}), ("2", "u", {"CPU": 0.0001})], [("1", "a")], {"2": "Resources"}),
]


@pytest.mark.parametrize("nodes, outside, running, pending, placements, reasons", [c[1:] for c in OUTSIDE],
                         ids=[c[0] for c in OUTSIDE])
@pytest.mark.parametrize("selector", ["legacy", "concentrated", "dispersed", "roundrobin"])
@pytest.mark.parametrize("policy", ["fifo", "drf"])
def test_outside_load_is_kept_free(policy, selector, nodes, outside, running, pending, placements, reasons):
    document = snapshot(policy, selector, nodes=nodes, outside=outside, running=running, pending=pending)
    placed, waiting, _ = run(document)
    assert (sorted(placed), waiting) == (sorted(placements), reasons)


@pytest.mark.parametrize("selector, outside, expected", [
    # The most free first: b (4 free) before a (8 less 6 held outside).
    ("dispersed", {"a": {"CPU": 6}}, "b"),
    ("dispersed", {}, "a"),
    # The least free that fits first: a (2 free) before b.
    ("concentrated", {"a": {"CPU": 6}}, "a"),
    ("concentrated", {}, "b"),
])
def test_selectors_see_what_outside_load_leaves_free(selector, outside, expected):
    document = snapshot("fifo", selector, nodes={"a": {"CPU": 8}, "b": {"CPU": 4}}, outside=outside,
                        pending=[("1", "u", {"CPU": 1})])
    assert run(document)[0] == [("1", expected)]


OUTSIDE_MESSAGES = [
    ("one node held outside", {"a": {"CPU": 2}, "b": {"CPU": 2}}, {"a": {"CPU": 2}}, [], {"CPU": 1}, 3,
     "needs CPU 1; the most free on any node is CPU 0 (work outside the queue holds CPU 2 on node a)"),
    ("what outside holds, at most the total", {"a": {"CPU": 2}}, {"a": {"CPU": 5}}, [], {"CPU": 1}, 1,
     "needs CPU 1; the most free on any node is CPU 0 (work outside the queue holds CPU 2 on node a)"),
    ("only the resources the job is short of", {"a": {"CPU": 2, "memory": 8 * GIB}}, {"a": {"CPU": 2, "memory": 2 * GIB}}, [],
     {"CPU": 1, "memory": GIB}, 1,
     "needs CPU 1, memory 1 GiB; the most free on any node is CPU 0, memory 6 GiB"
     " (work outside the queue holds CPU 2 on node a)"),
    ("several resources short", {"a": {"CPU": 2, "memory": 8 * GIB}}, {"a": {"CPU": 2, "memory": 8 * GIB}}, [],
     {"CPU": 1, "memory": GIB}, 1,
     "needs CPU 1, memory 1 GiB; the most free on any node is CPU 0, memory 0 B"
     " (work outside the queue holds CPU 2, memory 8 GiB on node a)"),
    ("not said where our own jobs would still be in the way", {"a": {"CPU": 4}}, {"a": {"CPU": 1}}, [("r", "v", "a", {"CPU": 3})],
     {"CPU": 2}, 1, "needs CPU 2; the most free on any node is CPU 0"),
    ("said for the node where it is in the way only", {"a": {"CPU": 4}, "b": {"CPU": 4}}, {"a": {"CPU": 1}, "b": {"CPU": 3}},
     [("r", "v", "a", {"CPU": 3})], {"CPU": 2}, 2,
     "needs CPU 2; the most free on any node is CPU 1 (work outside the queue holds CPU 3 on node b)"),
    ("no node has all of it free at once", {"a": {"CPU": 4, "memory": 4 * GIB}, "b": {"CPU": 4, "memory": 8 * GIB}},
     {"a": {"CPU": 3}}, [("s", "v", "b", {"memory": 7 * GIB})], {"CPU": 2, "memory": 2 * GIB}, 1,
     "needs CPU 2, memory 2 GiB; no node has all of it free at once (the most free of each on any node: CPU 4, memory 4 GiB)"
     " (work outside the queue holds CPU 3 on node a)"),
    ("nodes by id, at most three named", {n: {"CPU": 1} for n in ("e", "d", "c", "b", "a")},
     {n: {"CPU": 1} for n in ("e", "d", "c", "b", "a")}, [], {"CPU": 1}, 1,
     "needs CPU 1; the most free on any node is CPU 0 (work outside the queue holds CPU 1 on node a; CPU 1 on node b;"
     " CPU 1 on node c; and more on 2 other nodes)"),
    ("one other node", {n: {"CPU": 1} for n in ("a", "b", "c", "d")}, {n: {"CPU": 0.5} for n in ("a", "b", "c", "d")},
     [], {"CPU": 1}, 1,
     "needs CPU 1; the most free on any node is CPU 0.5 (work outside the queue holds CPU 0.5 on node a; CPU 0.5 on node b;"
     " CPU 0.5 on node c; and more on 1 other node)"),
]


@pytest.mark.parametrize("nodes, outside, running, need, jobs, message", [c[1:] for c in OUTSIDE_MESSAGES],
                         ids=[c[0] for c in OUTSIDE_MESSAGES])
def test_message_says_when_outside_load_is_in_the_way(nodes, outside, running, need, jobs, message):
    document = snapshot("fifo", "dispersed", nodes=nodes, outside=outside, running=running,
                        pending=[(str(i), "u", need) for i in range(1, jobs + 1)])
    assert _messages(document)[str(jobs)] == message


def test_message_on_outside_load_stays_within_the_pool():
    # Node b is held outside but does not carry the job's labels: not in the job's way.
    document = snapshot("fifo", "dispersed", nodes={"a": ({"CPU": 1}, {"zone": "x"}), "b": {"CPU": 1}}, outside={"b": {"CPU": 1}},
                        running=[("r", "v", "a", {"CPU": 1})], pending=[("1", "u", {"CPU": 1}, {"node_labels": {"zone": "x"}})])
    assert _messages(document)["1"] == "needs CPU 1 on a node labelled zone=x; the most free on any node labelled zone=x is CPU 0"


def test_command_plans_around_outside_load(capsys, monkeypatch):
    document = snapshot("fifo", "dispersed", nodes={"a": {"CPU": 2}, "b": {"CPU": 2}}, outside={"a": {"CPU": 2}},
                        pending=[("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 1})])
    monkeypatch.setattr(sys, "stdin", stdin(json.dumps(document)))
    assert main(["plan", "-"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["placements"] == [{"job": "1", "node": "b"}, {"job": "2", "node": "b"}]
    assert result["waiting"] == [{"job": "3", "reason": "Resources",
                                  "message": "needs CPU 1; the most free on any node is CPU 0"
                                             " (work outside the queue holds CPU 2 on node a)"}]


def test_worked_example():
    document = json.loads((EXAMPLES / "drf-small.json").read_text())
    expected = json.loads((EXAMPLES / "drf-small.plan.json").read_text())
    result = plan(Snapshot.model_validate(document)).model_dump(mode="json")
    assert result["placements"] == expected["placements"]
    assert [(w["job"], w["reason"]) for w in result["waiting"]] == [(w["job"], w["reason"]) for w in expected["waiting"]]
    assert result["state"] == expected["state"]


@pytest.mark.parametrize("name", ["drf-small.json", "gang-preemption-overcommitted-node.json"])
def test_a_plan_not_worded_is_the_worded_plan_without_its_messages(name):
    shot = Snapshot.model_validate(json.loads((EXAMPLES / name).read_text()))
    worded, bare = plan(shot).document(), plan(shot, worded=False).document()
    assert worded["waiting"] and all(record["message"] for record in worded["waiting"])
    assert bare["waiting"] == [{**record, "message": ""} for record in worded["waiting"]]
    assert {**bare, "waiting": None} == {**worded, "waiting": None}
    assert plan(shot, worded=False).said is None


def test_command_prints_the_plan(capsys, tmp_path):
    path = tmp_path / "snapshot.json"
    path.write_text((EXAMPLES / "drf-small.json").read_text())
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["placements"][0] == {"job": "b1", "node": "n1"}


def test_command_reads_standard_input(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", stdin((EXAMPLES / "drf-small.json").read_text()))
    assert main(["plan", "-"]) == 0
    assert len(json.loads(capsys.readouterr().out)["placements"]) == 3


def _with(path: list, value) -> str:
    document = snapshot("drf", "legacy", nodes={"n1": {"CPU": 1}},
                        pending=[("1", "u", {"CPU": 1}), ("2", "u", {"CPU": 1}), ("3", "u", {"CPU": 1})])
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(document)


INVALID = [
    ("negative amount", _with(["pending", 2, "resources", "CPU"], -1),
     "pending[2].resources.CPU: Input should be greater than or equal to 0"),
    # More than Ray counts: a traceback in to_units before.
    ("node amount past Ray's", _with(["nodes", 0, "resources", "CPU"], 1e308),
     "nodes[0].resources.CPU: Input should be less than or equal to 922337203685477"),
    ("job amount past Ray's", _with(["pending", 0, "resources", "CPU"], 1e16),
     "pending[0].resources.CPU: Input should be less than or equal to 922337203685477"),
    ("amount as text", _with(["pending", 1, "resources", "CPU"], "4"),
     "pending[1].resources.CPU: Input should be a valid number"),
    ("unknown policy", _with(["group", "policy"], "random"),
     "group.policy: Input should be 'fifo', 'lifo', 'drf' or 'fairshare'"),
    ("unknown group field", _with(["group", "polcy"], "drf"), "group.polcy: Extra inputs are not permitted"),
    ("job id as a number", _with(["pending", 0, "id"], 1), "pending[0].id: Input should be a valid string"),
    ("duplicate job id", _with(["pending", 1, "id"], "1"), "pending[1].id: '1' appears more than once"),
    ("not_before without now",
     _with(["now"], None).replace('"user": "u", "resources": {"CPU": 1}}',
                                  '"user": "u", "resources": {"CPU": 1}, "not_before": "2026-01-01T00:00:00Z"}', 1),
     "now: required, since pending[0].not_before is set"),
    ("zero shares", _with(["users"], {"u": {"shares": 0}}), "users.u.shares: Input should be greater than 0"),
    ("bad round-robin state",
     _with(["state"], {"selector.roundrobin": {"next_index": {"": "x"}}}).replace('"legacy"', '"roundrobin"'),
     'state.selector.roundrobin.next_index[""]: Input should be a valid integer'),
    ("naive time", _with(["now"], "2026-11-29T08:00:00"), "now: Input should have timezone info"),
    ("negative outside load", _with(["nodes", 0, "outside"], {"CPU": -1}),
     "nodes[0].outside.CPU: Input should be greater than or equal to 0"),
    ("outside load as text", _with(["nodes", 0, "outside"], {"CPU": "2"}),
     "nodes[0].outside.CPU: Input should be a valid number"),
    ("outside load not a map", _with(["nodes", 0, "outside"], 2), "nodes[0].outside: Input should be an object"),
    ("outside load of null", _with(["nodes", 0, "outside"], None), "nodes[0].outside: Input should be an object"),
    ("not JSON", "{", "Invalid JSON"),
]


@pytest.mark.parametrize("text, message", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_snapshot_exits_2_naming_the_field(text, message, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", stdin(text))
    assert main(["plan", "-"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"error: {message}")
    assert err.count("\n") == 1


def test_a_snapshot_past_its_bound_is_refused_unread(capsys, monkeypatch):
    # /dev/zero never ends: read whole, it would take the machine's memory.
    monkeypatch.setattr(plan_cli, "MAX_SNAPSHOT_FILE", 2**20)
    assert main(["plan", "/dev/zero"]) == 2
    assert capsys.readouterr() == ("", "error: /dev/zero: larger than 1 MiB\n")


def test_invalid_snapshot_exits_2_from_the_shell():
    result = subprocess.run([sys.executable, "-m", "job", "plan", "-"], input=INVALID[0][1],
                            capture_output=True, text=True, cwd=ROOT)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: {INVALID[0][2]}\n"


def test_missing_file_exits_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "job", "plan", str(tmp_path / "nope.json")],
                            capture_output=True, text=True, cwd=ROOT)
    assert (result.returncode, result.stdout) == (2, "")
    assert "nope.json" in result.stderr


def test_importing_the_core_loads_no_io_library():
    # The import contracts (tests/package/test_layers.py) see our imports; this sees what third-party
    # packages the core pulls in, at run time.
    code = ("import sys, pkgutil, importlib, job.core\n"
            "for info in pkgutil.walk_packages(job.core.__path__, 'job.core.'): importlib.import_module(info.name)\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'psycopg', 'ray', 'kubernetes', 'requests'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "[]"


# Resources: Ray's fixed point.
@pytest.mark.parametrize("amount, units", [(1, 10_000), (0.5, 5_000), (0.0001, 1), (0.00005, 1), (0.00004, 0),
                                           (0.1 + 0.2, 3_000), (2**33, 2**33 * 10_000)])
def test_to_units_rounds_like_ray(amount, units):
    assert to_units(amount) == units


def test_resources_in_fixed_point():
    a = Resources.of({"CPU": 0.1, "GPU": 0})
    assert dict(a) == {"CPU": 1_000}
    # 0.1 + 0.2 CPU is 0.3 CPU in units, as in Ray, though not in floats.
    both = Resources({"CPU": to_units(0.1) + to_units(0.2), "memory": to_units(1024)})
    assert both == Resources.of({"CPU": 0.3, "memory": 1024})
    assert both.fits_in(Resources.of({"CPU": 0.3, "memory": 1024}))
    assert not both.fits_in(Resources.of({"CPU": 0.3}))
    assert dict(Resources({"CPU": -1_000, "memory": -10_240_000, "GPU": 0})) == {"CPU": -1_000, "memory": -10_240_000}
    assert hash(Resources.of({"CPU": 1.0, "GPU": 1})) == hash(Resources.of({"GPU": 1, "CPU": 1}))
    assert Resources.of({"CPU": 1.5, "memory": 2**30}).amounts() == {"CPU": 1.5, "memory": 2**30}
    assert str(Resources.of({"CPU": 1.5, "memory": 2**30})) == "CPU 1.5, memory 1 GiB"


@pytest.mark.parametrize("used, totals, share", [
    ({"CPU": 2}, {"CPU": 8, "memory": 16}, 0.25),
    ({"CPU": 2, "memory": 8}, {"CPU": 8, "memory": 16}, 0.5),
    ({"GPU": 1}, {"CPU": 8}, 0.0),
    ({}, {"CPU": 8}, 0.0),
])
def test_dominant_share(used, totals, share):
    as_units = lambda d: {k: to_units(v) for k, v in d.items()}  # noqa: E731
    assert dominant_share(as_units(used), as_units(totals)) == share
    assert Resources.of(used).dominant_share(as_units(totals)) == share


@pytest.mark.parametrize("name, amount, text", [
    ("CPU", 4, "4"), ("CPU", 0.25, "0.25"), ("GPU", 0.0001, "0.0001"), ("memory", 0, "0 B"), ("memory", 512, "512 B"),
    ("memory", 8 * GIB, "8 GiB"), ("memory", 1.5 * GIB, "1.5 GiB"), ("memory", 10**9, "953.67 MiB"),
    ("object_store_memory", 2**40, "1 TiB"), ("memory", 2**70, "1024 EiB"),
])
def test_format_amount(name, amount, text):
    assert format_amount(name, to_units(amount)) == text


def test_describe():
    assert describe([("CPU", 40_000), ("memory", to_units(8 * GIB))]) == "CPU 4, memory 8 GiB"
    assert describe([]) == "nothing"


def test_plan_leaves_the_garbage_collector_as_it_found_it():
    import gc

    document = snapshot("drf", "dispersed", nodes={"n1": {"CPU": 1}}, pending=[("1", "u", {"CPU": 1})])
    assert gc.isenabled()
    plan(Snapshot.model_validate(document))
    assert gc.isenabled()
    gc.disable()
    try:
        plan(Snapshot.model_validate(document))
        assert not gc.isenabled()
    finally:
        gc.enable()
