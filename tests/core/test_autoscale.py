"""The pure parts of autoscaling (job/core/autoscale.py): node types as `--node-type` writes them
(job/cli/options.py), `ScalingUp` against `Unschedulable`, and the demand computed from a snapshot
and its plan."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planner_helpers import said_as_waiting

from job.cli.options import format_node_type, parse_node_type, read_fields
from job.core import autoscale
from job.core.errors import BadInput
from job.core.planner import Snapshot, plan
from job.core.resources import Resources
from job.core.specs import GroupSpec, NodeType, parse_node_types, validated

GPU = NodeType(name="gpu", resources={"CPU": 8, "GPU": 1}, labels={"pool": "gpu"}, max=2)
CPU = NodeType(name="cpu", resources={"CPU": 4}, labels={"pool": "cpu"}, max=3)


@pytest.mark.parametrize(("text", "fields"), [
    ("gpu=CPU:8,GPU:1:max=4", {"name": "gpu", "resources": {"CPU": 8, "GPU": 1}, "labels": {}, "max": 4}),
    ("big=CPU:16,memory:32GiB@pool=big@ray.io/accelerator-type=A100:max=0",
     {"name": "big", "resources": {"CPU": 16, "memory": 32 * 2**30},
      "labels": {"pool": "big", "ray.io/accelerator-type": "A100"}, "max": 0}),
    (" spot = CPU:2 , special:0.5 @ market = spot :max=10",
     {"name": "spot", "resources": {"CPU": 2, "special": 0.5}, "labels": {"market": "spot"}, "max": 10}),
])
def test_node_type_text(text, fields):
    [parsed] = parse_node_types([parse_node_type(text)])
    assert parsed.model_dump(exclude={"min"}) == fields
    # What `group show` prints reads back the same.
    assert parse_node_types([parse_node_type(format_node_type(parsed))]) == [parsed]


@pytest.mark.parametrize(("text", "error"), [
    ("gpu=CPU:8", "ends with :max=N"),
    ("gpu=CPU:8:max=-1", "ends with :max=N"),
    ("gpu=CPU:8:max=two", "ends with :max=N"),
    ("=CPU:8:max=1", "expected NAME=RESOURCES"),
    ("CPU:8:max=1", "expected NAME=RESOURCES"),
    ("gpu=CPU 8:max=1", "resources: expected NAME:AMOUNT, got 'CPU 8'"),
    ("gpu=CPU:8,CPU:4:max=1", "'CPU' given twice"),
    ("gpu=CPU:-8:max=1", "node type 'gpu': resources: CPU: must be finite and not negative"),
    ("gpu=cpu:8:max=1", "did you mean 'CPU'"),
    ("gpu=memory:lots:max=1", "not a memory size"),
    ("gpu=CPU:0:max=1", "a node type has some resources"),
    ("gpu=CPU:8@pool:max=1", "labels: expected @KEY=VALUE, got 'pool'"),
    ("gpu=CPU:8@pool=a@pool=b:max=1", "labels: 'pool' given twice"),
    ("gpu=CPU:8@bad key=x:max=1", "not a valid label key"),
    ("gpu=CPU:8@k=bad value:max=1", "not a valid label value"),
    ("g/pu=CPU:8:max=1", "not a valid node type name"),
])
def test_bad_node_type_text_is_refused_with_what_is_wrong(text, error):
    with pytest.raises(BadInput, match=r"^node_types: ") as refused:
        validated(GroupSpec, read_fields({"name": "g", "clusters": ["http://ray:8265"], "node_types": [text]}))
    assert error in str(refused.value)


@pytest.mark.parametrize(("fields", "error"), [
    ({"autoscale": "on"}, "node_types: an http:// group that autoscales needs its node types"),
    ({"autoscale": "sometimes"}, "autoscale: 'sometimes': use on or off"),
    ({"node_types": ["a=CPU:1:max=1", "a=CPU:2:max=1"]}, "node_types: node type 'a' is given more than once"),
    ({"clusters": ["raycluster://ml/shared"], "node_types": ["a=CPU:1:max=1"]},
     "node_types: a raycluster:// group's node types are read from its RayCluster"),
])
def test_group_autoscale_options_are_checked(fields, error):
    with pytest.raises(BadInput) as refused:
        validated(GroupSpec, read_fields({"name": "g", "clusters": ["http://ray:8265"], **fields}))
    assert str(refused.value).startswith(error)


def test_group_autoscale_options_accepted():
    spec = validated(GroupSpec, read_fields({"name": "g", "clusters": ["http://ray:8265"], "autoscale": "on",
                                             "node_types": ["gpu=CPU:8,GPU:1@pool=gpu:max=2"]}))
    assert spec.autoscale is True and spec.node_types == [GPU.model_dump()]
    assert validated(GroupSpec, read_fields({"name": "g", "clusters": ["raycluster://ml/shared"], "autoscale": "on"})).autoscale


def snapshot(nodes=(), running=(), pending=(), users=None, **group) -> Snapshot:
    return Snapshot.model_validate({
        "group": {"name": "g", "policy": "fifo", "selector": "dispersed", **group},
        "now": "2026-11-29T08:00:00Z",
        "nodes": list(nodes), "running": list(running), "users": users or {},
        "pending": [{"user": "alice", "node_labels": {}, **job} for job in pending],
    })


def waiting(snap: Snapshot, types, labels=None) -> tuple[dict[str, tuple[str, str]], list[dict]]:
    decided = plan(snap)
    autoscale.scale_up(snap, decided, types, labels or {})
    reasons = {w["job"]: (w["reason"], w["message"]) for w in decided.waiting}
    return reasons, autoscale.demand(snap, decided, types, labels or {})


SMALL_NODE = {"id": "n1", "resources": {"CPU": 2}, "labels": {"pool": "cpu"}}


@pytest.mark.parametrize(("job", "types", "reason", "said"), [
    # The cluster has scaled to no worker: every job waits for it to grow.
    ({"resources": {"CPU": 1}}, [CPU], "ScalingUp",
     "waits for the cluster to add a node of type cpu (CPU 4 @pool=cpu; at most 3)"),
    ({"resources": {"CPU": 6, "GPU": 1}}, [CPU, GPU], "ScalingUp",
     "needs GPU 1, CPU 6; no node of group g can hold it: waits for the cluster to add a node of type gpu"
     " (CPU 8, GPU 1 @pool=gpu; at most 2)"),
    ({"resources": {"CPU": 1}, "node_labels": {"pool": "gpu"}}, [CPU, GPU], "ScalingUp", "of type gpu"),
    # Too big for every node type, or labels no node type carries: nothing can ever hold it.
    ({"resources": {"CPU": 9}}, [CPU, GPU], "Unschedulable", "nor can any node type the cluster may add"),
    ({"resources": {"CPU": 1}, "node_labels": {"pool": "tpu"}}, [CPU, GPU], "Unschedulable", "nor can any node type"),
    ({"resources": {"GPU": 1}}, [CPU.model_copy(update={"max": 0})], "Unschedulable", "nor can any node type"),
    # Without node types, as before.
    ({"resources": {"CPU": 1}}, [], "Unschedulable", "no node of group g"),
])
def test_scaling_up_against_unschedulable_on_an_empty_cluster(job, types, reason, said):
    reasons, _ = waiting(snapshot(pending=[{"id": "a", **job}]), types)
    assert reasons["a"][0] == reason
    assert said in reasons["a"][1]


def test_scaling_up_groups_the_changed_records_again():
    snap = snapshot(pending=[{"id": "a", "resources": {"CPU": 1}}, {"id": "b", "resources": {"CPU": 9}},
                             {"id": "c", "resources": {"CPU": 1}}])
    decided = plan(snap)
    autoscale.scale_up(snap, decided, [CPU], {})
    assert said_as_waiting(decided)
    assert sorted((reason, len(records)) for reason, _, records in decided.said) == [("ScalingUp", 2), ("Unschedulable", 1)]


def test_a_job_that_fits_a_node_now_or_when_empty_is_not_scaling_up():
    reasons, bundles = waiting(snapshot(nodes=[SMALL_NODE],
                                        running=[{"id": "r", "user": "bob", "node": "n1", "resources": {"CPU": 2}}],
                                        pending=[{"id": "a", "resources": {"CPU": 1}}, {"id": "b", "resources": {"CPU": 3}}]),
                               [CPU])
    assert reasons["a"][0] == "Resources" and reasons["b"][0] == "ScalingUp"
    assert bundles == [{"resources": {"CPU": 1}, "label_selector": {}, "count": 1},
                       {"resources": {"CPU": 2}, "label_selector": {}, "count": 1},
                       {"resources": {"CPU": 3}, "label_selector": {}, "count": 1}]


def shapes(bundles):
    return {(tuple(sorted(b["resources"].items())), tuple(sorted(b["label_selector"].items()))): b["count"] for b in bundles}


@pytest.mark.parametrize(("case", "pending", "users", "group", "expected"), [
    ("nothing waits, nothing asked", [], None, {}, {}),
    ("every waiting job", [{"id": f"j{i}", "resources": {"CPU": 1}} for i in range(3)], None, {},
     {((("CPU", 1),), ()): 3}),
    ("capped by the node types' max: 3 cpu nodes of 4 CPUs and 2 gpu nodes of 8 hold 3 + 2x2 jobs of 3 CPUs",
     [{"id": f"j{i}", "resources": {"CPU": 3}} for i in range(9)], None, {}, {((("CPU", 3),), ()): 7}),
    ("a shape too big for the cap does not hide the smaller ones behind it",
     [{"id": "big", "resources": {"CPU": 8, "GPU": 1}}, {"id": "small", "resources": {"CPU": 1}}], None, {},
     {((("CPU", 8), ("GPU", 1)), ()): 1, ((("CPU", 1),), ()): 1}),
    ("the user's job limit holds back the rest",
     [{"id": f"j{i}", "resources": {"CPU": 1}} for i in range(4)], {"alice": {"max_running": 2}}, {},
     {((("CPU", 1),), ()): 2}),
    ("the group's job limit too", [{"id": f"j{i}", "resources": {"CPU": 1}} for i in range(4)], None,
     {"max_running_per_user": 1}, {((("CPU", 1),), ()): 1}),
    ("the user's resource limit",
     [{"id": f"j{i}", "resources": {"CPU": 2}} for i in range(4)], {"alice": {"max_resources": {"CPU": 5}}}, {},
     {((("CPU", 2),), ()): 2}),
    ("a start time still to come", [{"id": "later", "resources": {"CPU": 1}, "not_before": "2026-11-29T09:00:00Z"},
                                    {"id": "now", "resources": {"CPU": 1}}], None, {}, {((("CPU", 1),), ()): 1}),
    ("only a start time to come: nothing asked",
     [{"id": "later", "resources": {"CPU": 1}, "not_before": "2026-11-29T09:00:00Z"}], None, {}, {}),
    ("label selectors go with their bundles",
     [{"id": "g", "resources": {"CPU": 1}, "node_labels": {"pool": "gpu"}}, {"id": "c", "resources": {"CPU": 1}}], None, {},
     {((("CPU", 1),), (("pool", "gpu"),)): 1, ((("CPU", 1),), ()): 1}),
    ("another user's limits do not hold alice back",
     [{"id": "a", "resources": {"CPU": 1}}, {"id": "b", "resources": {"CPU": 1}, "user": "bob"}],
     {"bob": {"max_running": 1}}, {}, {((("CPU", 1),), ()): 2}),
])
def test_demand_on_an_empty_cluster(case, pending, users, group, expected):
    _, bundles = waiting(snapshot(pending=pending, users=users, **group), [CPU, GPU])
    assert shapes(bundles) == expected, case


def test_running_jobs_count_while_jobs_wait_and_the_demand_clears_when_none_waits():
    node = {"id": "n1", "resources": {"CPU": 4}, "labels": {"pool": "cpu"}}
    busy = [{"id": "r", "user": "bob", "node": "n1", "resources": {"CPU": 4}}]
    _, bundles = waiting(snapshot(nodes=[node], running=busy, pending=[{"id": "a", "resources": {"CPU": 4}}]), [CPU])
    assert shapes(bundles) == {((("CPU", 4),), ()): 2}
    # The node of type cpu already there counts against the type's max: two more at most.
    _, bundles = waiting(snapshot(nodes=[node], running=busy,
                                  pending=[{"id": f"j{i}", "resources": {"CPU": 4}} for i in range(5)]), [CPU])
    assert shapes(bundles) == {((("CPU", 4),), ()): 3}
    _, bundles = waiting(snapshot(nodes=[node], running=busy), [CPU])
    assert bundles == []


def test_jobs_held_for_priority_in_strict_order_are_not_asked_for():
    pending = [{"id": "a", "resources": {"CPU": 1}, "priority": 1}, {"id": "b", "resources": {"CPU": 1}}]
    node = {"id": "n1", "resources": {"CPU": 1}, "labels": {"pool": "cpu"}}
    running = [{"id": "r", "user": "bob", "node": "n1", "resources": {"CPU": 1}}]
    reasons, bundles = waiting(snapshot(nodes=[node], running=running, pending=pending, strict_order=True), [CPU])
    assert reasons["b"][0] == "Priority"
    assert shapes(bundles) == {((("CPU", 1),), ()): 2}


def test_the_group_labels_select_its_node_types_and_go_with_every_bundle():
    types = autoscale.of_group([CPU, GPU], {"pool": "gpu"})
    assert types == [GPU]
    reasons, bundles = waiting(snapshot(pending=[{"id": "a", "resources": {"CPU": 2}}]), types, {"pool": "gpu"})
    assert reasons["a"][0] == "ScalingUp"
    assert bundles == [{"resources": {"CPU": 2}, "label_selector": {"pool": "gpu"}, "count": 1}]


def test_digest_and_description():
    one = [{"resources": {"CPU": 1}, "label_selector": {}, "count": 3},
           {"resources": {"CPU": 8, "GPU": 1}, "label_selector": {"pool": "gpu"}, "count": 1}]
    assert autoscale.digest(one) == autoscale.digest([dict(item) for item in one])
    assert autoscale.digest(one) != autoscale.digest(one[:1])
    assert autoscale.digest([]) != autoscale.digest(one)
    assert autoscale.describe_demand(one) == "3x{CPU 1}; 1x{CPU 8, GPU 1 @pool=gpu}"
    assert autoscale.describe_demand([]) == "none"


def test_the_payload_stays_under_its_size():
    many = [{"resources": {f"r{i}": 1}, "label_selector": {}, "count": 1} for i in range(1000)]
    text, left_out = autoscale.request_payload(many, 1000)
    assert len(text) <= 1000 and left_out > 0
    assert text.startswith('[[{"r0":1},{},1],') and text.endswith("]")
    assert autoscale.request_payload(many[:2], 1000) == ('[[{"r0":1},{},1],[{"r1":1},{},1]]', 0)
    assert autoscale.request_payload([], 1000) == ("[]", 0)


_JOB = st.fixed_dictionaries({
    "resources": st.fixed_dictionaries({"CPU": st.sampled_from([0.5, 1, 2, 4, 8, 9])}),
    "user": st.sampled_from(["alice", "bob"]),
    "node_labels": st.sampled_from([{}, {"pool": "cpu"}, {"pool": "gpu"}]),
})


@settings(max_examples=150, deadline=None)
@given(jobs=st.lists(_JOB, max_size=30), most=st.integers(0, 3), limit=st.none() | st.integers(1, 3))
def test_the_demand_fits_what_the_cluster_could_hold_and_no_more_than_waits(jobs, most, limit):
    types = [CPU.model_copy(update={"max": most}), GPU]
    users = {"alice": {"max_running": limit}} if limit else {}
    snap = snapshot(pending=[{"id": str(i), **job} for i, job in enumerate(jobs)], users=users)
    reasons, bundles = waiting(snap, types)
    waiting_for_resources = [j for j in snap.pending if reasons[j.id][0] in autoscale.WAITS_FOR_RESOURCES]
    assert sum(b["count"] for b in bundles) <= len(waiting_for_resources)
    if not waiting_for_resources:
        assert bundles == []
    if limit:
        bob = sum(1 for j in waiting_for_resources if j.user == "bob")
        assert sum(b["count"] for b in bundles) <= limit + bob
    capacity = sum(t.max * t.resources["CPU"] for t in types)
    assert sum(b["resources"]["CPU"] * b["count"] for b in bundles) <= capacity
    for b in bundles:
        need = Resources.of(b["resources"])
        assert any(t.holds(need, b["label_selector"]) for t in types)


def test_a_job_that_preemption_serves_is_not_asked_for():
    node = {"id": "n1", "resources": {"CPU": 4}, "labels": {"pool": "cpu"}}
    batch = [{"id": "r", "user": "bob", "node": "n1", "resources": {"CPU": 4}, "class": "batch",
              "started_at": "2026-11-29T07:00:00Z"}]
    classes = [{"name": "urgent", "value": 100, "preemptible": False}, {"name": "batch", "value": 0, "preemptible": True}]
    pending = [{"id": "u", "resources": {"CPU": 4}, "class": "urgent"}, {"id": "b", "resources": {"CPU": 4}, "class": "batch"}]
    group = {"priority_classes": classes, "default_class": "batch"}
    reasons, bundles = waiting(snapshot(nodes=[node], running=batch, pending=pending, preemption="priority", **group), [CPU])
    assert reasons["u"][0] == "Preempting" and reasons["b"][0] == "Resources"
    # The running job and the batch job that waits; not the urgent one, which takes the node.
    assert shapes(bundles) == {((("CPU", 4),), ()): 2}
    # Without preemption, the urgent job waits for resources too, and is asked for.
    reasons, bundles = waiting(snapshot(nodes=[node], running=batch, pending=pending, **group), [CPU])
    assert reasons["u"][0] == "Resources" and shapes(bundles) == {((("CPU", 4),), ()): 3}


def test_a_user_limit_of_zero_is_a_limit_for_the_demand_too():
    """A user allowed no GPU never waits for a GPU node: no ScalingUp demand for its GPU job."""
    document = {"group": {"policy": "drf", "selector": "dispersed", "max_resources_per_user": {"GPU": 0}},
                "now": "2026-11-29T08:00:00Z", "nodes": [{"id": "n1", "resources": {"CPU": 4}}],
                "pending": [{"id": "g", "user": "ann", "resources": {"CPU": 1, "GPU": 1}}]}
    snapshot = Snapshot.model_validate(document)
    decided = plan(snapshot)
    types = [NodeType(name="gpu", resources={"CPU": 8, "GPU": 1}, labels={}, max=2)]
    autoscale.scale_up(snapshot, decided, types, {})
    assert autoscale.demand(snapshot, decided, types, {}) == []


def test_the_autoscaling_demand_asks_for_each_bundle_as_its_own_shape():
    node = {"id": "n1", "resources": {"CPU": 4}, "labels": {"pool": "cpu"}}
    gang = {"id": "r", "user": "bob", "node": "n1", "resources": {}, "bundles": [{"CPU": 2}, {"CPU": 2}],
            "bundle_nodes": ["n1", "n1"]}
    pending = [{"id": "a", "resources": {"CPU": 1}, "bundles": [{"CPU": 3}, {"CPU": 3}], "bundle_strategy": "STRICT_SPREAD"}]
    reasons, demand = waiting(snapshot(nodes=[node], running=[gang], pending=pending), [CPU])
    assert reasons["a"][0] == "ScalingUp" and "type cpu" in reasons["a"][1]
    # Its STRICT_SPREAD bundles, on nodes still to come, are asked off the group's node n1.
    assert sorted(((d["resources"], d["label_selector"], d["count"]) for d in demand), key=str) == [
        ({"CPU": 1}, {}, 1), ({"CPU": 2}, {}, 2), ({"CPU": 3}, {"ray.io/node-id": "!in(n1)"}, 2)]


ONE_CPU_NODE = NodeType(name="cpu", resources={"CPU": 4}, labels={"pool": "cpu"}, max=1)
TWO_CPU_NODES = NodeType(name="cpu", resources={"CPU": 4}, labels={"pool": "cpu"}, max=2)


def _gang(ident, bundles, strategy, driver=None):
    return {"id": ident, "resources": driver or {}, "bundles": [{"CPU": c} for c in bundles], "bundle_strategy": strategy}


# (case, node types, pending jobs, the demand's shapes by CPU: count)
GANG_DEMANDS = [
    ("STRICT_PACK: its bundles as one shape, their sum, the driver apart",
     [CPU], [_gang("g", [2, 2], "STRICT_PACK", {"CPU": 1})], {1: 1, 4: 1}),
    ("PACK and SPREAD: each bundle as its own shape",
     [CPU], [_gang("g", [2, 2], "PACK"), _gang("h", [1, 1], "SPREAD")], {2: 2, 1: 2}),
    ("STRICT_SPREAD: asked only if the cluster at its largest holds its bundles apart",
     [ONE_CPU_NODE], [_gang("g", [2, 2], "STRICT_SPREAD")], {}),
    ("STRICT_SPREAD on two nodes that may come",
     [TWO_CPU_NODES], [_gang("g", [2, 2], "STRICT_SPREAD")], {2: 2}),
    ("a gang that does not fit whole gives back what its first parts took: the next job is asked for",
     [ONE_CPU_NODE], [_gang("g", [2, 2, 2], "PACK"), {"id": "j", "resources": {"CPU": 4}}], {4: 1}),
]


def test_a_strict_spread_bundle_counted_on_a_node_to_come_is_asked_off_the_groups_nodes():
    # n1 has room for one bundle: the other is asked for with n1 ruled out, so that Ray adds a node
    # for it rather than count it on n1 beside the first (the stuck state: n1 holds both).
    node = {"id": "n1", "resources": {"CPU": 4}, "labels": {"pool": "cpu"}}
    reasons, demand = waiting(snapshot(nodes=[node], pending=[_gang("g", [2, 2], "STRICT_SPREAD")]), [TWO_CPU_NODES],
                              {"pool": "cpu"})
    assert reasons["g"][0] == "ScalingUp"
    assert sorted(((d["resources"], d["label_selector"], d["count"]) for d in demand), key=str) == [
        ({"CPU": 2}, {"pool": "cpu", "ray.io/node-id": "!in(n1)"}, 1), ({"CPU": 2}, {"pool": "cpu"}, 1)]
    # A group of more nodes than a request may name keeps its own selector.
    big = NodeType(name="big", resources={"CPU": 4}, labels={"pool": "cpu", "size": "big"}, max=2)
    many = [{"id": f"n{i:03}", "resources": {"CPU": 1}, "labels": {"pool": "cpu", "size": "small"}}
            for i in range(autoscale.ELSEWHERE_NODES + 1)]
    _, demand = waiting(snapshot(nodes=many, pending=[_gang("g", [2, 2], "STRICT_SPREAD")]), [big], {"pool": "cpu"})
    assert [(d["label_selector"], d["count"]) for d in demand] == [({"pool": "cpu"}, 2)]


@pytest.mark.parametrize("case, types, pending, expected", GANG_DEMANDS, ids=[c[0] for c in GANG_DEMANDS])
def test_the_demand_asks_for_a_gang_as_its_strategy_places_it(case, types, pending, expected):
    reasons, demand = waiting(snapshot(pending=pending), types)
    assert {d["resources"]["CPU"]: d["count"] for d in demand} == expected, (case, reasons)
    assert all(d["label_selector"] == {} for d in demand)


def test_a_running_strict_pack_gang_is_held_as_one_shape():
    node = {"id": "n1", "resources": {"CPU": 4}, "labels": {"pool": "cpu"}}
    gang = {"id": "r", "user": "bob", "node": "n1", "resources": {}, "bundles": [{"CPU": 2}, {"CPU": 2}],
            "bundle_strategy": "STRICT_PACK", "bundle_nodes": ["n1", "n1"]}
    _, demand = waiting(snapshot(nodes=[node], running=[gang], pending=[{"id": "a", "resources": {"CPU": 4}}]), [CPU])
    assert [(d["resources"], d["count"]) for d in demand] == [({"CPU": 4}, 2)]


def test_a_gang_the_cluster_cannot_hold_whole_even_at_its_largest_is_unschedulable():
    pending = [_gang("g", [2, 2], "STRICT_SPREAD")]
    reasons, demand = waiting(snapshot(pending=pending), [ONE_CPU_NODE])
    assert reasons["g"] == ("Unschedulable", "needs 2 bundles of CPU 2 on separate nodes; no node of group g; "
                                             "nor can any node type the cluster may add")
    assert demand == []
    reasons, _ = waiting(snapshot(pending=pending), [TWO_CPU_NODES])
    assert reasons["g"][0] == "ScalingUp"


def test_an_account_limit_holds_its_users_jobs_out_of_the_demand():
    """Team A may run 2 jobs: of its users' four waiting jobs two are asked for, and both of b's (in
    the root); with A allowed no GPU, none of A's GPU jobs is."""
    def teamed(pending, account):
        return Snapshot.model_validate({
            "group": {"name": "g", "policy": "drf", "selector": "dispersed"}, "now": "2026-11-29T08:00:00Z",
            "nodes": [{"id": "n1", "resources": {"CPU": 1}}], "pending": pending,
            "users": {"a1": {"account": "A"}, "a2": {"account": "A"}}, "accounts": {"A": account}})

    pending = [{"id": f"{user}{i}", "user": user, "resources": {"CPU": 2}} for user in ("a1", "a2", "b") for i in range(2)]
    _, bundles = waiting(teamed(pending, {"max_running": 2}), [CPU])
    assert sum(b["count"] for b in bundles) == 4
    _, bundles = waiting(teamed(pending, {}), [CPU])
    assert sum(b["count"] for b in bundles) == 6
    gpu = [{"id": f"{user}g", "user": user, "resources": {"CPU": 1, "GPU": 1}} for user in ("a1", "a2", "b")]
    reasons, bundles = waiting(teamed(gpu, {"max_resources": {"GPU": 0}}), [GPU])
    # Each waits for a GPU node; only b's is asked for.
    assert {reason for reason, _ in reasons.values()} == {"ScalingUp"} and sum(b["count"] for b in bundles) == 1


