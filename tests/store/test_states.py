"""The one state machine (job/core/states.py): its table, and every write of job/store kept to it.

On the real PostgreSQL, each store function that writes a job's state is called on jobs in every
state; each (before, after) of a row it wrote must be an allowed move, and the moves it makes must
be exactly those of its kind of write (so that a dropped or widened guard fails)."""

from __future__ import annotations

import inspect
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from job.core import states
from job.core.errors import Conflict
from job.core.group_snapshot import Held
from job.core.specs import JobSpec
from job.core.states import Reason
from job.store import groups, jobs, tick_jobs, users

GROUP = "g"
USER = "alice"
# Every row copied this many times per state, so that one call can send each copy somewhere else.
COPIES = len(states.STATES)
STORE = Path(__file__).resolve().parents[2] / "job" / "store"


# --- The transition table, without a database ---------------------------------------------------


def test_the_table_names_every_state_and_only_states():
    assert set(states.TRANSITIONS) == set(states.STATES)
    assert all(targets <= set(states.STATES) for targets in states.TRANSITIONS.values())
    assert set(states.ACTIVE) | set(states.FINISHED) | {states.PENDING} == set(states.STATES)
    assert states.INITIAL == states.PENDING


def test_finished_states_are_terminal():
    for finished in states.FINISHED:
        assert states.TRANSITIONS[finished] == frozenset()
        assert not any(states.allowed(finished, target) for target in states.STATES)


def test_unfinished_states_can_be_written_and_can_finish():
    for state in states.UNFINISHED:
        assert states.allowed(state, state), f"{state}: a write of fields only must be allowed"
        assert _reachable(state) & set(states.FINISHED), f"{state}: no way to finish"


def test_every_state_is_reachable_from_the_initial_one():
    assert _reachable(states.INITIAL) == set(states.STATES)


def test_a_job_never_goes_back_to_submitting_or_from_running_to_submitted():
    assert {source for source in states.STATES if states.allowed(source, states.SUBMITTING)} == {
        states.PENDING, states.SUBMITTING}
    assert not states.allowed(states.RUNNING, states.SUBMITTED)
    assert not states.allowed(states.PENDING, states.RUNNING)


def test_unknown_states_are_not_allowed():
    assert not states.allowed("LOST", states.PENDING)
    assert not states.allowed(states.PENDING, "LOST")


def test_every_write_is_allowed_and_every_allowed_move_is_a_write():
    allowed = {(source, target) for source, targets in states.TRANSITIONS.items() for target in targets}
    written: set[tuple[str, str]] = set()
    for write in states.WRITES:
        assert write.moves, write.name
        outside = {move for move in write.moves if not states.allowed(*move)}
        assert not outside, f"{write.name}: moves outside the table: {sorted(outside)}"
        written |= write.moves
    assert written == allowed, f"allowed but never written: {sorted(allowed - written)}"


def test_a_transition_names_its_sources_and_target():
    assert states.REQUEUE.sources == [states.SUBMITTING]
    assert states.REQUEUE.target == states.PENDING
    assert states.REQUEUE_INFRA.sources == list(states.ACTIVE)
    assert states.REQUEUE_INFRA_SPENT.target == states.FAILED
    assert states.REQUEST_CANCEL.targets == list(states.ACTIVE)
    with pytest.raises(ValueError):
        _ = states.RECONCILE.target  # several targets: no single one


