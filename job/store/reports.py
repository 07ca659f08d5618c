"""What the reports read (`python -m job share`, `serve`'s metrics and status page): a few statements,
each one whatever the number of jobs: jobs are counted by the triggers of sql/0008 (job_counts),
not here, and the few rows read from jobs (the active ones, the head of each queue) are read
through their partial indexes, never the history."""

from __future__ import annotations

from job.core import states
from job.store import DictConnection


def groups(conn: DictConnection, group: str | None = None) -> list[dict]:
    """The groups, each with its last successful tick (when, its steps, the nodes it saw), its last
    failed tick's time and cause when that came after (`failing_since`, `failing_cause`: None for a
    group whose last tick went well), the age of its oldest pending job (the lowest id, from
    jobs_pending: ids grow with submission), and the database's clock."""
    return conn.execute(
        """SELECT g.name, g.policy, g.selector, g.half_life_s, g.default_class, now() AS now,
                  t.at AS ticked_at, t.seconds AS tick_seconds, t.steps AS tick_steps,
                  coalesce(t.nodes, '[]'::jsonb) AS nodes,
                  f.at AS failing_since, f.cause AS failing_cause,
                  coalesce(extract(epoch FROM now() - o.submitted_at)::float8, 0) AS oldest_pending_s
           FROM resource_groups g
           LEFT JOIN LATERAL (SELECT at, seconds, steps, nodes FROM ticks
                              WHERE ticks.group_name = g.name AND ticks.outcome = 'ticked'
                              ORDER BY ticks.id DESC LIMIT 1) t ON true
           -- The totals keep each outcome's last time: the failed tick of that time, through ticks_at.
           LEFT JOIN LATERAL (SELECT x.at, x.cause FROM tick_totals ft JOIN ticks x
                                ON x.at = ft.last_at AND x.group_name = ft.group_name AND x.outcome = ft.outcome
                              WHERE ft.group_name = g.name AND ft.outcome = 'failed' AND ft.step = ''
                                AND ft.last_at > coalesce(t.at, '-infinity')
                              LIMIT 1) f ON true
           LEFT JOIN jobs o ON o.id = (SELECT min(id) FROM jobs p
                                       WHERE p.group_name = g.name AND p.state = %(pending)s)
           WHERE %(group)s::text IS NULL OR g.name = %(group)s
           ORDER BY g.name""",
        {"group": group, "pending": states.PENDING},
    ).fetchall()


def users(conn: DictConnection) -> list[dict]:
    """Every user's shares, account and decayed usage per group ({group: usage})."""
    return conn.execute(
        """SELECT u.name, u.shares, u.account,
                  coalesce(jsonb_object_agg(uu.group_name, uu.usage) FILTER (WHERE uu.group_name IS NOT NULL),
                           '{}'::jsonb) AS usage
           FROM users u LEFT JOIN user_usage uu ON uu.user_name = u.name
           GROUP BY u.name, u.shares, u.account ORDER BY u.name""",
    ).fetchall()


def job_counts(conn: DictConnection, group: str | None = None) -> list[dict]:
    """Unfinished jobs per group, user, class, state and reason ('' for none; a class of '': the
    group's default)."""
    return conn.execute(
        """SELECT group_name, user_name, class, state, reason, sum(jobs)::bigint AS jobs FROM job_counts
           WHERE %(group)s::text IS NULL OR group_name = %(group)s
           GROUP BY 1, 2, 3, 4, 5 HAVING sum(jobs) <> 0""",
        {"group": group},
    ).fetchall()


def active_jobs(conn: DictConnection, group: str | None = None) -> list[dict]:
    """What each active job holds: as many as the clusters run at once, read through jobs_active.
    A running job holds what it is charged, the larger of declared and observed per resource
    (`observed`, the tick's record); the others their request."""
    return conn.execute(
        """SELECT j.group_name, j.user_name,
                  CASE WHEN j.state = %(running)s AND j.observed IS NOT NULL THEN j.observed->'charged' ELSE j.resources END
                  AS resources,
                  -- The charged use already counts the bundles (the larger of declared and used).
                  CASE WHEN j.state = %(running)s AND j.observed IS NOT NULL THEN NULL ELSE j.bundles END AS bundles,
                  -- A job placed before groups had several clusters is in its group's first.
                  coalesce(j.cluster, g.clusters -> 0 ->> 'name') AS cluster
           FROM jobs j JOIN resource_groups g ON g.name = j.group_name
           WHERE j.state = ANY(%(active)s) AND (%(group)s::text IS NULL OR j.group_name = %(group)s)""",
        {"active": list(states.ACTIVE), "running": states.RUNNING, "group": group},
    ).fetchall()


def tick_totals(conn: DictConnection) -> list[dict]:
    return conn.execute(
        "SELECT group_name, outcome, step, ticks, seconds, last_at FROM tick_totals ORDER BY 1, 2, 3").fetchall()


def event_totals(conn: DictConnection) -> list[dict]:
    return conn.execute(
        """SELECT group_name, kind, state, reason, sum(count)::bigint AS count FROM job_event_totals
           GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4""").fetchall()


def queue_head(conn: DictConnection, limit: int) -> list[dict]:
    """The first `limit` pending jobs of each group in plan order, as the last tick stored it (those
    without a position after, oldest first). Their ids come from jobs_pending_position alone (an
    index-only scan): ordered over the whole table, PostgreSQL would walk through the history."""
    return conn.execute(
        """SELECT g.name AS group_name, j.id, j.user_name,
                   coalesce(j.priority_class, g.default_class) AS priority_class, j.priority, j.submitted_at,
                   j.reason, j.message, j.resources, j.bundles, j.queue_position, j.estimated_start_at, j.estimate_basis,
                   j.array_id
            FROM resource_groups g
            CROSS JOIN LATERAL (SELECT id, queue_position FROM jobs WHERE jobs.group_name = g.name
                                  AND state = %(pending)s
                                ORDER BY queue_position, id LIMIT %(limit)s) head
            JOIN jobs j ON j.id = head.id
            ORDER BY g.name, head.queue_position, j.id""",
        {"pending": states.PENDING, "limit": limit},
    ).fetchall()
