"""pytest plugin: `ray_cluster`, one Ray cluster for the whole test run.

By default a local cluster is started once (about 20-40 s on a two-core machine) and stopped at the
end of the run: a head with 1 CPU, worker A (2 CPUs, label pool=a) and worker B (2 CPUs, resource
special=1, label pool=b), each with 1 GiB memory and a 100 MiB object store.

JOB_TEST_RAY_ADDRESS=http://host:8265 uses that cluster instead. It must have exactly one alive
node labelled pool=a with 2 CPUs and no `special` resource, and exactly one labelled pool=b with
2 CPUs and special=1 (start them with `ray start ... --labels pool=a` and `--labels pool=b
--resources '{"special": 1}'`); tests leave their finished jobs in its job history.

Tests that use the fixture carry the `ray` marker.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil
import pytest

from job.adapters.ray_cluster import RayCluster
from job.core.errors import Unavailable
from job.devtools.local_ray import GIB, MIB, LocalRayCluster, NodeSpec

HEAD = NodeSpec(cpus=1, memory_bytes=1 * GIB, object_store_bytes=100 * MIB)
WORKER_A = NodeSpec(cpus=2, labels={"pool": "a"}, memory_bytes=1 * GIB, object_store_bytes=100 * MIB)
WORKER_B = NodeSpec(cpus=2, resources={"special": 1}, labels={"pool": "b"}, memory_bytes=1 * GIB,
                    object_store_bytes=100 * MIB)


@dataclass(frozen=True)
class RayTestCluster:
    address: str  # the dashboard URL, what a resource group's cluster address holds
    head_id: str
    a_id: str
    b_id: str


def _only(cluster: RayCluster, pool: str) -> str:
    nodes = cluster.nodes({"pool": pool}, use_head_node=True)
    assert len(nodes) == 1, f"the test cluster needs exactly one alive node labelled pool={pool}, found {len(nodes)}"
    return nodes[0].id


def _describe(address: str) -> RayTestCluster:
    cluster = RayCluster(address, timeout_s=10.0)
    [head] = [node for node in cluster.nodes({}, use_head_node=True) if node.is_head]
    return RayTestCluster(address=address, head_id=head.id, a_id=_only(cluster, "a"), b_id=_only(cluster, "b"))


def _claim_for_this_worker(tmp_path_factory) -> None:
    """Under pytest-xdist, the first worker to ask for the cluster owns it; another worker asking
    means the Ray tests were split between workers, each with a cluster of its own: a failure, not a
    slow run. pytest 9.2 with pytest-xdist 3.8 does that without a word (pytest-xdist#1386)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return
    # The workers' temporary folders share their parent, made anew for each run.
    claim = tmp_path_factory.getbasetemp().parent / "ray-cluster-owner"
    try:
        with open(claim, "x") as out:
            out.write(worker)
    except FileExistsError:
        pytest.fail(f"the Ray tests ran on xdist workers {claim.read_text()} and {worker}: they must all go to one "
                    "(the group `ray` of tests/fixtures_ray.py); is pytest-xdist's --dist loadgroup in effect?")


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    address = os.environ.get("JOB_TEST_RAY_ADDRESS")
    if address:
        yield _describe(address)
        return
    _claim_for_this_worker(tmp_path_factory)
    local = LocalRayCluster(HEAD, [WORKER_A, WORKER_B])
    try:
        address = local.start()
        yield _describe(address)
        processes = local.processes()
    finally:
        local.stop()
    # Nothing of the cluster may outlive the run: another engineer's cluster may share the machine,
    # so `ray stop` is never an option for cleaning up after us.
    survivors = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not survivors, f"processes of the test Ray cluster left after stop(): {survivors}"


# A job stopped while Ray builds its runtime env holds what its supervisor asked for until the
# build ends, with no actor alive to list (PENDING_CREATION): seen for 30 s here and over two
# minutes on a slow machine (tests/adapters/test_ray_adapter.py's pip environment, which now asks
# for nothing). A wait on Ray's state, bounded so that a real leak still fails.
IDLE_TIMEOUT_S = 240


def _holders(cluster: RayCluster) -> str:
    """What holds resources, as Ray lists it: the alive actors and running tasks that ask for any,
    by job and name (a job's supervisor actor is named after its submission id), and the placement
    groups not removed."""
    try:
        work = cluster.work()
    except Unavailable as exc:
        return f"holders not listed: {exc}"
    held = [f"{kind} {item.name or '(unnamed)'} of job {item.job_id} on {(item.node or '?')[:12]}: {item.resources.amounts()}"
            for kind, items in (("actor", work.actors), ("task", work.tasks)) for item in items if item.resources]
    held += [f"placement group {group.id[:12]} of job {group.creator_job_id} ({group.state}): {len(group.bundles)} bundles"
             for group in work.placement_groups]
    return "holders: " + ("; ".join(held) if held else "none listed")


@pytest.fixture(autouse=True)
def _ray_idle_before_each_test(request):
    """A test on the shared cluster starts with every node idle, as Ray reports it. Jobs an earlier
    test stopped release their resources a few seconds later (Ray's stop is a signal, then a
    kill after a grace period): meanwhile the tick would rightly see them as outside load."""
    if request.node.get_closest_marker("ray") is None or "ray_cluster" not in request.fixturenames:
        yield
        return
    cluster = RayCluster(request.getfixturevalue("ray_cluster").address, timeout_s=10.0)
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while True:
        busy = {node.id[:12]: {name: total - free.get(name, total) for name, total in node.resources.items()
                               if free.get(name, total) < total}
                for node in cluster.nodes({}, use_head_node=True) for free in [node.free or node.resources]}
        busy = {node: held for node, held in busy.items() if held}
        if not busy:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the test Ray cluster is still busy after {IDLE_TIMEOUT_S} s (an earlier test left work "
                        f"running?): held per node {busy}; {_holders(cluster)}")
        time.sleep(0.5)
    yield


@pytest.fixture
def ray(ray_cluster, conn):
    """The shared test cluster; at the end, whatever this test left running in Ray is stopped, so
    the next test finds the nodes free."""
    yield ray_cluster
    cluster = RayCluster(ray_cluster.address, timeout_s=10.0)
    for row in conn.execute("SELECT submission_id FROM jobs WHERE state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING')"):
        cluster.stop(row["submission_id"])


# Before pytest-xdist's own hook, which reads the groups.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # Under pytest-xdist (the README's test command runs two workers), every test on Ray goes to one
    # worker, one after another: one test cluster per run, and a test that starts a cluster of its
    # own never starts it beside another's start. Any other test goes with its module, so that a
    # module's expensive fixture (an installed image, a million finished jobs) is made once.
    for item in items:
        ray = item.get_closest_marker("ray") is not None
        item.add_marker(pytest.mark.xdist_group("ray" if ray else item.nodeid.partition("::")[0]))
