"""The tick's submit step: every committed intent goes to Ray, a few at a time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from job import log
from job.adapters.ray_cluster import RayCluster, RaySubmitRefused
from job.core import states
from job.core.errors import JobError, Unavailable
from job.core.group import GroupConfig
from job.core.job import Intent
from job.core.specs import RESERVED_METADATA_PREFIX as PREFIX


def submit_clusters(sent: list[tuple[RayCluster, list[Intent]]], group: GroupConfig, concurrency: int
                    ) -> tuple[list[int], dict[int, tuple[str, str, str]]]:
    """`submit_intents` in each cluster, the clusters at once. In a group of several clusters, one
    that fails leaves its intents SUBMITTING (the next tick looks them up) and the others go on."""
    if len(sent) <= 1 and len(group.clusters) == 1:
        return submit_intents(sent[0][0], group, sent[0][1], concurrency) if sent else ([], {})
    submitted: list[int] = []
    refused: dict[int, tuple[str, str, str]] = {}

    def one(cluster: RayCluster, intents: list[Intent]) -> tuple[list[int], dict[int, tuple[str, str, str]]]:
        try:
            return submit_intents(cluster, group, intents, concurrency)
        except JobError as exc:
            log.warning("submit_unknown", group=group.name, cluster=cluster.shown_address, jobs=len(intents),
                        cause=str(exc))
            return [], {}

    with ThreadPoolExecutor(max_workers=max(len(sent), 1)) as pool:
        for ids, refusals in pool.map(lambda pair: one(*pair), sent):
            submitted += ids
            refused |= refusals
    return submitted, refused


def submit_intents(cluster: RayCluster, group: GroupConfig, intents: list[Intent], concurrency: int
                   ) -> tuple[list[int], dict[int, tuple[str, str, str]]]:
    """Returns the ids Ray has, and those Ray refused (to return to PENDING). An intent whose fate
    is unknown (Ray unreachable) stays SUBMITTING: the next tick looks its submission_id up in Ray."""
    submitted: list[int] = []
    refused: dict[int, tuple[str, str, str]] = {}
    if not intents:
        return submitted, refused
    unavailable = None
    with ThreadPoolExecutor(max_workers=min(concurrency, len(intents))) as pool:
        for intent, exc in pool.map(lambda intent: _submit_one(cluster, intent, group), intents):
            if exc is None:
                submitted.append(intent.id)
            elif isinstance(exc, RaySubmitRefused):
                refused[intent.id] = (states.SUBMITTING, "SubmitRefused", str(exc))
            else:
                unavailable = exc
                log.warning("submit_unknown", group=group.name, job=intent.id,
                            submission_id=intent.submission_id, cause=str(exc) or type(exc).__name__)
    if unavailable is not None and not submitted and not refused:
        raise unavailable if isinstance(unavailable, JobError) else Unavailable(str(unavailable))
    return submitted, refused


def bundles_json(intent: Intent) -> str:
    """`[{"resources": {...}, "node": "<node id>"}, ...]`, one per bundle, in the bundles' order."""
    assert intent.bundles is not None, "called for an intent with bundles (_submit_one)"
    nodes: Sequence[str | None] = intent.bundle_nodes or [None] * len(intent.bundles)
    return json.dumps([{"resources": bundle, "node": node} for bundle, node in zip(intent.bundles, nodes, strict=True)])


def _submit_one(cluster: RayCluster, intent: Intent, group: GroupConfig) -> tuple[Intent, Exception | None]:
    job_class = group.job_class(intent.priority_class)
    stoppable = "true" if group.preemptible(intent.priority_class) else "false"
    metadata = {**intent.metadata, f"{PREFIX}job_id": str(intent.id), f"{PREFIX}user": intent.user_name,
                f"{PREFIX}group": intent.group_name, f"{PREFIX}attempt": str(intent.attempt),
                f"{PREFIX}class": job_class, f"{PREFIX}preemptible": stoppable}
    # So that the entrypoint knows whether it may be stopped to make room, and can checkpoint.
    known = {"JOB_ID": str(intent.id), "JOB_ATTEMPT": str(intent.attempt), "JOB_CLASS": job_class,
             "JOB_PREEMPTIBLE": stoppable}
    if intent.bundles:
        # Its footprint, for its own placement group to claim (pinned by the label ray.io/node-id if
        # it likes): the scheduler makes no reservation in Ray that the job's would queue behind.
        footprint = {"JOB_BUNDLES": bundles_json(intent), "JOB_BUNDLE_STRATEGY": intent.bundle_strategy or "PACK"}
        known |= footprint
        metadata |= {f"{PREFIX}bundles": footprint["JOB_BUNDLES"], f"{PREFIX}bundle_strategy": footprint["JOB_BUNDLE_STRATEGY"]}
    if intent.array_id is not None:
        known |= {"JOB_ARRAY_ID": str(intent.array_id), "JOB_ARRAY_INDEX": str(intent.array_index)}
        metadata |= {f"{PREFIX}array_id": str(intent.array_id), f"{PREFIX}array_index": str(intent.array_index)}
    env_vars = intent.runtime_env.get("env_vars", {})
    # A malformed env_vars is left as it is, for the adapter to refuse as the job's own fault.
    runtime_env = {**intent.runtime_env, "env_vars": {**env_vars, **known}} if isinstance(env_vars, dict) else intent.runtime_env
    try:
        cluster.submit(submission_id=intent.submission_id, entrypoint=intent.entrypoint,
                       node_id=intent.node, resources=intent.resources,
                       runtime_env=runtime_env, metadata=metadata,
                       allowed_runtime_env_keys=frozenset(group.allowed_runtime_env_keys),
                       allowed_env_vars=frozenset(group.allowed_env_vars))
        return intent, None
    except Exception as exc:  # sorted out by the caller; one job's failure must not end the others
        return intent, exc
