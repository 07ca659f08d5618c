"""A job's dependencies (core/dependencies.py): how `--after` is read, and each pending job's verdict
from the states of the jobs it waits for; and the rows the tick plans (core/dependents.py)."""

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.core import states
from job.core.dependencies import NEVER, READY, WAITING, After, When, judge, judge_all, parse
from job.core.dependents import split, waited_for
from job.core.group_snapshot import MadeJobs
from job.core.job import PendingRow

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("given", "stored"), [
    ("12", [{"job": 12, "when": "ok"}]),
    ("12:any,13:fail", [{"job": 12, "when": "any"}, {"job": 13, "when": "fail"}]),
    (["12", " 13:ok "], [{"job": 12, "when": "ok"}, {"job": 13, "when": "ok"}]),
    ([12, {"job": 13, "when": "any"}], [{"job": 12, "when": "ok"}, {"job": 13, "when": "any"}]),
    # The same job twice: its last kind.
    (["12", "12:fail"], [{"job": 12, "when": "fail"}]),
    (None, None),
    ([], None),
])
def test_what_after_takes(given, stored):
    assert parse(given) == stored


@pytest.mark.parametrize(("given", "says"), [
    ("12:maybe", "'maybe' is not one of ok, any, fail"),
    ("x", "'x' is not a job id"),
    ("0", "0 is not a job id"),
    ("-3", "'-3' is not a job id"),
    ([True], "True is not a job id"),
    ([2**63], "is not a job id"),
    ("12,", "'' is not a job id"),
    ([{"id": 3}], "give {'job': ID"),
    ({"job": 3}, "give job ids"),
    (list(range(1, 102)), "at most 100 jobs, got 101"),
])
def test_what_after_refuses(given, says):
    with pytest.raises(ValueError, match=None) as refused:
        parse(given)
    assert says in str(refused.value)


# (kind, state of the job named) -> verdict; None: the job is gone.
VERDICTS = {
    (When.OK, states.SUCCEEDED): READY, (When.OK, states.FAILED): NEVER, (When.OK, states.STOPPED): NEVER,
    (When.OK, states.CANCELLED): NEVER, (When.ANY, states.SUCCEEDED): READY, (When.ANY, states.FAILED): READY,
    (When.ANY, states.STOPPED): READY, (When.ANY, states.CANCELLED): READY, (When.FAIL, states.SUCCEEDED): NEVER,
    (When.FAIL, states.FAILED): READY, (When.FAIL, states.STOPPED): READY, (When.FAIL, states.CANCELLED): NEVER,
    **{(when, state): WAITING for when in When for state in states.UNFINISHED},
    **{(when, None): NEVER for when in When},
}


@pytest.mark.parametrize(("when", "state"), list(VERDICTS))
def test_each_kind_against_each_state(when, state):
    verdict = judge([After(12, when)], {} if state is None else {12: state})
    assert verdict.outcome == VERDICTS[when, state]
    assert "job 12" in verdict.message


@pytest.mark.parametrize(("after", "found", "message"), [
    ([After(12)], {12: "RUNNING"}, "waits for job 12 to succeed (RUNNING)"),
    ([After(12, When.ANY), After(13, When.FAIL)], {12: "PENDING", 13: "FAILED"}, "waits for job 12 to end (PENDING)"),
    ([After(12)], {12: "FAILED"}, "job 12 ended FAILED, and this job waited for job 12 to succeed"),
    ([After(12, When.FAIL)], {12: "CANCELLED"}, "job 12 was cancelled, and this job waited for job 12 to fail"),
    ([After(12, When.ANY)], {}, "job 12 is gone (pruned), and this job waited for job 12 to end"),
    ([After(12), After(13, When.ANY)], {12: "SUCCEEDED", 13: "STOPPED"},
     "dependencies satisfied: job 12 SUCCEEDED, job 13 STOPPED"),
])
def test_the_messages_name_the_jobs(after, found, message):
    assert judge(after, found).message == message


def test_a_chain_fails_in_one_pass_and_any_takes_the_failure():
    # 2 waits for 1 to succeed; 3 for 2 to succeed; 4 for 2 to end; 5 for 1 to fail.
    waiting = [(5, [After(1, When.FAIL)]), (3, [After(2)]), (2, [After(1)]), (4, [After(2, When.ANY)])]
    verdicts = judge_all(waiting, {1: "FAILED", 2: "PENDING"})
    assert {job: verdict.outcome for job, verdict in verdicts.items()} == {2: NEVER, 3: NEVER, 4: READY, 5: READY}
    assert verdicts[3].message == "job 2 ended FAILED, and this job waited for job 2 to succeed"


