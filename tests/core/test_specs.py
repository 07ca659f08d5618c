"""What a submitter sends is bounded before it is read, and refused in one short line naming the
field: counts of resource names, labels, metadata keys and bundles; numbers and times out of range;
JSON PostgreSQL cannot store; names with control characters."""

from __future__ import annotations

import pytest

from job import api
from job.core.errors import BadInput
from job.core.specs import JobSpec, expand_bundles, validated

JOB = {"user": "alice", "group": "gpu", "entrypoint": "python train.py"}
# Each map's first entry is malformed: a refusal of the count shows it was counted before any was read.
NAMES = {"cpu": 1, **{f"r{i}": 1 for i in range(64)}}
LABELS = {"bad key": "x", **{f"k{i}": "v" for i in range(32)}}
METADATA = {"k": 1, **{f"k{i}": "v" for i in range(64)}}
DEEP: dict = {}
for _ in range(5000):
    DEEP = {"a": DEEP}


@pytest.mark.parametrize("fields, message", [
    ({"resources": NAMES}, "resources: at most 64 resource names, got 65"),
    ({"bundles": [NAMES]}, "bundles: bundle 1: at most 64 resource names, got 65"),
    ({"node_labels": LABELS}, "node_labels: at most 32 labels, got 33"),
    ({"metadata": METADATA}, "metadata: at most 64 keys, got 65"),
    ({"not_before": "9999-12-31T23:59:59-14:00"}, "not_before: '9999-12-31T23:59:59-14:00' is out of range"),
    ({"max_runtime_s": 1e308}, "max_runtime_s: a duration must be at most 100 years"),
    ({"max_runtime_s": 10**3999}, "max_runtime_s: a duration must be at most 100 years"),
    ({"resources": {"CPU": 10**3999}}, "resources: CPU: at most 922337203685477"),
    # A key the group allows is stored as given: it must be JSON that PostgreSQL's jsonb takes.
    ({"runtime_env": {"extra": float("nan")}}, "runtime_env: must be JSON PostgreSQL can store: Out of range float values"),
    ({"runtime_env": {"extra": DEEP}}, "runtime_env: nested too deeply to store"),
    ({"metadata": {"a\nb": 1}}, "metadata.'a\\nb': Input should be a valid string"),
    ({"user": "al\x00ice"}, "user: 'al\\x00ice' is not a valid user name"),
    ({"priority": True}, "priority: True is not a whole number"),
    ({"group": "g\x1b[2J" * 100_000}, "group: 'g\\x1b[2Jg\\x1b[2Jg\\x1b[2Jg\\x1b[2Jg\\x1... is not a valid group name"),
])
def test_a_submission_out_of_bounds_is_refused_in_one_short_line(fields, message):
    with pytest.raises(BadInput) as refused:
        validated(JobSpec, {**JOB, **fields}, context={"allowed_runtime_env_keys": frozenset({"extra"})})
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value) and len(str(refused.value)) < 300


def test_bundles_are_counted_as_they_are_expanded():
    with pytest.raises(ValueError, match="at most 64 bundles, got 65"):
        expand_bundles(["64xCPU=1", "CPU=1", *["64xCPU=1"] * 1000], "=", "4xGPU=1,CPU=8")


@pytest.mark.parametrize("ident", ["7\x00", True, 0, 2**63, 1.0])
def test_cancel_refuses_what_is_not_a_job_id_before_the_database_is_asked(ident):
    with pytest.raises(BadInput, match=r"ids: .* is not a job id"):
        api.cancel([ident], database_url="postgresql://nobody@127.0.0.1:1/none")
