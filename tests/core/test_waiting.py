"""Which waiting reasons a tick writes (core/waiting.py), from the plan's waiting records."""
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.core import waiting
from job.core.job import PendingRow
from job.core.waiting import Compared, counted, waiting_changes

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def row(ident: int, reason: str | None, message: str | None) -> PendingRow:
    return PendingRow(ident, "u", '{"CPU": 1}', "{}", 0, NOW, None, reason, message)


def record(ident: int, reason: str, message: str) -> dict:
    return {"job": str(ident), "reason": reason, "message": message}


def test_only_what_changed_is_written_new_reasons_first():
    pending = [row(1, "Resources", "needs CPU 1"), row(2, None, None), row(3, "Resources", "needs CPU 1"),
               row(4, "Limit", "at max_running")]
    plan = [record(3, "Resources", "needs CPU 2"), record(1, "Resources", "needs CPU 1"), record(2, "Limit", "at max_running"),
            record(4, "Resources", "needs CPU 1"), record(5, "Resources", "needs CPU 1")]
    assert list(waiting_changes(pending, plan).items()) == [
        (2, ("Limit", "at max_running")), (4, ("Resources", "needs CPU 1")), (5, ("Resources", "needs CPU 1")),
        (3, ("Resources", "needs CPU 2"))]


def test_writes_are_bounded(monkeypatch):
    monkeypatch.setattr(waiting, "NEW_REASONS_PER_TICK", 2)
    monkeypatch.setattr(waiting, "MESSAGE_REFRESH_PER_TICK", 1)
    pending = [row(i, "Resources", "old") for i in range(1, 4)] + [row(i, None, None) for i in range(4, 8)]
    plan = [record(i, "Resources", "new") for i in range(1, 8)]
    assert waiting_changes(pending, plan) == {4: ("Resources", "new"), 5: ("Resources", "new"), 1: ("Resources", "new")}
    assert waiting_changes(pending, [record(i, "Resources", "old") for i in range(1, 4)]) == {}


def grouped(plan: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """The records grouped by reason and message, as Plan.said gives them."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for each in plan:
        groups.setdefault((each["reason"], each["message"]), []).append(each)
    return [(*key, records) for key, records in groups.items()]


def test_a_steady_comparison_reads_only_the_rows_read_again_or_found_differing():
    compared = Compared()
    pending = [row(1, "Resources", "m"), row(2, "Resources", "m"), row(3, None, None)]
    plan = [record(i, "Resources", "m") for i in (1, 2, 3)]
    assert waiting_changes(pending, plan, compared, grouped(plan)) == {3: ("Resources", "m")}
    assert compared.differed == {"3"}
    # Job 3's row not written yet (it stays unsure), job 1's row written behind the tick's back.
    pending = [row(1, "Limit", "at max_running"), row(2, "Resources", "m"), row(3, None, None)]
    compared.read_again.add("1")
    assert compared.unsure(plan, grouped(plan)) == [plan[0], plan[2]]
    assert compared.read_again == set()
    compared.differed = set()
    assert compared.unsure(plan, grouped(plan)) == []
    compared.said, compared.differed = {}, {"3"}
    assert waiting_changes(pending, plan, compared, grouped(plan)) == {1: ("Resources", "m"), 3: ("Resources", "m")}


@pytest.mark.parametrize("before, now, unsure", [
    # (the last plan's jobs by message, this plan's, the jobs this comparison reads)
    ({"a": [1, 2]}, {"a": [2, 1]}, []),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, [3]),
    ({"a": [1, 2]}, {"a": [1], "b": [2]}, [2]),
    ({"a": [1, 2], "b": [3]}, {"b": [1, 2, 3]}, [1, 2]),
    ({"a": [1, 2]}, {"a": [1]}, []),
])
def test_jobs_waiting_otherwise_than_in_the_last_plan_are_read(before, now, unsure):
    def plan_of(groups):
        return sorted((record(i, "Resources", message) for message, ids in groups.items() for i in ids),
                      key=lambda each: int(each["job"]))

    compared = Compared()
    compared.unsure(plan_of(before), grouped(plan_of(before)))
    plan = plan_of(now)
    assert [int(each["job"]) for each in compared.unsure(plan, grouped(plan))] == unsure


def test_two_groups_of_one_message_count_as_one():
    compared = Compared()
    plan = [record(1, "Resources", "m"), record(2, "Resources", "m")]
    compared.unsure(plan, [("Resources", "m", plan[:1]), ("Resources", "m", plan[1:])])
    assert compared.said == {("Resources", "m"): {"1", "2"}}
    assert compared.unsure(plan, grouped(plan)) == []


def test_counted_from_the_groups():
    plan = [record(1, "Resources", "m"), record(2, "Resources", "n"), record(3, "Limit", "l")]
    assert counted([*grouped(plan), ("Preempting", "p", [])]) == {"Resources": 2, "Limit": 1}


REASONS = st.sampled_from(["Resources", "Limit"])
MESSAGES = st.sampled_from(["m", "n"])
IDS = st.integers(1, 5)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(
    # Each tick: the rows written behind its back (id -> reason, message), the plan (id -> reason,
    # message, in this order), and whether the tick writes the changes it finds.
    st.dictionaries(IDS, st.one_of(st.just((None, None)), st.tuples(REASONS, MESSAGES)), max_size=2),
    st.lists(st.tuples(IDS, REASONS, MESSAGES), max_size=5, unique_by=lambda each: each[0]),
    st.booleans()), max_size=8), st.integers(1, 2))
def test_the_kept_comparison_finds_what_the_whole_one_finds(ticks, bound):
    rows = {i: (None, None) for i in range(1, 6)}
    compared = Compared()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waiting, "NEW_REASONS_PER_TICK", bound)
        patch.setattr(waiting, "MESSAGE_REFRESH_PER_TICK", bound)
        for written, planned, writes in ticks:
            rows.update(written)
            compared.read_again.update(map(str, written))
            pending = [row(i, *stored) for i, stored in sorted(rows.items())]
            plan = [record(*each) for each in planned]
            whole = waiting_changes(pending, plan)
            assert list(waiting_changes(pending, plan, compared, grouped(plan)).items()) == list(whole.items())
            if writes:
                rows.update(whole)
                compared.read_again.update(map(str, whole))
