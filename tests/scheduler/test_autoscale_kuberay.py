"""A raycluster:// group's node types, read from RayCluster objects shaped as KubeRay writes them,
through the fake Kubernetes API server of test_raycluster.py, as Ray's own KubeRay autoscaler
reads them (resources from `resources`, rayStartParams, then the Ray container's limits)."""

from __future__ import annotations

import copy

import pytest
from fake_kubernetes import kuberay_raycluster, ready_status

from job.adapters import kuberay
from job.core import autoscale
from job.core.group import GroupConfig
from job.core.planner import Snapshot, plan
from job.scheduler.autoscale import group_node_types


def worker_group(name: str, limits: dict, *, params: dict | None = None, **fields) -> dict:
    """A workerGroupSpec as KubeRay's samples write it (ray-cluster.autoscaler.yaml)."""
    return {
        "groupName": name, "replicas": 0, "minReplicas": 0, "maxReplicas": 4, "numOfHosts": 1,
        "rayStartParams": params or {},
        "template": {"spec": {"containers": [{
            "name": "ray-worker", "image": "rayproject/ray:2.60.0",
            "resources": {"limits": limits, "requests": {k: v for k, v in limits.items() if not k.endswith("gpu")}},
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}},
        }]}},
        **fields,
    }


def autoscaling_cluster(groups: list[dict], enabled: bool = True) -> dict:
    cluster = kuberay_raycluster("ml", "shared", ready_status("shared"))
    cluster["spec"].update({
        "enableInTreeAutoscaling": enabled,
        "autoscalerOptions": {"upscalingMode": "Default", "idleTimeoutSeconds": 60, "version": "v2"},
        "workerGroupSpecs": groups,
    })
    # The head keeps its CPUs to itself, as KubeRay advises for autoscaling clusters.
    cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = "0"
    return cluster


GROUPS = [
    worker_group("cpu", {"cpu": "4", "memory": "16Gi"}, maxReplicas=10),
    worker_group("gpu", {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
                 params={"num-cpus": "6", "resources": '"{\\"A100\\": 1}"'}, labels={"ray.io/accelerator-type": "A100"}),
    # KubeRay 1.5's top-level resources win over everything else; numOfHosts multiplies the max.
    worker_group("slice", {"cpu": "1"}, resources={"CPU": "500m", "TPU": "4", "memory": "1G"}, numOfHosts=2, maxReplicas=3),
    worker_group("old-labels", {"cpu": "2500m"}, params={"labels": "pool=spot,market=spot"}, minReplicas=1),
    worker_group("paused", {"cpu": "4"}, suspend=True),
]


def test_worker_groups_become_node_types(api):
    api.objects[("ml", "shared")] = autoscaling_cluster(copy.deepcopy(GROUPS))
    types = {t.name: t for t in kuberay.node_types("raycluster://ml/shared")}
    assert list(types) == ["cpu", "gpu", "slice", "old-labels"]
    assert types["cpu"].resources == {"CPU": 4, "memory": 16 * 2**30}
    assert types["cpu"].labels == {"ray.io/node-group": "cpu"} and (types["cpu"].min, types["cpu"].max) == (0, 10)
    assert types["gpu"].resources == {"CPU": 6, "GPU": 1, "memory": 32 * 2**30, "A100": 1}
    assert types["gpu"].labels == {"ray.io/node-group": "gpu", "ray.io/accelerator-type": "A100"}
    assert types["slice"].resources == {"CPU": 1, "TPU": 4, "memory": 10**9} and types["slice"].max == 6
    assert types["old-labels"].resources == {"CPU": 3}
    assert types["old-labels"].labels == {"ray.io/node-group": "old-labels", "pool": "spot", "market": "spot"}
    assert types["old-labels"].min == 1


def test_a_worker_group_that_cannot_be_read_is_left_out_with_a_warning(api, capsys, info_log):
    unreadable = worker_group("mystery", {})
    unreadable["template"]["spec"]["containers"][0]["resources"] = {}
    api.objects[("ml", "shared")] = autoscaling_cluster([unreadable, worker_group("bad-quantity", {"cpu": "four"}),
                                                         copy.deepcopy(GROUPS[0])])
    assert [t.name for t in kuberay.node_types("raycluster://ml/shared")] == ["cpu"]
    skipped = [line for line in capsys.readouterr().err.splitlines() if "event=raycluster_node_type_skipped" in line]
    assert len(skipped) == 2
    assert "node_type=mystery" in skipped[0] and "a node type has some resources" in skipped[0]
    assert "node_type=bad-quantity" in skipped[1] and "'four' is not a Kubernetes quantity" in skipped[1]


def test_a_cluster_without_in_tree_autoscaling_cannot_grow(api):
    api.objects[("ml", "shared")] = autoscaling_cluster(copy.deepcopy(GROUPS), enabled=False)
    assert kuberay.node_types("raycluster://ml/shared") == []


@pytest.mark.parametrize(("labels", "expected"), [
    ({}, ["cpu", "gpu", "slice", "old-labels"]),
    ({"ray.io/node-group": "gpu"}, ["gpu"]),
    ({"pool": "spot"}, ["old-labels"]),
])
def test_a_group_with_node_labels_grows_only_by_its_node_types(api, labels, expected):
    api.objects[("ml", "shared")] = autoscaling_cluster(copy.deepcopy(GROUPS))
    group = GroupConfig(name="g", clusters=["raycluster://ml/shared"], node_labels=labels, node_types=[])
    assert [t.name for t in group_node_types(group)] == expected


def test_a_cluster_scaled_to_no_worker_plans_scaling_up_and_asks_for_its_jobs(api):
    api.objects[("ml", "shared")] = autoscaling_cluster(copy.deepcopy(GROUPS))
    types = group_node_types(GroupConfig(name="g", clusters=["raycluster://ml/shared"], node_labels={}, node_types=[]))
    snapshot = Snapshot.model_validate({
        "group": {"name": "ml", "policy": "fifo", "selector": "dispersed"}, "now": "2026-11-29T08:00:00Z",
        "pending": [{"id": "train", "user": "alice", "resources": {"GPU": 1, "CPU": 4},
                     "node_labels": {"ray.io/accelerator-type": "A100"}},
                    {"id": "etl", "user": "bob", "resources": {"CPU": 2}},
                    {"id": "huge", "user": "bob", "resources": {"CPU": 64}}],
    })
    decided = plan(snapshot)
    autoscale.scale_up(snapshot, decided, types, {})
    reasons = {w["job"]: (w["reason"], w["message"]) for w in decided.waiting}
    assert reasons["train"][0] == "ScalingUp" and "a node of type gpu" in reasons["train"][1]
    assert reasons["etl"][0] == "ScalingUp" and "a node of type cpu" in reasons["etl"][1]
    assert reasons["huge"][0] == "Unschedulable"
    assert autoscale.demand(snapshot, decided, types, {}) == [
        {"resources": {"CPU": 4, "GPU": 1}, "label_selector": {"ray.io/accelerator-type": "A100"}, "count": 1},
        {"resources": {"CPU": 2}, "label_selector": {}, "count": 1},
    ]