def _reachable(start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for target in states.TRANSITIONS[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


# --- No state named in the store's SQL ----------------------------------------------------------

_QUOTED_STATE = re.compile(r"""(['"])({})\1""".format("|".join(states.STATES)))


def quoted_states(text: str) -> list[tuple[int, str]]:
    """(line number, state) of each state name written as a quoted literal in `text`."""
    return [(number, match.group(2)) for number, line in enumerate(text.splitlines(), start=1)
            for match in _QUOTED_STATE.finditer(line)]


def test_the_scan_finds_quoted_states():
    sql = "UPDATE jobs SET state = 'CANCELLED'\nWHERE state IN ('PENDING', %s) AND reason = 'Cancelled'"
    assert quoted_states(sql) == [(1, "CANCELLED"), (2, "PENDING")]
    assert quoted_states('ray_status = "RUNNING"') == [(1, "RUNNING")]
    assert quoted_states("WHERE state = ANY(%(from)s) -- PENDING jobs") == []


def test_the_store_names_no_state_in_its_statements():
    found = [f"{path.relative_to(STORE.parent.parent)}:{number}: {state!r}"
             for path in sorted(STORE.glob("*.py")) for number, state in quoted_states(path.read_text())]
    assert not found, "states written as literals (take them from job.core.states):\n" + "\n".join(found)


# --- Every write of the store, on jobs in every state -------------------------------------------


def _spec() -> JobSpec:
    return JobSpec(user=USER, group=GROUP, entrypoint="echo new")


def _update(target: str) -> dict:
    now = datetime.now(UTC)
    return {"state": target, "node": "n2", "ray_status": target, "ray_message": None, "reason": "Test",
            "message": f"to {target}", "started_at": now, "finished_at": now, "exit_code": 0, "accepted_at": now}


# (function, how the test calls it on rows [(id, state, copy)], the kind(s) of write it does).
# A `None` source is a new row.
CASES = [
    ("insert_job", lambda conn, rows: jobs.insert_job(conn, _spec()),
     {(None, states.INITIAL)}),
    ("cancel_jobs", lambda conn, rows: jobs.cancel_jobs(conn, [job_id for job_id, _, _ in rows]),
     states.CANCEL_PENDING.moves | states.REQUEST_CANCEL.moves),
    ("commit_intents", lambda conn, rows: tick_jobs.commit_intents(conn, [(job_id, "n1") for job_id, _, _ in rows],
                                                                   groups.installation_id(conn)),
     states.COMMIT_INTENT.moves),
    ("mark_submitted", lambda conn, rows: tick_jobs.mark_submitted(conn, [job_id for job_id, _, _ in rows]),
     states.MARK_SUBMITTED.moves),
    # Each copy of a state is sent to another target: every (source, target) is tried.
    ("update_jobs", lambda conn, rows: tick_jobs.update_jobs(
        conn, {job_id: _update(states.STATES[copy]) for job_id, _, copy in rows}, from_states=states.ACTIVE),
     states.RECONCILE.moves),
    # Copy k made k attempts, k // 2 of them requeued: copy 7 alone has no attempt left (7 - 3 >= 4).
    ("return_to_pending", lambda conn, rows: tick_jobs.return_to_pending(
        conn, {job_id: (state, "Test", "requeued") for job_id, state, _ in rows}, max_attempts=4),
     states.REQUEUE.moves | states.REQUEUE_SPENT.moves),
    # Copies 0-3 have requeues left (k // 2 < 2), copies 4-7 none.
    ("requeue_infra", lambda conn, rows: tick_jobs.requeue_infra(
        conn, {job_id: (state, "InfraFailure", "requeued") for job_id, state, _ in rows}, max_requeues=2),
     states.REQUEUE_INFRA.moves | states.REQUEUE_INFRA_SPENT.moves),
    ("cancel_absent", lambda conn, rows: tick_jobs.cancel_absent(conn, [job_id for job_id, _, _ in rows]),
     states.CANCEL_ABSENT.moves),
    ("fail_pending", lambda conn, rows: tick_jobs.fail_pending(
        conn, {job_id: "unreadable" for job_id, _, _ in rows}, Reason.INVALID_JOB), states.FAIL_INVALID.moves),
    ("fail_pending_timeouts", lambda conn, rows: tick_jobs.fail_pending_timeouts(
        conn, GROUP, 60.0, datetime.now(UTC) + timedelta(hours=1)),
     states.FAIL_PENDING_TIMEOUT.moves),
    ("set_waiting", lambda conn, rows: tick_jobs.set_waiting(
        conn, {job_id: ("Test", "waits") for job_id, _, _ in rows}, datetime.now(UTC)),
     states.SET_WAITING.moves),
    ("set_reservations", lambda conn, rows: tick_jobs.set_reservations(
        conn, {job_id: Held("n1") for job_id, _, _ in rows}, datetime.now(UTC)),
     states.SET_RESERVATION.moves),
    ("set_estimates", lambda conn, rows: tick_jobs.set_estimates(
        conn, {job_id: (1, datetime.now(UTC), "from max runtimes") for job_id, _, _ in rows}),
     states.SET_ESTIMATE.moves),
    ("set_observed", lambda conn, rows: tick_jobs.set_observed(
        conn, {job_id: {"used": {"CPU": 3}, "over_since": None} for job_id, _, _ in rows}),
     states.SET_OBSERVED.moves),
    ("mark_victims", lambda conn, rows: tick_jobs.mark_victims(
        conn, {job_id: rows[0][0] for job_id, _, _ in rows}, datetime.now(UTC)),
     states.MARK_VICTIM.moves),
    ("victims_stopping", lambda conn, rows: tick_jobs.victims_stopping(
        conn, {job_id: "being stopped" for job_id, _, _ in rows}),
     states.STOPPING_VICTIM.moves),
    ("requeue_preempted", lambda conn, rows: tick_jobs.requeue_preempted(
        conn, {job_id: (state, "stopped to make room") for job_id, state, _ in rows}),
     states.REQUEUE_PREEMPTED.moves),
]


def _jobs_in_every_state(conn) -> list[tuple[int, str, int]]:
    """COPIES jobs in each state, the k-th copy at attempt k with k // 2 requeues, each with a
    submission_id (the schema requires one of submitted states; a PENDING job keeps its last one)."""
    conn.execute("INSERT INTO resource_groups (name, clusters) "
                 "VALUES (%s, '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:8265\"}]')", (GROUP,))
    conn.execute("INSERT INTO users (name) VALUES (%s)", (USER,))
    rows = conn.execute(
        """INSERT INTO jobs (user_name, group_name, entrypoint, resources, state, attempt, requeues, submission_id)
           SELECT %s, %s, 'echo ' || s.state, '{"CPU": 1}', s.state, c.copy, c.copy / 2, 'test-' || s.state || '-' || c.copy
           FROM unnest(%s::text[]) AS s(state), generate_series(0, %s - 1) AS c(copy)
           RETURNING id, state, attempt""",
        (USER, GROUP, list(states.STATES), COPIES),
    ).fetchall()
    return [(row["id"], row["state"], row["attempt"]) for row in rows]


def _rows(conn) -> dict[int, dict]:
    return {row["id"]: row for row in conn.execute("SELECT * FROM jobs")}


def moves_of(conn, call) -> set[tuple[str | None, str]]:
    """The (before, after) state of every job row that `call` wrote or inserted; asserts each allowed."""
    rows = _jobs_in_every_state(conn)
    before = _rows(conn)
    call(conn, rows)
    after = _rows(conn)
    moves = set()
    for job_id, row in after.items():
        old = before.get(job_id)
        if old == row:
            continue
        move = (old["state"] if old else None, row["state"])
        if old is None:
            assert row["state"] == states.INITIAL, f"job {job_id} created in {row['state']}"
        else:
            assert states.allowed(*move), f"job {job_id}: {move[0]} -> {move[1]} is not an allowed move"
        moves.add(move)
    return moves


@pytest.mark.parametrize("name, call, expected", CASES, ids=[case[0] for case in CASES])
def test_each_write_makes_exactly_its_moves(conn, name, call, expected):
    assert moves_of(conn, call) == expected


def test_every_store_function_that_writes_jobs_is_in_the_table():
    writes = {name for module in (jobs, tick_jobs, groups, users)
              for name, function in inspect.getmembers(module, inspect.isfunction)
              if function.__module__ == module.__name__
              and re.search(r"UPDATE jobs|INSERT INTO jobs", inspect.getsource(function))}
    assert writes == {case[0] for case in CASES}


def test_reads_by_state_count_what_they_say(conn):
    rows = _jobs_in_every_state(conn)
    active = {job_id for job_id, state, _ in rows if state in states.ACTIVE}
    pending = {job_id for job_id, state, _ in rows if state == states.PENDING}
    assert {row.id for row in tick_jobs.active_jobs(conn, GROUP)} == active
    assert {row.id for row in tick_jobs.pending_jobs(conn, GROUP)} == pending
    (group,) = groups.list_groups(conn)
    assert (group["pending"], group["active"]) == (COPIES, COPIES * len(states.ACTIVE))
    (usage,) = users.user_usage(conn, USER)
    assert (usage["pending"], usage["active"], usage["finished"]) == (
        COPIES, COPIES * len(states.ACTIVE), COPIES * len(states.FINISHED))
    (user,) = users.list_users(conn)
    assert (user.pending, user.active) == (COPIES, COPIES * len(states.ACTIVE))
    assert [user.name for user in users.users_of_group(conn, GROUP)] == [USER]
    with pytest.raises(Conflict, match=f"has {COPIES * len(states.UNFINISHED)} pending or active"):
        groups.remove_group(conn, GROUP)


def test_a_user_or_group_with_finished_jobs_only(conn):
    _jobs_in_every_state(conn)
    conn.execute("DELETE FROM jobs WHERE state <> ALL(%s)", (list(states.FINISHED),))
    assert users.users_of_group(conn, GROUP) == []
    assert groups.remove_group(conn, GROUP) == COPIES * len(states.FINISHED)


# --- Failure classes: what a requeue writes and what it counts ----------------------------------


def _job(conn, state, **columns) -> int:
    """One job of GROUP in `state`, with the columns given (the group and user made on first use)."""
    conn.execute("INSERT INTO resource_groups (name, clusters) "
                 "VALUES (%s, '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:8265\"}]') ON CONFLICT DO NOTHING",
                 (GROUP,))
    conn.execute("INSERT INTO users (name) VALUES (%s) ON CONFLICT DO NOTHING", (USER,))
    columns = {"user_name": USER, "group_name": GROUP, "entrypoint": "true", "resources": '{"CPU": 1}', "state": state,
               **columns}
    return conn.execute(f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))}) RETURNING id",
                        list(columns.values())).fetchone()["id"]


