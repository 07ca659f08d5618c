"""What the reports read (`python -m job share`, `serve`'s metrics and status page): a few aggregate
statements, each one whatever the number of jobs or users, reading unfinished jobs through their
partial indexes and never the history."""

from __future__ import annotations

import psycopg

from job.core import states

# The job's priority class, as a label of the metrics: none until jobs have a class column; then
# this one expression becomes that column.
CLASS = "''"


def groups(conn: psycopg.Connection, group: str | None = None) -> list[dict]:
    """The groups, each with its last successful tick (when, its steps, the nodes it saw) and the
    database's clock, from which ages are counted."""
    return conn.execute(
        """SELECT g.name, g.policy, g.selector, g.half_life_s, now() AS now,
                  t.at AS ticked_at, t.seconds AS tick_seconds, t.steps AS tick_steps,
                  coalesce(t.nodes, '[]'::jsonb) AS nodes
           FROM resource_groups g
           LEFT JOIN LATERAL (SELECT at, seconds, steps, nodes FROM ticks
                              WHERE ticks.group_name = g.name AND ticks.outcome = 'ticked'
                              ORDER BY ticks.id DESC LIMIT 1) t ON true
           WHERE %(group)s::text IS NULL OR g.name = %(group)s
           ORDER BY g.name""",
        {"group": group},
    ).fetchall()


def users(conn: psycopg.Connection) -> list[dict]:
    """Every user's shares and its decayed usage per group ({group: usage})."""
    return conn.execute(
        """SELECT u.name, u.shares,
                  coalesce(jsonb_object_agg(uu.group_name, uu.usage) FILTER (WHERE uu.group_name IS NOT NULL),
                           '{}'::jsonb) AS usage
           FROM users u LEFT JOIN user_usage uu ON uu.user_name = u.name
           GROUP BY u.name, u.shares ORDER BY u.name""",
    ).fetchall()


def pending_counts(conn: psycopg.Connection, group: str | None = None) -> list[dict]:
    """Pending jobs per group, user, class and waiting reason, with the age of the oldest (s)."""
    return conn.execute(
        f"""SELECT group_name, user_name, {CLASS} AS class, coalesce(reason, '') AS reason, count(*) AS jobs,
                   extract(epoch FROM now() - min(submitted_at))::float8 AS oldest_s
            FROM jobs WHERE state = %(pending)s AND (%(group)s::text IS NULL OR group_name = %(group)s)
            GROUP BY 1, 2, 3, 4""",
        {"pending": states.PENDING, "group": group},
    ).fetchall()


def active_jobs(conn: psycopg.Connection, group: str | None = None) -> list[dict]:
    return conn.execute(
        f"""SELECT group_name, user_name, {CLASS} AS class, state, resources
            FROM jobs WHERE state = ANY(%(active)s) AND (%(group)s::text IS NULL OR group_name = %(group)s)""",
        {"active": list(states.ACTIVE), "group": group},
    ).fetchall()


def tick_totals(conn: psycopg.Connection) -> list[dict]:
    return conn.execute(
        "SELECT group_name, outcome, step, ticks, seconds, last_at FROM tick_totals ORDER BY 1, 2, 3").fetchall()


def event_totals(conn: psycopg.Connection) -> list[dict]:
    return conn.execute(
        "SELECT group_name, kind, state, reason, count FROM job_event_totals ORDER BY 1, 2, 3, 4").fetchall()


def queue_head(conn: psycopg.Connection, limit: int) -> list[dict]:
    """The first `limit` pending jobs of each group, oldest first (by id, through jobs_pending)."""
    return conn.execute(
        f"""SELECT g.name AS group_name, j.*
            FROM resource_groups g
            CROSS JOIN LATERAL (SELECT id, user_name, {CLASS} AS class, priority, submitted_at, reason, message,
                                       resources
                                FROM jobs WHERE jobs.group_name = g.name AND state = %(pending)s
                                ORDER BY id LIMIT %(limit)s) j
            ORDER BY g.name, j.id""",
        {"pending": states.PENDING, "limit": limit},
    ).fetchall()
