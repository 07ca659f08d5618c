"""The tick's statements on jobs. Each is one statement over a whole group, whatever the number of
jobs, so that a tick's round trips stay flat from a thousand pending jobs to a hundred thousand."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from itertools import repeat
from typing import Any

from psycopg.rows import args_row, class_row, tuple_row
from psycopg.types.json import Jsonb

from job.core import states
from job.core.estimates import Finished
from job.core.group_snapshot import WAITS_FOR_RESOURCES, Held
from job.core.job import ActiveJob, Intent, Moved, PendingRow, Victim
from job.core.states import Reason
from job.store import DictConnection, one


def _select(fields: tuple[str, ...], computed: dict[str, str]) -> str:
    """The select list of a row type's fields: each its column, or the expression of `computed`."""
    return ", ".join(f"{computed[name]} AS {name}" if name in computed else name for name in fields)


# The typed rows' fields are the columns read, so that a new field is read once it is in its row.
_ACTIVE = _select(tuple(ActiveJob.__dataclass_fields__), {
    # Whether Ray builds something for it before the driver starts (env_vars alone: no).
    "builds_runtime_env": "runtime_env - 'env_vars' - 'config' <> '{}'::jsonb"})
_PENDING = _select(PendingRow._fields, {"resources": "resources::text", "node_labels": "node_labels::text",
                                         "bundles": "bundles::text", "after": "after::text"})


def active_jobs(conn: DictConnection, group: str) -> list[ActiveJob]:
    return conn.cursor(row_factory=class_row(ActiveJob)).execute(
        f"SELECT {_ACTIVE} FROM jobs WHERE group_name = %s AND state = ANY(%s) ORDER BY id",
        (group, list(states.ACTIVE)),
    ).fetchall()


def pending_jobs(conn: DictConnection, group: str) -> list[PendingRow]:
    rows = conn.cursor(row_factory=tuple_row).execute(
        f"SELECT {_PENDING} FROM jobs WHERE group_name = %s AND state = %s ORDER BY id",
        (group, states.PENDING),
    ).fetchall()
    # Made PendingRows by tuple's own constructor, in C, the select list being the row's fields in
    # their order: psycopg's args_row calls the NamedTuple's Python __new__ per row, which at 100k
    # rows cost as long again as the whole read.
    return list(map(tuple.__new__, repeat(PendingRow), rows))


def current_snapshot(conn: DictConnection) -> str:
    """The database's snapshot now (pg_snapshot, as text): the rows written by any transaction it
    does not see are the ones `pending_changes` reads later."""
    return one(conn.execute("SELECT pg_current_snapshot()::text AS snapshot"))["snapshot"]


def pending_changes(conn: DictConnection, group: str, since: str) -> tuple[int, list[PendingRow], list[int]]:
    """The group's jobs written by transactions the snapshot `since` did not see (sql/0020): those
    pending now, and the ids of the others; with the number of the group's pending jobs, in the
    same statement, so that the three are of one moment. The number is the triggers' (job_counts,
    sql/0008: exact in every transaction's view): counting 100,000 rows whose visibility is not
    settled yet (the tick rewrites their reasons) took 50-80 ms."""
    rows = conn.cursor(row_factory=tuple_row).execute(
        f"""SELECT (SELECT coalesce(sum(jobs), 0)::bigint FROM job_counts WHERE group_name = %(group)s AND state = %(pending)s),
                   changed.*
            FROM (SELECT 1) AS one LEFT JOIN (
                SELECT state, {_PENDING} FROM jobs
                WHERE group_name = %(group)s AND version >= pg_snapshot_xmin(%(since)s::pg_snapshot)
                  AND NOT pg_visible_in_snapshot(version, %(since)s::pg_snapshot)) AS changed ON true""",
        {"group": group, "pending": states.PENDING, "since": since},
    ).fetchall()
    pending, left = [], []
    for _, state, *fields in rows:
        if state == states.PENDING:
            pending.append(PendingRow(*fields))
        elif state is not None:
            left.append(fields[0])
    return rows[0][0], pending, left


# The unfinished states as constants in the statement's text: PostgreSQL proves a partial index's
# predicate (sql/0028) only from constants, not from parameters.
_UNFINISHED = ", ".join(f"'{state}'" for state in states.UNFINISHED)


