"""The tick's submit step: every committed intent goes to Ray, a few at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from job import log
from job.adapters.ray_cluster import RayCluster, RaySubmitRefused
from job.core import states
from job.core.errors import JobError, Unavailable
from job.core.specs import RESERVED_METADATA_PREFIX as PREFIX


def submit_intents(cluster: RayCluster, group: str, intents: list[dict], concurrency: int,
                   allowed_runtime_env_keys: frozenset[str]
                   ) -> tuple[list[int], dict[int, tuple[str, str, str]]]:
    """Returns the ids Ray has, and those Ray refused (to return to PENDING). An intent whose fate
    is unknown (Ray unreachable) stays SUBMITTING: the next tick looks its submission_id up in Ray."""
    submitted: list[int] = []
    refused: dict[int, tuple[str, str, str]] = {}
    if not intents:
        return submitted, refused
    unavailable = None
    with ThreadPoolExecutor(max_workers=min(concurrency, len(intents))) as pool:
        for intent, exc in pool.map(lambda intent: _submit_one(cluster, intent, allowed_runtime_env_keys), intents):
            if exc is None:
                submitted.append(intent["id"])
            elif isinstance(exc, RaySubmitRefused):
                refused[intent["id"]] = (states.SUBMITTING, "SubmitRefused", str(exc))
            else:
                unavailable = exc
                log.warning("submit_unknown", group=group, job=intent["id"],
                            submission_id=intent["submission_id"], cause=str(exc) or type(exc).__name__)
    if unavailable is not None and not submitted and not refused:
        raise unavailable if isinstance(unavailable, JobError) else Unavailable(str(unavailable))
    return submitted, refused


def _submit_one(cluster: RayCluster, intent: dict, allowed_runtime_env_keys: frozenset[str]
                ) -> tuple[dict, Exception | None]:
    metadata = {**intent["metadata"], f"{PREFIX}job_id": str(intent["id"]), f"{PREFIX}user": intent["user_name"],
                f"{PREFIX}group": intent["group_name"], f"{PREFIX}attempt": str(intent["attempt"])}
    try:
        cluster.submit(submission_id=intent["submission_id"], entrypoint=intent["entrypoint"],
                       node_id=intent["node"], resources=intent["resources"],
                       runtime_env=intent["runtime_env"], metadata=metadata,
                       allowed_runtime_env_keys=allowed_runtime_env_keys)
        return intent, None
    except Exception as exc:  # sorted out by the caller; one job's failure must not end the others
        return intent, exc