STATES = st.sampled_from([*states.STATES, None])
AFTERS = st.lists(st.builds(After, st.integers(1, 6), st.sampled_from(list(When))), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(AFTERS, st.dictionaries(st.integers(1, 6), STATES))
def test_a_verdict_is_the_and_of_its_dependencies(after, found):
    found = {job: state for job, state in found.items() if state is not None}
    alone = [judge([dependency], found).outcome for dependency in after]
    verdict = judge(after, found)
    expected = NEVER if NEVER in alone else WAITING if WAITING in alone else READY
    assert verdict.outcome == expected
    # The order they are given in changes no outcome.
    assert judge(list(reversed(after)), found).outcome == expected


@settings(max_examples=300, deadline=None)
@given(AFTERS, st.dictionaries(st.integers(1, 6), STATES))
def test_once_the_jobs_named_ended_no_job_waits(after, found):
    ended = {job: state for job, state in found.items() if state in states.FINISHED}
    assert judge(after, ended).outcome != WAITING


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(7, 30), AFTERS), max_size=8, unique_by=lambda item: item[0]),
       st.dictionaries(st.integers(1, 6), st.sampled_from(states.STATES)))
def test_jobs_that_wait_for_no_pending_job_are_judged_alone(waiting, found):
    # Jobs 7 and above wait only for jobs 1-6, none failed in the tick: each verdict is its own.
    verdicts = judge_all(waiting, found)
    assert verdicts == {job: judge(after, found) for job, after in waiting}


def row(ident: int, after: str | None = None, reason: str | None = None, message: str | None = None) -> PendingRow:
    return PendingRow(ident, "u", '{"CPU": 1}', "{}", 0, NOW, None, reason, message, after=after)


def test_rows_waiting_are_held_back_and_the_rest_planned():
    pending = [row(1), row(2, '[{"job": 1, "when": "ok"}]'), row(3, '[{"job": 9, "when": "any"}]'),
               row(4, '[{"job": 8, "when": "ok"}]', "Dependency", "waits for job 8 to succeed (RUNNING)"),
               row(5, '[{"job": 7, "when": "fail"}]', "Dependency", "waits for job 7 to fail (RUNNING)"),
               row(6, '[{"job": 0}]')]
    after_of, invalid = waited_for(pending)
    assert sorted(after_of) == [2, 3, 4, 5] and invalid == {6: "after: {'job': 0}: 0 is not a job id (a positive whole number)"}
    made = MadeJobs()
    found = {1: "PENDING", 8: "RUNNING", 7: "FAILED"}
    split_ = split(pending, after_of, invalid, found, made)
    assert [r.id for r in split_.plannable] == [1, 5]
    # Job 4's stored reason is current: nothing to write.
    assert split_.waiting == {2: ("Dependency", "waits for job 1 to succeed (PENDING)")}
    assert split_.satisfied == {5: ("Queued", "dependencies satisfied: job 7 FAILED")}
    assert split_.never == {3: "job 9 is gone (pruned), and this job waited for job 9 to end"}
    assert split_.invalid == invalid and split_.held == 2
    # The same rows, the same held back: the same list to plan.
    assert split(pending, after_of, invalid, found, made).plannable is split_.plannable


def test_a_job_planned_once_is_not_judged_again():
    # Its dependency held when it was planned; the job waited for was pruned since.
    pending = [row(7, '[{"job": 3, "when": "ok"}]', "Resources", "needs CPU 1"),
               row(8, '[{"job": 3, "when": "ok"}]', "Preempted", "stopped to make room"),
               row(9, '[{"job": 3, "when": "ok"}]', "Queued", "waiting for the next tick")]
    after_of, _ = waited_for(pending)
    assert list(after_of) == [9]
    assert [r.id for r in split(pending, after_of, {}, {}).plannable] == [7, 8]


def test_without_dependencies_the_rows_are_planned_as_read():
    pending = [row(1), row(2)]
    assert waited_for(pending) == ({}, {})
    assert split(pending, {}, {}, {}).plannable is pending