def states_of(conn: DictConnection, ids: list[int]) -> dict[int, str]:
    """The states of these jobs, by id, in any group (the jobs a group's pending jobs wait for); a
    job gone is not in it. An array's id (its first task's) stands for all its tasks, so that
    `--after ARRAY_ID` waits for every task: RUNNING while one has not ended (read through the
    tasks not ended, sql/0028), then FAILED if one failed or was stopped, else CANCELLED if one was
    cancelled, else SUCCEEDED. Only that last judgement reads an array's finished tasks: once, in
    the tick that decides its dependents."""
    if not ids:
        return {}
    rows = conn.cursor(row_factory=tuple_row).execute(
        f"""SELECT j.id, j.state, j.array_id IS NOT DISTINCT FROM j.id AS of_array, g.going IS NOT NULL AS going
            FROM jobs j LEFT JOIN LATERAL (
                SELECT 1 AS going FROM jobs t WHERE t.array_id = j.id AND t.state IN ({_UNFINISHED}) LIMIT 1) g ON true
            WHERE j.id = ANY(%s)""", (ids,)).fetchall()
    found = {job_id: states.RUNNING if of_array and going else state for job_id, state, of_array, going in rows}
    ended = [job_id for job_id, _, of_array, going in rows if of_array and not going]
    if ended:
        found |= dict(conn.cursor(row_factory=tuple_row).execute(
            """SELECT array_id, CASE WHEN bool_or(state IN (%(failed)s, %(stopped)s)) THEN %(failed)s
                                     WHEN bool_or(state = %(cancelled)s) THEN %(cancelled)s
                                     ELSE %(succeeded)s END
               FROM jobs WHERE array_id = ANY(%(ids)s) GROUP BY array_id""",
            {"ids": ended, "failed": states.FAILED, "stopped": states.STOPPED, "cancelled": states.CANCELLED,
             "succeeded": states.SUCCEEDED}).fetchall())
    return found


def recent_run_times(conn: DictConnection, group: str, limit: int) -> list[Finished]:
    """The group's `limit` most recent successful jobs that have both times, newest first: user,
    request, seconds run. Through jobs_succeeded_recent, reading `limit` rows of the history
    whatever its size."""
    rows = conn.cursor(row_factory=args_row(Finished)).execute(
        """SELECT user_name, resources, extract(epoch FROM finished_at - started_at)::float8 AS seconds, bundles
           FROM jobs WHERE group_name = %s AND state = %s
           ORDER BY finished_at DESC LIMIT %s""",
        (group, states.SUCCEEDED, limit),
    ).fetchall()
    return [row for row in rows if row.seconds is not None]


def fail_pending_timeouts(conn: DictConnection, group: str, timeout_s: float, now: datetime) -> list[Moved]:
    return conn.cursor(row_factory=class_row(Moved)).execute(
        """UPDATE jobs SET state = %(to)s, reason = %(reason)s, finished_at = %(now)s, updated_at = now(),
                  message = 'waited longer than the group''s pending timeout of ' || %(timeout)s || ' s'
           WHERE group_name = %(group)s AND state = ANY(%(from)s)
             AND coalesce(requeued_at, submitted_at) < %(now)s - make_interval(secs => %(timeout)s)
           RETURNING id, user_name, state""",
        {"group": group, "timeout": timeout_s, "now": now, "reason": Reason.PENDING_TIMEOUT,
         "from": states.FAIL_PENDING_TIMEOUT.sources, "to": states.FAIL_PENDING_TIMEOUT.target},
    ).fetchall()


def _each(values: Mapping[int, Any], columns: Mapping[str, str], update: str, guard: str,
          params: Mapping[str, Any] | None = None, returning: str = "") -> tuple[str, dict[str, Any]]:
    """The statement and parameters of `update` (its UPDATE ... SET part) over every job of `values` (id
    -> its values of `columns`, name -> SQL type; the value itself for one column) in one statement
    whatever their number: the values unnested as `u` and joined on the id, where `guard` holds.
    Built here and sent by each caller, so that each statement is known by the function that sends it."""
    ids = list(values)
    rows = [values[i] for i in ids] if len(columns) > 1 else [(values[i],) for i in ids]
    arrays = {f"u_{name}": [row[index] for row in rows] for index, name in enumerate(columns)}
    unnest = ", ".join(["%(u_id)s::bigint[]", *(f"%(u_{name})s::{sql_type}[]" for name, sql_type in columns.items())])
    query = (f"{update} FROM unnest({unnest}) AS u(id, {', '.join(columns)})"
             f" WHERE jobs.id = u.id AND {guard}" + (f" RETURNING {returning}" if returning else ""))
    return query, {"u_id": ids, **arrays, **(params or {})}


