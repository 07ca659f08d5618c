"""The snapshot's long lists, read by msgspec first (snapshot.py, `_fast_jobs`; from JSON, `from_json`),
come out as pydantic reads them (made Structs); where msgspec could read them otherwise, pydantic does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from job.core.planner import Snapshot
from job.core.planner.snapshot import Pending, PendingEntry, Running, RunningEntry, _fast_jobs, _unique_ids, describe_error

PENDING = TypeAdapter(list[PendingEntry])
RUNNING = TypeAdapter(list[RunningEntry])


def _pydantics(adapter: TypeAdapter, struct: type, jobs: list[dict]) -> list:
    """The jobs as pydantic reads them, made the planner's Structs."""
    return msgspec.convert(adapter.validate_python(jobs), list[struct])
GROUP = {"policy": "fifo", "selector": "dispersed"}
START = datetime(2026, 11, 29, 8, 0, tzinfo=timezone(timedelta(hours=1)))


@pytest.mark.parametrize("job", [
    {"id": "1", "user": "a", "resources": {"CPU": 1, "memory": 2.5}, "priority": 3, "submitted_at": "2026-11-29T07:00:00Z"},
    {"id": "2", "user": "a", "resources": {}, "node_labels": {"k": "v"}, "class": "high", "not_before": None},
    {"id": "3", "user": "a", "resources": {"CPU": 1}, "bundles": [{"GPU": 1}], "bundle_strategy": "SPREAD",
     "waiting_since": START, "max_runtime_s": 60, "submitted_at": "2026-11-29t07:00:00.123456+05:30"},
])
def test_a_plain_job_is_read_by_msgspec_as_pydantic_reads_it(job):
    assert _fast_jobs([job], PendingEntry) == _pydantics(PENDING, Pending, [job])


