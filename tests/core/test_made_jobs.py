"""MadeJobs (core/group_snapshot.py): the planner's pending jobs made by one snapshot and taken by the
next where the row is the very same object. Whatever is kept, the snapshot is the one made without
it; a job is taken again only where nothing in it depends on the tick's now or the group's classes."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from snapshot_helpers import GROUP, NOW, node

from job.core.group import GroupConfig
from job.core.group_snapshot import MadeJobs, build_snapshot
from job.core.job import PendingRow

CLASSES = GroupConfig(**{**GROUP.options(), "priority_classes": [{"name": "low", "value": 0}, {"name": "high", "value": 10}],
                         "default_class": "low", "start_timeout_s": 300})
LOW_ONLY = GroupConfig(**{**GROUP.options(), "priority_classes": [{"name": "low", "value": 0}], "default_class": "low",
                          "start_timeout_s": 300})
NODES = [node("a", {"CPU": 4}, {"CPU": 4})]
LATER = NOW + timedelta(seconds=400)


def row(ident: int, **fields) -> PendingRow:
    return PendingRow(ident, "u", '{"CPU": 1}', "{}", 0, NOW, None, None, None, waiting_since=NOW)._replace(**fields)


def snapshot_of(group, rows, now, made=None):
    snapshot, invalid = build_snapshot(group, now, NODES, [], rows, [], {}, made=made)
    return snapshot.pending, snapshot.reservations, invalid


ROWS = st.builds(
    row, st.integers(1, 30),
    resources=st.sampled_from(['{"CPU": 1}', '{"CPU": 2}', '{"CPU": -1}']),
    priority_class=st.sampled_from([None, "low", "high"]),
    waiting_since=st.sampled_from([None, NOW - timedelta(seconds=60)]),
    reserved_node=st.sampled_from([None, "a"]),
    reserved_at=st.just(NOW - timedelta(seconds=200)),
    max_runtime_s=st.sampled_from([None, 60.0, -1.0]),
)


@settings(max_examples=200, deadline=None)
@given(first=st.lists(ROWS, max_size=12, unique_by=lambda r: r.id), rewritten=st.sets(st.integers(1, 30)),
       second_group=st.sampled_from([CLASSES, LOW_ONLY]))
def test_a_snapshot_made_with_the_last_ones_jobs_is_the_one_made_without(first, rewritten, second_group):
    made = MadeJobs()
    assert snapshot_of(CLASSES, first, NOW, made) == snapshot_of(CLASSES, first, NOW)
    # The next tick: some rows read again (new objects, equal or not), the rest the same objects.
    second = [r._replace(priority=1) if r.id in rewritten else r for r in first]
    assert snapshot_of(second_group, second, LATER, made) == snapshot_of(second_group, second, LATER)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(ROWS, max_size=12, unique_by=lambda r: r.id), second_group=st.sampled_from([CLASSES, LOW_ONLY]))
def test_the_same_list_of_rows_given_again_makes_the_snapshot_made_without(rows, second_group):
    made = MadeJobs()
    snapshot_of(CLASSES, rows, NOW, made)
    assert snapshot_of(second_group, rows, LATER, made) == snapshot_of(second_group, rows, LATER)
    assert snapshot_of(second_group, rows, LATER + timedelta(seconds=400), made) == snapshot_of(
        second_group, rows, LATER + timedelta(seconds=400))


def test_the_same_list_of_kept_rows_gives_the_same_list_of_jobs():
    made = MadeJobs()
    rows = [row(1), row(2)]
    before, _, _ = snapshot_of(CLASSES, rows, NOW, made)
    assert snapshot_of(CLASSES, rows, LATER, made)[0] is before
    # A row whose job depends on the tick's now: made again.
    rows = [row(1), row(2, waiting_since=None)]
    before, _, _ = snapshot_of(CLASSES, rows, NOW, made)
    after, _, _ = snapshot_of(CLASSES, rows, LATER, made)
    assert after is not before and after[1].waiting_since == LATER


def test_an_unwritten_row_gives_the_same_job_and_a_row_read_again_a_new_one():
    made = MadeJobs()
    kept, rewritten, fresh, reserved = row(1), row(2), row(3, waiting_since=None), row(4, reserved_node="a", reserved_at=NOW)
    before, _, _ = snapshot_of(CLASSES, [kept, rewritten, fresh, reserved], NOW, made)
    after, reservations, _ = snapshot_of(CLASSES, [kept, rewritten._replace(), fresh, reserved], LATER, made)
    assert after[0] is before[0]
    assert after[1] == before[1] and after[1] is not before[1]
    # Its wait begins at each tick's now until one wrote it: made again.
    assert (before[2].waiting_since, after[2].waiting_since) == (NOW, LATER)
    # A reservation is judged at each tick: expired at LATER, past the group's start timeout.
    assert after[3] is not before[3] and reservations == []


def test_once_the_groups_classes_change_no_job_is_taken_again():
    made = MadeJobs()
    rows = [row(1, priority_class="high"), row(2)]
    before, _, _ = snapshot_of(CLASSES, rows, NOW, made)
    after, _, invalid = snapshot_of(LOW_ONLY, rows, NOW, made)
    assert [job.id for job in after] == ["2"] and after[0] is not before[1]
    assert invalid == {1: "priority_class: 'high' is no longer a class of group 'g' (its classes: low)"}