# Columns the reconciliation may change, with their types, in the order of `update_jobs` values.
JOB_UPDATE_TYPES = {"state": "text", "node": "text", "ray_status": "text", "ray_message": "text", "reason": "text",
                    "message": "text", "started_at": "timestamptz", "finished_at": "timestamptz", "exit_code": "int",
                    "accepted_at": "timestamptz"}
JOB_UPDATE_COLUMNS = tuple(JOB_UPDATE_TYPES)


def update_jobs(conn: DictConnection, updates: dict[int, dict[str, Any]], *,
                from_states: tuple[str, ...] = states.ACTIVE) -> list[int]:
    """Write each job's new fields (all of JOB_UPDATE_COLUMNS) in one statement, only where the job is
    still in one of `from_states` and the move from its state to the new one is one of RECONCILE's;
    returns the ids written."""
    if not updates:
        return []
    moves = sorted(move for move in states.RECONCILE.moves if move[0] in from_states)
    return [row["id"] for row in conn.execute(*_each(
        {job_id: tuple(update[column] for column in JOB_UPDATE_COLUMNS) for job_id, update in updates.items()},
        JOB_UPDATE_TYPES,
        "UPDATE jobs SET " + ", ".join(f"{column} = u.{column}" for column in JOB_UPDATE_COLUMNS) + ", updated_at = now()",
        "(jobs.state, u.state) IN (SELECT * FROM unnest(%(sources)s::text[], %(targets)s::text[]))",
        {"sources": [source for source, _ in moves], "targets": [target for _, target in moves]},
        returning="jobs.id"))]


def set_observed(conn: DictConnection, observed: dict[int, dict]) -> None:
    """Each running job's observed use (core/observed.py `record`), in one statement; only jobs
    still RUNNING."""
    if observed:
        conn.execute(*_each({job_id: Jsonb(record) for job_id, record in observed.items()}, {"observed": "jsonb"},
                            "UPDATE jobs SET observed = u.observed", "jobs.state = ANY(%(from)s)",
                            {"from": states.SET_OBSERVED.sources}))


# A requeue's values per job: the state it was found in, the reason and the message.
_REQUEUE = {"from_state": "text", "reason": "text", "message": "text"}


def return_to_pending(conn: DictConnection, outcomes: dict[int, tuple[str, str, str]], max_attempts: int
                      ) -> list[Moved]:
    """Submissions Ray refused for the job's own request (id -> (from_state, reason, message)): back
    to PENDING (REQUEUE), or FAILED once the group's attempts are spent (REQUEUE_SPENT); only jobs
    still in `from_state`. Attempts that ended in an infrastructure fault (`requeues`) or a
    preemption (`preemptions`) are not counted. Returns id, state, user_name for each."""
    if not outcomes:
        return []
    used = "(jobs.attempt - jobs.requeues - jobs.preemptions)"
    return conn.cursor(row_factory=class_row(Moved)).execute(*_each(
        outcomes, _REQUEUE,
        f"""UPDATE jobs SET state = CASE WHEN {used} >= %(max)s THEN %(spent)s ELSE %(requeued)s END,
               finished_at = CASE WHEN {used} >= %(max)s THEN now() END,
               reason = u.reason,
               message = u.message || ' (attempt ' || {used} || ' of ' || %(max)s
                   || CASE WHEN {used} >= %(max)s THEN ', no attempt left)' ELSE ')' END,
               node = NULL, bundle_nodes = NULL, ray_status = NULL, accepted_at = NULL, placed_at = NULL,
               updated_at = now()""",
        f"""jobs.state = u.from_state
             AND jobs.state = ANY(CASE WHEN {used} >= %(max)s THEN %(spend)s::text[] ELSE %(requeue)s::text[] END)""",
        {"max": max_attempts, "requeue": states.REQUEUE.sources, "requeued": states.REQUEUE.target,
         "spend": states.REQUEUE_SPENT.sources, "spent": states.REQUEUE_SPENT.target},
        returning="jobs.id, jobs.state, jobs.user_name")).fetchall()


