"""The snapshot's long lists, read by msgspec first (snapshot.py, `_fast_jobs`), come out as pydantic
gives them; where msgspec could read them otherwise, pydantic does."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import TypeAdapter, ValidationError

from job.core.planner import Snapshot
from job.core.planner.snapshot import PendingJob, RunningJob, _fast_jobs

PENDING = TypeAdapter(list[PendingJob])
RUNNING = TypeAdapter(list[RunningJob])
GROUP = {"policy": "fifo", "selector": "dispersed"}
START = datetime(2026, 11, 29, 8, 0, tzinfo=timezone(timedelta(hours=1)))


@pytest.mark.parametrize("job", [
    {"id": "1", "user": "a", "resources": {"CPU": 1, "memory": 2.5}, "priority": 3, "submitted_at": "2026-11-29T07:00:00Z"},
    {"id": "2", "user": "a", "resources": {}, "node_labels": {"k": "v"}, "class": "high", "not_before": None},
    {"id": "3", "user": "a", "resources": {"CPU": 1}, "bundles": [{"GPU": 1}], "bundle_strategy": "SPREAD",
     "waiting_since": START, "max_runtime_s": 60, "submitted_at": "2026-11-29t07:00:00.123456+05:30"},
])
def test_a_plain_job_is_read_by_msgspec_as_pydantic_reads_it(job):
    assert _fast_jobs([job], PendingJob) == PENDING.validate_python([job])


@pytest.mark.parametrize("change", [
    {"priority": "3"},  # text for a number: pydantic converts it
    {"priority": 3.0},
    {"submitted_at": "2026-11-29T07:00:00.1234567Z"},  # pydantic cuts, msgspec would round
    {"submitted_at": "2026-11-29T07:00:00.9999999+00:00"},
    {"submitted_at": 1_700_000_000},
    {"extra": 1},  # msgspec would drop it, pydantic refuses it
    {"bundles": [{"GPU": 0}]},  # a bundle of nothing
    {"resources": {"CPU": float("inf")}},
    {"resources": {"CPU": float("nan")}},
    {"resources": {"CPU": True}},
    {"max_runtime_s": "60"},
])
def test_what_msgspec_could_read_otherwise_is_left_to_pydantic(change):
    job = {"id": "1", "user": "a", "resources": {"CPU": 1}, **change}
    assert _fast_jobs([job], PendingJob) is None


def test_a_running_job_with_times_as_datetimes_is_read_by_msgspec():
    job = {"id": "1", "user": "a", "node": "n", "resources": {"CPU": 1}, "started_at": START, "stopping": True,
           "expected_end": START + timedelta(hours=1), "bundles": [{"CPU": 1}], "bundle_nodes": ["n"]}
    assert _fast_jobs([job], RunningJob) == RUNNING.validate_python([job])


def test_a_bad_job_is_named_in_pydantics_words():
    jobs = [{"id": "1", "user": "a", "resources": {"CPU": 1}}, {"id": "2", "user": "a", "resources": {"CPU": "1"}}]
    with pytest.raises(ValidationError) as caught:
        Snapshot.model_validate({"group": GROUP, "pending": jobs})
    error = caught.value.errors()[0]
    assert error["loc"] == ("pending", 1, "resources", "CPU")
    assert error["msg"] == "Input should be a valid number"