# Two clusters: east has a full node and may add CPU nodes; west has none yet and may add GPU nodes.
EAST_CPU = NodeType(name="east-cpu", resources={"CPU": 4}, labels={"ray.io/cluster": "east"}, max=2)
WEST_GPU = NodeType(name="west-gpu", resources={"CPU": 8, "GPU": 1}, labels={"ray.io/cluster": "west"}, max=2)


def test_each_cluster_is_asked_for_what_its_nodes_and_node_types_would_hold():
    snap = snapshot(nodes=[{"id": "e1", "resources": {"CPU": 2}, "labels": {"ray.io/cluster": "east"}}],
                    running=[{"id": "r", "user": "bob", "node": "e1", "resources": {"CPU": 2}}],
                    pending=[{"id": "cpu", "resources": {"CPU": 3}}, {"id": "gpu", "resources": {"CPU": 2, "GPU": 1}}])
    decided = plan(snap)
    autoscale.scale_up(snap, decided, [EAST_CPU, WEST_GPU], {})
    east = autoscale.demand(snap, decided, [EAST_CPU, WEST_GPU], {}, "east")
    west = autoscale.demand(snap, decided, [EAST_CPU, WEST_GPU], {}, "west")
    # East: the running job, and the CPU job on a new CPU node; west: the GPU job on a new GPU node.
    assert shapes(east) == {((("CPU", 2.0),), ()): 1, ((("CPU", 3.0),), ()): 1}
    assert shapes(west) == {((("CPU", 2.0), ("GPU", 1.0)), ()): 1}
    # Both at once, as a group of one cluster asks.
    assert shapes(autoscale.demand(snap, decided, [EAST_CPU, WEST_GPU], {})) == {**shapes(east), **shapes(west)}