def requeue_infra(conn: DictConnection, outcomes: dict[int, tuple[str, str, str]], max_requeues: int
                  ) -> list[Moved]:
    """Attempts ended by an infrastructure fault (id -> (from_state, reason, message)): back to
    PENDING (REQUEUE_INFRA) with its place in the queue (submitted_at kept), one more requeue and
    none of its attempts used up; FAILED with the same reason once it was requeued `max_requeues`
    times (REQUEUE_INFRA_SPENT). Only jobs still in `from_state`. The next attempt still gets the
    next attempt number, and so a new submission_id. Returns id, state, user_name, requeues."""
    if not outcomes:
        return []
    return conn.cursor(row_factory=class_row(Moved)).execute(*_each(
        outcomes, _REQUEUE,
        """UPDATE jobs SET state = CASE WHEN jobs.requeues >= %(max)s THEN %(spent)s ELSE %(requeued)s END,
               requeues = jobs.requeues + CASE WHEN jobs.requeues >= %(max)s THEN 0 ELSE 1 END,
               requeued_at = CASE WHEN jobs.requeues >= %(max)s THEN jobs.requeued_at ELSE now() END,
               finished_at = CASE WHEN jobs.requeues >= %(max)s THEN now() END,
               reason = u.reason,
               message = u.message || CASE WHEN jobs.requeues >= %(max)s
                   THEN ' (requeued ' || jobs.requeues || ' of ' || %(max)s || ' times already: no requeue left)'
                   ELSE ' (requeue ' || jobs.requeues + 1 || ' of ' || %(max)s || ', not counted as an attempt)' END,
               node = CASE WHEN jobs.requeues >= %(max)s THEN jobs.node END,
               bundle_nodes = CASE WHEN jobs.requeues >= %(max)s THEN jobs.bundle_nodes END,
               started_at = CASE WHEN jobs.requeues >= %(max)s THEN jobs.started_at END,
               ray_status = NULL, accepted_at = NULL, placed_at = NULL, exit_code = NULL, updated_at = now()""",
        """jobs.state = u.from_state
             AND jobs.state = ANY(CASE WHEN jobs.requeues >= %(max)s THEN %(spend)s::text[] ELSE %(requeue)s::text[] END)""",
        {"max": max_requeues, "requeue": states.REQUEUE_INFRA.sources, "requeued": states.REQUEUE_INFRA.target,
         "spend": states.REQUEUE_INFRA_SPENT.sources, "spent": states.REQUEUE_INFRA_SPENT.target},
        returning="jobs.id, jobs.state, jobs.user_name, jobs.requeues")).fetchall()


def cancel_absent(conn: DictConnection, ids: list[int]) -> list[int]:
    """Jobs with a cancel request that Ray does not know (never received, or forgot): CANCELLED."""
    if not ids:
        return []
    return [row["id"] for row in conn.execute(
        """UPDATE jobs SET state = %(to)s, reason = %(reason)s, message = 'cancelled; Ray had not started it',
                  finished_at = now(), node = NULL, bundle_nodes = NULL, updated_at = now()
           WHERE id = ANY(%(ids)s) AND state = ANY(%(from)s) RETURNING id""",
        {"ids": ids, "from": states.CANCEL_ABSENT.sources, "to": states.CANCEL_ABSENT.target,
         "reason": Reason.CANCELLED},
    )]


_INTENT = ", ".join(f"jobs.{column}" for column in Intent.__dataclass_fields__)


def commit_intents(conn: DictConnection, placements: list[tuple[int, str]], installation: str,
                   bundle_nodes: Mapping[int, list[str]] | None = None,
                   clusters: Mapping[str, str] | None = None) -> list[Intent]:
    """The write-ahead intent: chosen node (and the node of each bundle, `bundle_nodes` by job),
    its cluster (`clusters`: by node id), next attempt and its submission_id, for jobs still
    PENDING and not cancelled meanwhile. Returns what to submit."""
    if not placements:
        return []
    planned, cluster_of = bundle_nodes or {}, clusters or {}
    return conn.cursor(row_factory=class_row(Intent)).execute(*_each(
        {job: (node, Jsonb(planned[job]) if job in planned else None, cluster_of.get(node)) for job, node in placements},
        {"node": "text", "bundle_nodes": "jsonb", "cluster": "text"},
        """UPDATE jobs SET state = %(to)s, node = u.node, bundle_nodes = u.bundle_nodes, cluster = u.cluster,
                  attempt = jobs.attempt + 1,
                  submission_id = %(installation)s || '-' || jobs.id || '-' || (jobs.attempt + 1),
                  reason = %(reason)s, message = 'placed on node ' || u.node || ', being submitted to Ray',
                  ray_status = NULL, ray_message = NULL, reserved_node = NULL, reserved_at = NULL,
                  reserved_kind = NULL, reserved_bundle_nodes = NULL, reserved_start = NULL, waiting_since = NULL,
                  queue_position = NULL, estimated_start_at = NULL, estimate_basis = NULL, placed_at = clock_timestamp(),
                  updated_at = now()""",
        "jobs.state = ANY(%(from)s)",
        {"installation": installation, "from": states.COMMIT_INTENT.sources, "to": states.COMMIT_INTENT.target,
         "reason": Reason.SUBMITTING},
        returning=_INTENT)).fetchall()