@pytest.mark.parametrize("change", [
    {"priority": "3"},  # text for a number: pydantic converts it
    {"priority": 3.0},
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
    assert _fast_jobs([job], PendingEntry) is None


def test_a_running_job_with_times_as_datetimes_is_read_by_msgspec():
    job = {"id": "1", "user": "a", "node": "n", "resources": {"CPU": 1}, "started_at": START, "stopping": True,
           "expected_end": START + timedelta(hours=1), "bundles": [{"CPU": 1}], "bundle_nodes": ["n"]}
    assert _fast_jobs([job], RunningEntry) == _pydantics(RUNNING, Running, [job])


def test_a_bad_job_is_named_in_pydantics_words():
    jobs = [{"id": "1", "user": "a", "resources": {"CPU": 1}}, {"id": "2", "user": "a", "resources": {"CPU": "1"}}]
    with pytest.raises(ValidationError) as caught:
        Snapshot.model_validate({"group": GROUP, "pending": jobs})
    error = caught.value.errors()[0]
    assert error["loc"] == ("pending", 1, "resources", "CPU")
    assert error["msg"] == "Input should be a valid number"


def _document(**jobs) -> dict:
    return {"group": GROUP, "now": "2026-11-29T08:00:00Z", **jobs}


PLAIN = {"id": "1", "user": "a", "resources": {"CPU": 1}}
RUN = {"id": "r", "user": "a", "node": "n", "resources": {"CPU": 1}}


@pytest.mark.parametrize("document", [
    _document(),
    _document(pending=[PLAIN, {**PLAIN, "id": "2", "submitted_at": "2026-11-29T07:00:00.123456+05:30", "priority": 2,
                               "bundles": [{"GPU": 1}], "bundle_strategy": "SPREAD", "max_runtime_s": 60}]),
    _document(running=[{**RUN, "started_at": "2026-11-29T07:00:00Z", "bundles": [{"CPU": 1}], "bundle_nodes": ["n"]}],
              nodes=[{"id": "n", "resources": {"CPU": 4}}], users={"a": {"shares": 2}}),
    # What msgspec could read otherwise is read by pydantic: the same snapshot either way.
    _document(pending=[{**PLAIN, "priority": "3"}]),
    _document(pending=[{**PLAIN, "submitted_at": 1_700_000_000}]),
])
def test_a_snapshot_from_json_is_pydantics(document):
    text = json.dumps(document)
    assert Snapshot.from_json(text) == Snapshot.model_validate_json(text)
    assert Snapshot.from_json(text).pending == Snapshot.model_validate_json(text).pending


@pytest.mark.parametrize("document", [
    _document(pending=[{**PLAIN, "extra": 1}]),
    _document(running=[{**RUN, "extra": 1}]),
    _document(pending=[{**PLAIN, "bundles": [{"GPU": 0}]}]),
    _document(pending=[PLAIN, {**PLAIN, "resources": {"CPU": "1"}}]),
    _document(pending=[PLAIN, PLAIN]),
    _document(pending=[{**PLAIN, "class": "nope"}]),
    _document(running=[{**RUN, "bundles": [{"CPU": 1}]}]),
    _document(extra=1),
    {**_document(), "group": {"policy": "nope", "selector": "dispersed"}},
    {**_document(), "nodes": "nope"},
])
def test_a_bad_snapshot_from_json_is_named_in_pydantics_words(document):
    text = json.dumps(document)
    with pytest.raises(ValidationError) as fast:
        Snapshot.from_json(text)
    with pytest.raises(ValidationError) as slow:
        Snapshot.model_validate_json(text)
    assert describe_error(fast.value) == describe_error(slow.value)


def test_a_key_not_given_reads_as_its_default():
    job = Snapshot.model_validate({"group": GROUP, "pending": [PLAIN]}).pending[0]
    assert (job.priority, job.submitted_at, job.max_runtime_s) == (0, None, None)
    assert job.priority_class is job.bundles is job.node_labels is msgspec.UNSET
    assert Snapshot.model_validate({"group": GROUP, "pending": [PLAIN]}).model_dump()["pending"] == [PLAIN]


@pytest.mark.parametrize(("ids", "unique"), [
    ([], True), (["1", "2", "10"], True), (["10", "9"], True), (["b", "a"], True),
    (["1", "1"], False), (["9", "10", "9"], False), (["5", "10", "5"], False), (["a", "b", "a"], False),
])
def test_ids_are_unique_in_the_ticks_order_or_any_other(ids, unique):
    assert _unique_ids([Pending(id=ident, user="a", resources={}) for ident in ids]) is unique


@pytest.mark.parametrize(("text", "read"), [
    ("2026-11-29T07:00:00.1234564Z", datetime(2026, 11, 29, 7, 0, 0, 123456, tzinfo=UTC)),
    ("2026-11-29T07:00:00.1234567Z", datetime(2026, 11, 29, 7, 0, 0, 123457, tzinfo=UTC)),
    ("2026-11-29T07:00:00.9999999+00:00", datetime(2026, 11, 29, 7, 0, 1, tzinfo=UTC)),
])
def test_a_fraction_of_a_second_beyond_microseconds_is_rounded_by_both_readers(text, read):
    job = {**PLAIN, "submitted_at": text}
    assert _fast_jobs([job], PendingEntry)[0].submitted_at == read
    assert _pydantics(PENDING, Pending, [job])[0].submitted_at == read
    # Where msgspec refuses the list (here a priority given as text), pydantic reads the time alike.
    refused = _document(pending=[{**job, "priority": "3"}])
    assert Snapshot.model_validate_json(json.dumps(refused)).pending[0].submitted_at == read
    assert Snapshot.from_json(json.dumps(_document(pending=[job]))).pending[0].submitted_at == read


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.floats(allow_nan=True), st.text(max_size=3),
                    st.sampled_from(["2026-11-29T07:00:00Z", "2026-11-29T07:00:00.1234567+01:00", "2026-11-29",
                                     "PACK", "SPREAD"]),
                    st.dictionaries(st.sampled_from(["", "CPU", "GPU"]), st.one_of(st.integers(0, 2), st.floats(0, 2)),
                                    max_size=2),
                    st.lists(st.dictionaries(st.sampled_from(["CPU", "GPU"]), st.integers(0, 2), max_size=2), max_size=2))
_KEYS = ["id", "user", "node", "resources", "priority", "submitted_at", "not_before", "class", "bundles",
         "bundle_strategy", "bundle_nodes", "started_at", "stopping", "max_runtime_s", "extra"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([("running", RUN), ("pending", PLAIN)]),
       st.lists(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=3), max_size=3))
def test_a_snapshot_from_json_is_read_or_refused_as_pydantic_reads_or_refuses_it(kind, changes):
    # Jobs of a kind, some of their keys given other values, or added.
    field, job = kind
    text = json.dumps(_document(**{field: [{**job, **change} for change in changes]}))
    try:
        slow = Snapshot.model_validate_json(text)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as fast:
            Snapshot.from_json(text)
        assert describe_error(fast.value) == describe_error(exc)
    else:
        assert Snapshot.from_json(text).model_dump() == slow.model_dump()
