"""The tick's statements on jobs. Each is one statement over a whole group, whatever the number of
jobs, so that a tick's round trips stay flat from a thousand pending jobs to a hundred thousand."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import args_row

from job.core import states
from job.core.group_snapshot import PendingRow


def active_jobs(conn: psycopg.Connection, group: str) -> list[dict]:
    return conn.execute(
        """SELECT id, user_name, state, resources, node, attempt, submission_id, ray_status, ray_message,
                  reason, message, started_at, finished_at, exit_code, max_runtime_s, cancel_requested_at,
                  requeues, accepted_at, priority_class, preempted_at, preempted_by,
                  -- Whether Ray builds something for it before the driver starts (env_vars alone: no).
                  runtime_env - 'env_vars' - 'config' <> '{}'::jsonb AS builds_runtime_env
           FROM jobs WHERE group_name = %s AND state = ANY(%s)
           ORDER BY id""",
        (group, list(states.ACTIVE)),
    ).fetchall()


def pending_jobs(conn: psycopg.Connection, group: str) -> list[PendingRow]:
    return conn.cursor(row_factory=args_row(PendingRow)).execute(
        """SELECT id, user_name, resources::text, node_labels::text, priority, submitted_at, not_before, reason, message,
                  priority_class, reserved_node, reserved_at, max_runtime_s,
                  queue_position, estimated_start_at, estimate_basis
           FROM jobs WHERE group_name = %s AND state = %s ORDER BY id""",
        (group, states.PENDING),
    ).fetchall()


def recent_run_times(conn: psycopg.Connection, group: str, limit: int) -> list[dict]:
    """The group's `limit` most recent successful jobs, newest first: user, request, seconds run.
    Through jobs_succeeded_recent, reading `limit` rows of the history whatever its size."""
    return conn.execute(
        """SELECT user_name, resources, extract(epoch FROM finished_at - started_at)::float8 AS seconds
           FROM jobs WHERE group_name = %s AND state = %s
           ORDER BY finished_at DESC LIMIT %s""",
        (group, states.SUCCEEDED, limit),
    ).fetchall()


def fail_pending_timeouts(conn: psycopg.Connection, group: str, timeout_s: float, now: datetime) -> list[dict]:
    return conn.execute(
        """UPDATE jobs SET state = %(to)s, reason = 'PendingTimeout', finished_at = %(now)s, updated_at = now(),
                  message = 'waited longer than the group''s pending timeout of ' || %(timeout)s || ' s'
           WHERE group_name = %(group)s AND state = ANY(%(from)s)
             AND coalesce(requeued_at, submitted_at) < %(now)s - make_interval(secs => %(timeout)s)
           RETURNING id, user_name""",
        {"group": group, "timeout": timeout_s, "now": now,
         "from": states.FAIL_PENDING_TIMEOUT.sources, "to": states.FAIL_PENDING_TIMEOUT.target},
    ).fetchall()


# Columns the reconciliation may change, in the order of `update_jobs` rows.
JOB_UPDATE_COLUMNS = ("state", "node", "ray_status", "ray_message", "reason", "message", "started_at",
                      "finished_at", "exit_code", "accepted_at")


_UPDATE_TYPES = ("text", "text", "text", "text", "text", "text", "timestamptz", "timestamptz", "int", "timestamptz")


def update_jobs(conn: psycopg.Connection, updates: dict[int, dict[str, Any]], *,
                from_states: tuple[str, ...] = states.ACTIVE) -> list[int]:
    """Write each job's new fields (all of JOB_UPDATE_COLUMNS) in one statement, only where the job is
    still in one of `from_states` and the move from its state to the new one is one of RECONCILE's;
    returns the ids written."""
    if not updates:
        return []
    ids = list(updates)
    columns = [[updates[job_id][column] for job_id in ids] for column in JOB_UPDATE_COLUMNS]
    assignments = ", ".join(f"{column} = u.{column}" for column in JOB_UPDATE_COLUMNS)
    arrays = ", ".join(f"%s::{sql_type}[]" for sql_type in _UPDATE_TYPES)
    moves = sorted(move for move in states.RECONCILE.moves if move[0] in from_states)
    rows = conn.execute(
        f"""UPDATE jobs SET {assignments}, updated_at = now()
            FROM unnest(%s::bigint[], {arrays}) AS u(id, {', '.join(JOB_UPDATE_COLUMNS)})
            WHERE jobs.id = u.id
              AND (jobs.state, u.state) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
            RETURNING jobs.id""",
        [ids, *columns, [source for source, _ in moves], [target for _, target in moves]],
    ).fetchall()
    return [row["id"] for row in rows]


def return_to_pending(conn: psycopg.Connection, outcomes: dict[int, tuple[str, str, str]], max_attempts: int) -> list[dict]:
    """Submissions Ray refused for the job's own request (id -> (from_state, reason, message)): back
    to PENDING (REQUEUE), or FAILED once the group's attempts are spent (REQUEUE_SPENT); only jobs
    still in `from_state`. Attempts that ended in an infrastructure fault (`requeues`) or a
    preemption (`preemptions`) are not counted. Returns id, state, user_name for each."""
    if not outcomes:
        return []
    ids = list(outcomes)
    used = "(jobs.attempt - jobs.requeues - jobs.preemptions)"
    return conn.execute(
        f"""UPDATE jobs SET
               state = CASE WHEN {used} >= %(max)s THEN %(spent)s ELSE %(requeued)s END,
               finished_at = CASE WHEN {used} >= %(max)s THEN now() END,
               reason = u.reason,
               message = u.message || ' (attempt ' || {used} || ' of ' || %(max)s
                   || CASE WHEN {used} >= %(max)s THEN ', no attempt left)' ELSE ')' END,
               node = NULL, ray_status = NULL, accepted_at = NULL, updated_at = now()
           FROM unnest(%(ids)s::bigint[], %(from)s::text[], %(reasons)s::text[], %(messages)s::text[])
                AS u(id, from_state, reason, message)
           WHERE jobs.id = u.id AND jobs.state = u.from_state
             AND jobs.state = ANY(CASE WHEN {used} >= %(max)s THEN %(spend)s::text[] ELSE %(requeue)s::text[] END)
           RETURNING jobs.id, jobs.state, jobs.user_name""",
        {"max": max_attempts, "ids": ids, "from": [outcomes[i][0] for i in ids],
         "requeue": states.REQUEUE.sources, "requeued": states.REQUEUE.target,
         "spend": states.REQUEUE_SPENT.sources, "spent": states.REQUEUE_SPENT.target,
         "reasons": [outcomes[i][1] for i in ids], "messages": [outcomes[i][2] for i in ids]},
    ).fetchall()


def requeue_infra(conn: psycopg.Connection, outcomes: dict[int, tuple[str, str, str]], max_requeues: int) -> list[dict]:
    """Attempts ended by an infrastructure fault (id -> (from_state, reason, message)): back to
    PENDING (REQUEUE_INFRA) with its place in the queue (submitted_at kept), one more requeue and
    none of its attempts used up; FAILED with the same reason once it was requeued `max_requeues`
    times (REQUEUE_INFRA_SPENT). Only jobs still in `from_state`. The next attempt still gets the
    next attempt number, and so a new submission_id. Returns id, state, user_name, requeues."""
    if not outcomes:
        return []
    ids = list(outcomes)
    return conn.execute(
        """UPDATE jobs SET
               state = CASE WHEN jobs.requeues >= %(max)s THEN %(spent)s ELSE %(requeued)s END,
               requeues = jobs.requeues + CASE WHEN jobs.requeues >= %(max)s THEN 0 ELSE 1 END,
               requeued_at = CASE WHEN jobs.requeues >= %(max)s THEN jobs.requeued_at ELSE now() END,
               finished_at = CASE WHEN jobs.requeues >= %(max)s THEN now() END,
               reason = u.reason,
               message = u.message || CASE WHEN jobs.requeues >= %(max)s
                   THEN ' (requeued ' || jobs.requeues || ' of ' || %(max)s || ' times already: no requeue left)'
                   ELSE ' (requeue ' || jobs.requeues + 1 || ' of ' || %(max)s || ', not counted as an attempt)' END,
               node = CASE WHEN jobs.requeues >= %(max)s THEN jobs.node END,
               started_at = CASE WHEN jobs.requeues >= %(max)s THEN jobs.started_at END,
               ray_status = NULL, accepted_at = NULL, exit_code = NULL, updated_at = now()
           FROM unnest(%(ids)s::bigint[], %(from)s::text[], %(reasons)s::text[], %(messages)s::text[])
                AS u(id, from_state, reason, message)
           WHERE jobs.id = u.id AND jobs.state = u.from_state
             AND jobs.state = ANY(CASE WHEN jobs.requeues >= %(max)s THEN %(spend)s::text[] ELSE %(requeue)s::text[] END)
           RETURNING jobs.id, jobs.state, jobs.user_name, jobs.requeues""",
        {"max": max_requeues, "ids": ids, "from": [outcomes[i][0] for i in ids],
         "requeue": states.REQUEUE_INFRA.sources, "requeued": states.REQUEUE_INFRA.target,
         "spend": states.REQUEUE_INFRA_SPENT.sources, "spent": states.REQUEUE_INFRA_SPENT.target,
         "reasons": [outcomes[i][1] for i in ids], "messages": [outcomes[i][2] for i in ids]},
    ).fetchall()


def cancel_absent(conn: psycopg.Connection, ids: list[int]) -> list[int]:
    """Jobs with a cancel request that Ray does not know (never received, or forgot): CANCELLED."""
    if not ids:
        return []
    return [row["id"] for row in conn.execute(
        """UPDATE jobs SET state = %(to)s, reason = 'Cancelled', message = 'cancelled; Ray had not started it',
                  finished_at = now(), node = NULL, updated_at = now()
           WHERE id = ANY(%(ids)s) AND state = ANY(%(from)s) RETURNING id""",
        {"ids": ids, "from": states.CANCEL_ABSENT.sources, "to": states.CANCEL_ABSENT.target},
    )]


# A job's intent: what the submit step sends to Ray.
_INTENT = ("id", "user_name", "group_name", "entrypoint", "runtime_env", "metadata", "resources", "node", "attempt",
           "submission_id", "priority_class")


def commit_intents(conn: psycopg.Connection, placements: list[tuple[int, str]], installation: str) -> list[dict]:
    """The write-ahead intent: chosen node, next attempt and its submission_id, for jobs still
    PENDING and not cancelled meanwhile. Returns what to submit."""
    if not placements:
        return []
    return conn.execute(
        """UPDATE jobs SET state = %(to)s, node = p.node, attempt = jobs.attempt + 1,
                  submission_id = %(installation)s || '-' || jobs.id || '-' || (jobs.attempt + 1),
                  reason = 'Submitting', message = 'placed on node ' || p.node || ', being submitted to Ray',
                  ray_status = NULL, ray_message = NULL, reserved_node = NULL, reserved_at = NULL,
                  queue_position = NULL, estimated_start_at = NULL, estimate_basis = NULL, updated_at = now()
           FROM unnest(%(ids)s::bigint[], %(nodes)s::text[]) AS p(id, node)
           WHERE jobs.id = p.id AND jobs.state = ANY(%(from)s)
           RETURNING """ + ", ".join(f"jobs.{column}" for column in _INTENT),
        {"installation": installation, "ids": [job_id for job_id, _ in placements],
         "from": states.COMMIT_INTENT.sources, "to": states.COMMIT_INTENT.target,
         "nodes": [node for _, node in placements]},
    ).fetchall()


def intents_of(conn: psycopg.Connection, ids: list[int]) -> list[dict]:
    """The intents of jobs still SUBMITTING, to send again under their own submission ids."""
    if not ids:
        return []
    return conn.execute(
        f"SELECT {', '.join(_INTENT)} FROM jobs WHERE id = ANY(%s) AND state = %s ORDER BY id",
        (ids, states.SUBMITTING),
    ).fetchall()


def fail_invalid(conn: psycopg.Connection, invalid: dict[int, str]) -> None:
    """Pending rows the planner cannot read (written around `submit`'s checks): FAILED, with why."""
    if not invalid:
        return
    ids = list(invalid)
    conn.execute(
        """UPDATE jobs SET state = %s, reason = 'InvalidJob', message = u.message, finished_at = now(), updated_at = now()
           FROM unnest(%s::bigint[], %s::text[]) AS u(id, message) WHERE jobs.id = u.id AND jobs.state = ANY(%s)""",
        (states.FAIL_INVALID.target, ids, [invalid[i] for i in ids], states.FAIL_INVALID.sources),
    )


def set_waiting(conn: psycopg.Connection, waiting: dict[int, tuple[str, str]]) -> None:
    if not waiting:
        return
    ids = list(waiting)
    conn.execute(
        """UPDATE jobs SET reason = u.reason, message = u.message, updated_at = now()
           FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS u(id, reason, message)
           WHERE jobs.id = u.id AND jobs.state = ANY(%s)""",
        (ids, [waiting[i][0] for i in ids], [waiting[i][1] for i in ids], states.SET_WAITING.sources),
    )


def set_estimates(conn: psycopg.Connection, estimates: dict[int, tuple[int | None, datetime | None, str | None]]
                  ) -> None:
    """Pending jobs' position, estimated start and its basis that changed (id -> the three, None
    each to clear them)."""
    if not estimates:
        return
    ids = list(estimates)
    conn.execute(
        """UPDATE jobs SET queue_position = u.position, estimated_start_at = u.start, estimate_basis = u.basis
           FROM unnest(%s::bigint[], %s::int[], %s::timestamptz[], %s::text[]) AS u(id, position, start, basis)
           WHERE jobs.id = u.id AND jobs.state = ANY(%s)""",
        (ids, *([estimates[i][column] for i in ids] for column in range(3)), states.SET_ESTIMATE.sources),
    )


def mark_submitted(conn: psycopg.Connection, ids: list[int]) -> None:
    if not ids:
        return
    conn.execute(
        """UPDATE jobs SET state = %s, reason = NULL, message = NULL, ray_status = %s, accepted_at = now(),
                  updated_at = now()
           WHERE id = ANY(%s) AND state = ANY(%s)""",
        (states.MARK_SUBMITTED.target, states.RAY_PENDING, ids, states.MARK_SUBMITTED.sources),
    )


def set_reservations(conn: psycopg.Connection, reservations: dict[int, str | None], now: datetime) -> None:
    """Pending jobs' reservations that changed (id -> node, None: ended). A new one starts `now`."""
    if not reservations:
        return
    ids = list(reservations)
    conn.execute(
        """UPDATE jobs SET reserved_node = u.node,
                  reserved_at = CASE WHEN u.node IS NULL THEN NULL
                                     WHEN jobs.reserved_node IS NOT DISTINCT FROM u.node THEN jobs.reserved_at
                                     ELSE %s END,
                  updated_at = now()
           FROM unnest(%s::bigint[], %s::text[]) AS u(id, node)
           WHERE jobs.id = u.id AND jobs.state = ANY(%s)""",
        (now, ids, [reservations[i] for i in ids], states.SET_RESERVATION.sources),
    )


def mark_victims(conn: psycopg.Connection, victims: dict[int, int], now: datetime) -> list[dict]:
    """The preemption decision (victim id -> the job it makes room for), written before Ray is
    asked to stop anything: only jobs still running, not asked to stop already. Returns the rows
    marked, with what the stop and its log line need."""
    if not victims:
        return []
    ids = list(victims)
    return conn.execute(
        """UPDATE jobs SET preempted_at = %s, preempted_by = u.by, updated_at = now()
           FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, by)
           WHERE jobs.id = u.id AND jobs.state = ANY(%s)
             AND jobs.preempted_at IS NULL AND jobs.cancel_requested_at IS NULL
           RETURNING jobs.id, jobs.user_name, jobs.priority_class, jobs.node, jobs.started_at, jobs.submission_id,
                     jobs.preempted_by""",
        (now, ids, [victims[i] for i in ids], states.MARK_VICTIM.sources),
    ).fetchall()


def victims_stopping(conn: psycopg.Connection, messages: dict[int, str]) -> None:
    """Victims Ray took the stop of: their reason says so, and tells the reconciliation the stop
    was sent (a victim without it is sent the stop again)."""
    if not messages:
        return
    ids = list(messages)
    conn.execute(
        """UPDATE jobs SET reason = 'Preempted', message = u.message, updated_at = now()
           FROM unnest(%s::bigint[], %s::text[]) AS u(id, message)
           WHERE jobs.id = u.id AND jobs.state = ANY(%s)""",
        (ids, [messages[i] for i in ids], states.STOPPING_VICTIM.sources),
    )


def requeue_preempted(conn: psycopg.Connection, outcomes: dict[int, tuple[str, str]]) -> list[dict]:
    """Victims Ray reports stopped (id -> (from_state, message)): back to PENDING with reason
    Preempted, their place in the queue (submitted_at) kept, one more preemption and neither an
    attempt nor a requeue used up. The next attempt gets the next attempt number. Only jobs still in
    `from_state`. Returns id, user_name, preemptions."""
    if not outcomes:
        return []
    ids = list(outcomes)
    return conn.execute(
        """UPDATE jobs SET state = %(to)s, preemptions = jobs.preemptions + 1, requeued_at = now(),
                  reason = 'Preempted', message = u.message, node = NULL, started_at = NULL, ray_status = NULL,
                  accepted_at = NULL, exit_code = NULL, preempted_at = NULL, preempted_by = NULL, updated_at = now()
           FROM unnest(%(ids)s::bigint[], %(from)s::text[], %(messages)s::text[]) AS u(id, from_state, message)
           WHERE jobs.id = u.id AND jobs.state = u.from_state AND jobs.state = ANY(%(sources)s)
           RETURNING jobs.id, jobs.user_name, jobs.preemptions""",
        {"to": states.REQUEUE_PREEMPTED.target, "sources": states.REQUEUE_PREEMPTED.sources, "ids": ids,
         "from": [outcomes[i][0] for i in ids], "messages": [outcomes[i][1] for i in ids]},
    ).fetchall()