def intents_of(conn: DictConnection, ids: list[int]) -> list[Intent]:
    """The intents of jobs still SUBMITTING, to send again under their own submission ids."""
    if not ids:
        return []
    return conn.cursor(row_factory=class_row(Intent)).execute(
        f"SELECT {_INTENT} FROM jobs WHERE id = ANY(%s) AND state = %s ORDER BY id",
        (ids, states.SUBMITTING),
    ).fetchall()


# Why a tick ends a pending job FAILED, and the write that does it.
_FAILS = {Reason.INVALID_JOB: states.FAIL_INVALID, Reason.DEPENDENCY_NEVER: states.FAIL_DEPENDENCY}


def fail_pending(conn: DictConnection, failed: dict[int, str], reason: Reason) -> None:
    """Pending jobs FAILED for `reason`, each with its message: rows the planner cannot read
    (written around `submit`'s checks: InvalidJob), jobs waiting for a job that will never end as
    they ask (DependencyNeverSatisfied)."""
    if not failed:
        return
    write = _FAILS[reason]
    conn.execute(*_each(
        failed, {"message": "text"},
        "UPDATE jobs SET state = %(to)s, reason = %(reason)s, message = u.message, finished_at = now(), updated_at = now()",
        "jobs.state = ANY(%(from)s)", {"to": write.target, "from": write.sources, "reason": reason}))


def set_waiting(conn: DictConnection, waiting: dict[int, tuple[str, str]], now: datetime) -> None:
    """Pending jobs' new reasons and messages. A job's wait for resources starts `now` when its
    reason becomes one of WAITS_FOR_RESOURCES and is kept while it stays one of them (a requeued
    job starts again: its intent cleared it)."""
    if not waiting:
        return
    conn.execute(*_each(waiting, {"reason": "text", "message": "text"},
                        """UPDATE jobs SET reason = u.reason, message = u.message, updated_at = now(),
                                  waiting_since = CASE WHEN u.reason = ANY(%(resources)s)
                                                       THEN coalesce(jobs.waiting_since, %(now)s) END""",
                        "jobs.state = ANY(%(from)s)",
                        {"from": states.SET_WAITING.sources, "resources": [str(r) for r in WAITS_FOR_RESOURCES], "now": now}))


def set_estimates(conn: DictConnection, estimates: dict[int, tuple[int | None, datetime | None, str | None]]
                  ) -> None:
    """Pending jobs' position, estimated start and its basis that changed (id -> the three, None
    each to clear them)."""
    if not estimates:
        return
    conn.execute(*_each(estimates, {"position": "int", "start": "timestamptz", "basis": "text"},
                        "UPDATE jobs SET queue_position = u.position, estimated_start_at = u.start, estimate_basis = u.basis",
                        "jobs.state = ANY(%(from)s)", {"from": states.SET_ESTIMATE.sources}))


def mark_submitted(conn: DictConnection, ids: list[int]) -> None:
    if not ids:
        return
    conn.execute(
        """UPDATE jobs SET state = %s, reason = NULL, message = NULL, ray_status = %s, accepted_at = now(),
                  updated_at = now()
           WHERE id = ANY(%s) AND state = ANY(%s)""",
        (states.MARK_SUBMITTED.target, states.RAY_PENDING, ids, states.MARK_SUBMITTED.sources),
    )