def test_an_infrastructure_requeue_keeps_the_place_and_the_attempts_up_to_max_requeues(conn):
    submitted_at = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
    started = datetime(2026, 11, 29, 7, 30, tzinfo=UTC)
    ids = [_job(conn, states.RUNNING, attempt=requeues + 1, requeues=requeues, submission_id=f"s-{requeues}",
                node="n1", started_at=started, accepted_at=started, submitted_at=submitted_at, exit_code=None)
           for requeues in range(4)]
    rows = tick_jobs.requeue_infra(conn, {job_id: (states.RUNNING, "InfraFailure", "its node n1 died under it")
                                          for job_id in ids}, max_requeues=2)
    assert sorted((row.id, row.state, row.requeues) for row in rows) == [
        (ids[0], states.PENDING, 1), (ids[1], states.PENDING, 2), (ids[2], states.FAILED, 2), (ids[3], states.FAILED, 3)]
    after = _rows(conn)
    for job_id in ids:
        row = after[job_id]
        assert row["reason"] == "InfraFailure" and row["submitted_at"] == submitted_at
        assert row["attempt"] == ids.index(job_id) + 1, "a requeue uses no attempt"
        assert row["accepted_at"] is None and row["ray_status"] is None
    requeued, spent = after[ids[1]], after[ids[2]]
    assert requeued["message"] == "its node n1 died under it (requeue 2 of 2, not counted as an attempt)"
    assert requeued["node"] is None and requeued["started_at"] is None and requeued["finished_at"] is None
    assert requeued["requeued_at"] is not None
    assert spent["message"] == "its node n1 died under it (requeued 2 of 2 times already: no requeue left)"
    assert spent["finished_at"] is not None and spent["node"] == "n1" and spent["started_at"] == started
    assert spent["requeued_at"] is None


