"""Records Ray's answers to requests it refuses, and to one it has no answer for, from a real local
cluster, into ray_answers.json beside this file (read by test_ray_answers.py). Run it again after
upgrading Ray: `python tests/adapters/record_ray_answers.py`."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import requests

from job.devtools.local_ray import GIB, MIB, LocalRayCluster, NodeSpec

ANSWERS = Path(__file__).with_name("ray_answers.json")


def _submission(**fields) -> dict:
    return {"entrypoint": "true", "submission_id": f"record-{uuid.uuid4().hex[:8]}", "runtime_env": {},
            "metadata": {}, **fields}


def _requests(address: str) -> list[tuple[str, str, str, dict | None]]:
    """(case, method, path, body): the submissions Ray refuses, and the lookups of what it lacks."""
    taken = _submission()
    requests.post(address + "/api/jobs/", json=taken, timeout=30).raise_for_status()
    return [
        ("entrypoint_too_large", "POST", "/api/jobs/", _submission(entrypoint="echo " + "x" * (2 * 1024 * 1024))),
        ("duplicate_submission_id", "POST", "/api/jobs/", taken),
        ("invalid_label_selector", "POST", "/api/jobs/",
         _submission(entrypoint_label_selector={"ray.io/node-id": "in(,"})),
        ("runtime_env_not_a_dict", "POST", "/api/jobs/", _submission(runtime_env="conda")),
        ("unknown_field", "POST", "/api/jobs/", _submission(no_such_field=1)),
        ("negative_cpus", "POST", "/api/jobs/", _submission(entrypoint_num_cpus=-1)),
        ("not_json", "POST", "/api/jobs/", None),
        ("unknown_job", "GET", "/api/jobs/record-unknown", None),
        ("stop_unknown_job", "POST", "/api/jobs/record-unknown/stop", None),
    ]


def record() -> list[dict]:
    with LocalRayCluster(NodeSpec(cpus=1, memory_bytes=1 * GIB, object_store_bytes=100 * MIB), []) as local:
        answers = []
        for case, method, path, body in _requests(local.dashboard_url):
            response = requests.request(method, local.dashboard_url + path, timeout=60,
                                        **({"json": body} if body is not None else {"data": b"{not json"}))
            answers.append({"case": case, "method": method, "path": path, "status": response.status_code,
                            "text": response.text[-4000:]})
    return answers


if __name__ == "__main__":
    ANSWERS.write_text(json.dumps(record(), indent=1) + "\n")
    print(f"wrote {ANSWERS}")