def set_reservations(conn: DictConnection, reservations: Mapping[int, Held | None], now: datetime) -> None:
    """Pending jobs' reservations that changed (id -> the reservation, None: ended). One that holds
    the same nodes as before keeps its reserved_at; a new one starts `now`. A preemption's expected
    start is when it was made; a head-of-line one's, the plan's."""
    if not reservations:
        return
    same = """jobs.reserved_node IS NOT DISTINCT FROM u.node AND jobs.reserved_kind IS NOT DISTINCT FROM u.kind
              AND jobs.reserved_bundle_nodes IS NOT DISTINCT FROM u.bundle_nodes"""
    conn.execute(*_each(
        {job: (None, None, None, None) if held is None else
              (held.node, held.kind, None if held.bundle_nodes is None else Jsonb(list(held.bundle_nodes)), held.start)
         for job, held in reservations.items()},
        {"node": "text", "kind": "text", "bundle_nodes": "jsonb", "start": "timestamptz"},
        f"""UPDATE jobs SET reserved_node = u.node, reserved_kind = u.kind, reserved_bundle_nodes = u.bundle_nodes,
                  reserved_at = CASE WHEN u.node IS NULL THEN NULL WHEN {same} THEN jobs.reserved_at ELSE %(now)s END,
                  reserved_start = CASE WHEN u.node IS NULL THEN NULL WHEN u.kind = 'head' THEN u.start
                                        WHEN {same} THEN coalesce(jobs.reserved_start, jobs.reserved_at) ELSE %(now)s END,
                  updated_at = now()""",
        "jobs.state = ANY(%(from)s)", {"now": now, "from": states.SET_RESERVATION.sources}))


def mark_victims(conn: DictConnection, victims: dict[int, int], now: datetime) -> list[Victim]:
    """The preemption decision (victim id -> the job it makes room for), written before Ray is
    asked to stop anything: only jobs still running, not asked to stop already. Returns the rows
    marked, with what the stop and its log line need."""
    if not victims:
        return []
    return conn.cursor(row_factory=class_row(Victim)).execute(*_each(
        victims, {"by": "bigint"}, "UPDATE jobs SET preempted_at = %(now)s, preempted_by = u.by, updated_at = now()",
        """jobs.state = ANY(%(from)s)
             AND jobs.preempted_at IS NULL AND jobs.cancel_requested_at IS NULL""",
        {"now": now, "from": states.MARK_VICTIM.sources},
        returning=", ".join(f"jobs.{column}" for column in Victim.__dataclass_fields__))).fetchall()


def victims_stopping(conn: DictConnection, messages: dict[int, str]) -> None:
    """Victims Ray took the stop of: their reason says so, and tells the reconciliation the stop
    was sent (a victim without it is sent the stop again)."""
    if not messages:
        return
    conn.execute(*_each(messages, {"message": "text"},
                        "UPDATE jobs SET reason = %(reason)s, message = u.message, updated_at = now()",
                        "jobs.state = ANY(%(from)s)",
                        {"reason": Reason.PREEMPTED, "from": states.STOPPING_VICTIM.sources}))


def requeue_preempted(conn: DictConnection, outcomes: dict[int, tuple[str, str]]) -> list[Moved]:
    """Victims Ray reports stopped (id -> (from_state, message)): back to PENDING with reason
    Preempted, their place in the queue (submitted_at) kept, one more preemption and neither an
    attempt nor a requeue used up. The next attempt gets the next attempt number. Only jobs still in
    `from_state`. Returns id, user_name, state, preemptions."""
    if not outcomes:
        return []
    return conn.cursor(row_factory=class_row(Moved)).execute(*_each(
        outcomes, {"from_state": "text", "message": "text"},
        """UPDATE jobs SET state = %(to)s, preemptions = jobs.preemptions + 1, requeued_at = now(),
                  reason = %(reason)s, message = u.message, node = NULL, bundle_nodes = NULL, started_at = NULL,
                  ray_status = NULL,
                  accepted_at = NULL, placed_at = NULL, exit_code = NULL, preempted_at = NULL, preempted_by = NULL,
                  updated_at = now()""",
        "jobs.state = u.from_state AND jobs.state = ANY(%(sources)s)",
        {"to": states.REQUEUE_PREEMPTED.target, "sources": states.REQUEUE_PREEMPTED.sources,
         "reason": Reason.PREEMPTED},
        returning="jobs.id, jobs.user_name, jobs.state, jobs.preemptions")).fetchall()