def test_a_requeue_changes_nothing_of_a_job_that_moved_meanwhile(conn):
    job_id = _job(conn, states.RUNNING, attempt=1, submission_id="s-1")
    assert tick_jobs.requeue_infra(conn, {job_id: (states.SUBMITTED, "NodeBusy", "busy")}, max_requeues=5) == []
    assert _rows(conn)[job_id]["state"] == states.RUNNING


def test_refusals_count_against_max_attempts_and_requeues_do_not(conn):
    # Four attempts, three of them ended by an infrastructure fault: this refusal is the first.
    first = _job(conn, states.SUBMITTING, attempt=4, requeues=3, submission_id="s-4")
    # Five attempts, three requeued: this refusal is the second, and the last of max_attempts=2.
    second = _job(conn, states.SUBMITTING, attempt=5, requeues=3, submission_id="s-5")
    refused = {job_id: (states.SUBMITTING, "SubmitRefused", "ray refused it") for job_id in (first, second)}
    assert {row.id: row.state for row in tick_jobs.return_to_pending(conn, refused, max_attempts=2)} == {
        first: states.PENDING, second: states.FAILED}
    after = _rows(conn)
    assert after[first]["message"] == "ray refused it (attempt 1 of 2)"
    assert after[second]["message"] == "ray refused it (attempt 2 of 2, no attempt left)"
    assert after[first]["requeues"] == 3


