"""The autoscale step of a group's tick: what the queue needs, handed to Ray's autoscaler.

Ray's documented call, `ray.autoscaler.sdk.request_resources`, needs a driver connected to the
cluster; the scheduler talks to Ray only over the dashboard's HTTP API and never imports ray (it
costs seconds in a process that lives a minute). So the call is made by a tiny Ray job, submitted
through the Job Submission API the tick already uses: its entrypoint connects, calls
`request_resources` with the demand and exits, on the head node (always there, even when the
cluster has scaled to no worker) and with no resources of its own (a head that keeps its CPUs to
itself, `num-cpus: 0` as KubeRay advises, still runs it). The call runs with the cluster's own Ray,
which picks where the request goes: the GCS's cluster resource constraint for autoscaler v2, the
internal KV for v1. Either way the request stays after the driver exits, until the next call
replaces it (the sdk: "This request is persistent until another call to request_resources() is
made to override."). The demand travels as JSON in an environment variable of the job, never
through a shell.

At most one demand job is in flight per group, so that an older request never lands after a newer
one. Its submission id is written in the group state before it is sent, as jobs' intents are; the
next ticks look it up by that id, record its demand as sent once it has succeeded, and delete it
from Ray's job history a few seconds after it ended (checking on the next ticks that Ray no longer
has it), which so keeps no job of ours. A demand job still running after DEMAND_TIMEOUT_S is stopped.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from job import log
from job.adapters.ray_cluster import RayCluster, RaySubmitRefused
from job.core import autoscale, specs
from job.core.clusters import CLUSTER_LABEL
from job.core.errors import BadInput, Unavailable
from job.core.group import GroupConfig
from job.core.planner import Plan, Snapshot
from job.core.specs import NodeType
from job.scheduler.report import GroupResult, Steps
from job.store import DictConnection, groups

STATE = "autoscale"
DEMAND_TIMEOUT_S = 120
# Ray's job manager polls a job's supervisor about every second until it sees the job ended.
DELETE_AFTER_S = 10
# Linux refuses an environment string longer than 128 KiB; this leaves room.
MAX_DEMAND_BYTES = 64 * 1024
DEMAND_VARIABLE = "JOB_AUTOSCALE_DEMAND"
ENTRYPOINT = (
    'python -c "import json, os, ray; from ray.autoscaler.sdk import request_resources; '
    f"demand = json.loads(os.environ['{DEMAND_VARIABLE}']); ray.init(log_to_driver=False); "
    "request_resources(bundles=[r for r, s, n in demand for _ in range(n)], "
    'bundle_label_selectors=[s for r, s, n in demand for _ in range(n)])"'
)
_ENDED = ("SUCCEEDED", "FAILED", "STOPPED")


def group_node_types(group: GroupConfig) -> list[NodeType]:
    """The node types of an autoscaling group: its RayClusters' worker groups, or its own option.
    In a group over several clusters each type carries its cluster's label (CLUSTER_LABEL): read
    from a RayCluster, it is given it; given with `--node-type`, it names it (specs.py checks)."""
    found: list[NodeType] = []
    for cluster in group.clusters:
        if cluster.address.startswith("raycluster://"):
            from job.adapters.kuberay import node_types

            read = node_types(cluster.address)
            if len(group.clusters) > 1:
                read = [t.model_copy(update={"labels": {**t.labels, CLUSTER_LABEL: cluster.name}}) for t in read]
            found += read
    if not found:
        try:
            found = specs.parse_node_types(group.node_types)
        except ValueError as exc:
            # A row written around `group set`: this group fails its tick, the others go on.
            raise BadInput(f"group {group.name}: node_types: {exc}") from None
    return autoscale.of_group(found, group.node_labels)


def plan_demand(snapshot: Snapshot, decided: Plan, group: GroupConfig, types: list[NodeType]) -> dict[str, list[dict]]:
    """Marks the jobs that wait for the cluster to grow (`ScalingUp`) and returns the demand of
    each cluster, by name."""
    autoscale.scale_up(snapshot, decided, types, group.node_labels)
    if len(group.clusters) == 1:
        return {group.clusters[0].name: autoscale.demand(snapshot, decided, types, group.node_labels)}
    return {c.name: autoscale.demand(snapshot, decided, types, group.node_labels, c.name)
            for c in group.clusters if not c.removing}


def send_demand(conn: DictConnection, cluster: RayCluster, group: GroupConfig, installation: str, state: dict,
                bundles: list[dict], now: datetime, result: GroupResult, steps: Steps, part: str | None = None) -> None:
    """Settles the demand job in flight, if any, then sends the demand if it changed since the
    last one Ray took. Writes the group's autoscale state in its own transaction. `part`: the
    cluster's name, in a group over several (each has its own demand, state and demand jobs)."""
    name = group.name if part is None else f"{group.name}-{part}"
    key = STATE if part is None else f"{STATE}.{part}"
    before = state.get(key) or {}
    document = dict(before)
    digest = autoscale.digest(bundles)
    described = autoscale.describe_demand(bundles)
    result.demand = described if part is None else "; ".join(filter(None, (result.demand, f"{part}: {described}")))
    document["ended"] = steps.ray(_forget, cluster, document.get("ended", []), now)
    sending = document.get("sending")
    if sending is not None:
        sending = steps.ray(_settle, cluster, name, sending, document, now)
        document["sending"] = sending
    if sending is None and digest != document.get("sent"):
        document["sends"] = document.get("sends", 0) + 1
        submission_id = f"autoscale-{installation}-{name}-{document['sends']}"
        document["sending"] = {"submission_id": submission_id, "digest": digest, "at": now.isoformat()}
        groups.save_group_state(conn, group.name, {key: document})
        conn.commit()
        document["sending"] = steps.ray(_submit, cluster, name, document["sending"], bundles)
        result.demand_sent = document["sending"] is not None
    if document != before:
        groups.save_group_state(conn, group.name, {key: document})
        conn.commit()