def test_a_gang_is_asked_of_one_cluster_whole():
    # e1 (east) has room for one bundle; west's type comes first in the list: taken part by part,
    # the gang's second bundle would go to a west node, and neither cluster could run it.
    west_cpu = NodeType(name="west-cpu", resources={"CPU": 4}, labels={"ray.io/cluster": "west"}, max=2)
    snap = snapshot(nodes=[{"id": "e1", "resources": {"CPU": 2}, "labels": {"ray.io/cluster": "east"}}],
                    pending=[{"id": "gang", "resources": {}, "bundles": [{"CPU": 2}, {"CPU": 2}],
                              "bundle_strategy": "PACK"}])
    decided = plan(snap)
    types = [west_cpu, EAST_CPU]
    autoscale.scale_up(snap, decided, types, {})
    east = autoscale.demand(snap, decided, types, {}, "east")
    assert shapes(east) == {((("CPU", 2.0),), ()): 2}
    assert autoscale.demand(snap, decided, types, {}, "west") == []


def test_a_cluster_no_waiting_job_goes_to_is_asked_for_nothing():
    snap = snapshot(nodes=[{"id": "e1", "resources": {"CPU": 2}, "labels": {"ray.io/cluster": "east"}}],
                    running=[{"id": "r", "user": "bob", "node": "e1", "resources": {"CPU": 2}}],
                    pending=[{"id": "gpu", "resources": {"GPU": 1}}])
    decided = plan(snap)
    autoscale.scale_up(snap, decided, [EAST_CPU, WEST_GPU], {})
    assert autoscale.demand(snap, decided, [EAST_CPU, WEST_GPU], {}, "east") == []
    assert shapes(autoscale.demand(snap, decided, [EAST_CPU, WEST_GPU], {}, "west")) == {((("GPU", 1.0),), ()): 1}


@pytest.mark.parametrize(("clusters", "types", "error"), [
    (["a=http://a:1", "b=http://b:1"], ["x=CPU:4:max=1"],
     "node type 'x': name its cluster, one of a, b, with @ray.io/cluster=NAME"),
    (["a=http://a:1", "b=http://b:1"], ["x=CPU:4@ray.io/cluster=c:max=1"], "node type 'x': name its cluster"),
    (["a=http://a:1", "raycluster://ml/b"], [], "raycluster:// clusters only, or http:// clusters only"),
])
def test_a_group_over_several_clusters_that_autoscales_names_each_node_type_s_cluster(clusters, types, error):
    with pytest.raises(BadInput, match=error.replace("(", r"\(").replace(")", r"\)")):
        validated(GroupSpec, read_fields({"name": "g", "clusters": clusters, "autoscale": "on", "node_types": types}))
    spec = validated(GroupSpec, read_fields({"name": "g", "clusters": ["a=http://a:1", "b=http://b:1"], "autoscale": "on",
                                             "node_types": ["x=CPU:4@ray.io/cluster=b:max=1"]}))
    assert spec.node_types[0]["labels"] == {"ray.io/cluster": "b"}