def test_a_requeued_job_s_next_attempt_gets_a_new_attempt_and_submission_id(conn):
    job_id = _job(conn, states.SUBMITTED, attempt=1, submission_id="x")
    conn.execute("UPDATE jobs SET submission_id = %s WHERE id = %s", (f"{groups.installation_id(conn)}-{job_id}-1", job_id))
    tick_jobs.requeue_infra(conn, {job_id: (states.SUBMITTED, "NodeBusy", "busy")}, max_requeues=5)
    [intent] = tick_jobs.commit_intents(conn, [(job_id, "n2")], groups.installation_id(conn))
    assert intent.attempt == 2 and intent.submission_id == f"{groups.installation_id(conn)}-{job_id}-2"


def test_ray_s_acceptance_is_recorded_and_read_back(conn):
    job_id = _job(conn, states.SUBMITTING, attempt=1, submission_id="s-1", runtime_env='{"pip": ["requests"]}')
    plain = _job(conn, states.SUBMITTING, attempt=1, submission_id="s-2", runtime_env='{"env_vars": {"A": "1"}}')
    tick_jobs.mark_submitted(conn, [job_id, plain])
    active = {row.id: row for row in tick_jobs.active_jobs(conn, GROUP)}
    assert active[job_id].accepted_at is not None and active[job_id].requeues == 0
    assert active[job_id].builds_runtime_env is True and active[plain].builds_runtime_env is False


def test_the_pending_timeout_counts_from_the_last_requeue(conn):
    now = datetime.now(UTC)
    old = now - timedelta(hours=2)
    waited = _job(conn, states.PENDING, submitted_at=old)
    requeued = _job(conn, states.PENDING, submitted_at=old, requeued_at=now - timedelta(minutes=1), requeues=1)
    failed = {row.id for row in tick_jobs.fail_pending_timeouts(conn, GROUP, 3600.0, now)}
    assert failed == {waited}
    assert _rows(conn)[requeued]["state"] == states.PENDING


def test_a_group_s_requeue_and_start_timeout_options(conn):
    from job.core.errors import BadInput
    from job.core.specs import GroupSpec, validated

    groups.insert_group(conn, validated(GroupSpec, {"name": "defaults", "clusters": ["http://127.0.0.1:8265"]}))
    groups.insert_group(conn, validated(GroupSpec, {"name": "set", "clusters": ["http://127.0.0.1:8265"],
                                                    "max_requeues": "0", "start_timeout_s": "90s"}))
    assert (groups.get_group(conn, "defaults").max_requeues, groups.get_group(conn, "defaults").start_timeout_s) == (5, 300)
    assert (groups.get_group(conn, "set").max_requeues, groups.get_group(conn, "set").start_timeout_s) == (0, 90)
    with pytest.raises(BadInput, match="max_requeues: Input should be greater than or equal to 0"):
        validated(GroupSpec, {"name": "bad", "clusters": ["http://h:1"], "max_requeues": -1})
    with pytest.raises(BadInput, match="start_timeout_s: Input should be greater than 0"):
        validated(GroupSpec, {"name": "bad", "clusters": ["http://h:1"], "start_timeout_s": "0s"})