def _settle(cluster: RayCluster, group: str, sending: dict, document: dict, now: datetime) -> dict | None:
    """What is left in flight of the demand job `sending`: None once it has ended (its demand
    recorded as sent if it succeeded, the job left for `_forget` to delete) or if Ray never got it."""
    submission_id = sending["submission_id"]
    job = cluster.job(submission_id)
    if job is None:
        return None
    if job.status not in _ENDED:
        if now - datetime.fromisoformat(sending["at"]) > timedelta(seconds=DEMAND_TIMEOUT_S):
            cluster.stop(submission_id)
            log.warning("demand_timeout", group=group, submission_id=submission_id, status=job.status,
                        message=f"the demand job ran past {DEMAND_TIMEOUT_S}s: stopped")
        return sending
    if job.status == "SUCCEEDED":
        document["sent"] = sending["digest"]
        log.event("demand_registered", group=group, submission_id=submission_id, digest=sending["digest"])
    else:
        log.warning("demand_failed", group=group, submission_id=submission_id, status=job.status,
                    message=job.message or "")
    document["ended"].append(submission_id)
    return None


def _forget(cluster: RayCluster, ended: list[str], now: datetime) -> list[str]:
    """The ended demand jobs Ray still has: each is deleted once it has been over for
    DELETE_AFTER_S, and kept in the list until Ray no longer has it. Deleted at once, a job comes
    back: Ray's job manager, polling the job's supervisor it no longer finds a record for, writes
    a new one (FAILED, "Job supervisor actor died"), as seen on the test cluster."""
    left = []
    for submission_id in ended:
        job = cluster.job(submission_id)
        if job is None:
            continue
        if job.status in _ENDED and job.end_time is not None and now - job.end_time > timedelta(seconds=DELETE_AFTER_S):
            cluster.delete(submission_id)
        left.append(submission_id)
    return left


def _submit(cluster: RayCluster, group: str, sending: dict, bundles: list[dict]) -> dict | None:
    payload, left_out = autoscale.request_payload(bundles, MAX_DEMAND_BYTES)
    if left_out:
        log.warning("demand_truncated", group=group, left_out=left_out,
                    message=f"{left_out} request shapes left out: the demand must stay under {MAX_DEMAND_BYTES} bytes")
    try:
        cluster.submit(submission_id=sending["submission_id"], entrypoint=ENTRYPOINT, node_id=cluster.head_node_id(),
                       resources={}, runtime_env={"env_vars": {DEMAND_VARIABLE: payload}},
                       metadata={"scheduler.group": group, "scheduler.kind": "autoscale-demand"})
    except RaySubmitRefused as exc:
        log.warning("demand_refused", group=group, submission_id=sending["submission_id"], message=str(exc))
        return None
    except Unavailable as exc:
        # Kept in flight: the next tick looks it up, and sends again if Ray never got it.
        log.warning("demand_unsent", group=group, submission_id=sending["submission_id"], message=str(exc))
        return sending
    log.event("demand_sent", group=group, submission_id=sending["submission_id"], demand=autoscale.describe_demand(bundles))
    return sending
