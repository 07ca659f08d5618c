"""Statements on users: shares, limits and usage per group."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

import psycopg
from psycopg.rows import class_row

from job.core import states
from job.core.errors import NotFound
from job.core.members import ListedUser, Member, UserRow
from job.store import DictConnection
from job.store.params import json_param

if TYPE_CHECKING:
    from job.core.specs import UserSpec


def upsert_user(conn: DictConnection, spec: UserSpec) -> None:
    values = spec.model_dump()
    # The spec's fields, from the spec given: pydantic's models are for a write, not for `user list`.
    columns = tuple(type(spec).model_fields)
    updates = [column for column in columns if column != "name"]
    try:
        conn.execute(
            f"""INSERT INTO users ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})
                ON CONFLICT (name) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in updates)}, updated_at = now()""",
            [json_param(column, values[column]) for column in columns],
        )
    except psycopg.errors.ForeignKeyViolation:
        conn.rollback()
        raise NotFound(f"account: {spec.account!r} does not exist "
                       f"(add it with `python -m job account add {spec.account}`)") from None


def _selected(alias: str = "") -> str:
    return ", ".join(alias + field.name for field in fields(UserRow))


def get_user(conn: DictConnection, name: str) -> UserRow | None:
    return conn.cursor(row_factory=class_row(UserRow)).execute(
        f"SELECT {_selected()} FROM users WHERE name = %s", (name,)).fetchone()


def user_usage(conn: DictConnection, name: str) -> list[dict]:
    return conn.execute(
        """SELECT g.name AS group, coalesce(u.usage, 0) AS usage,
                  count(j.id) FILTER (WHERE j.state = %(pending)s) AS pending,
                  count(j.id) FILTER (WHERE j.state = ANY(%(active)s)) AS active,
                  count(j.id) FILTER (WHERE j.state = ANY(%(finished)s)) AS finished
           FROM resource_groups g
           LEFT JOIN user_usage u ON u.group_name = g.name AND u.user_name = %(name)s
           LEFT JOIN jobs j ON j.group_name = g.name AND j.user_name = %(name)s
           GROUP BY g.name, u.usage
           HAVING count(j.id) > 0 OR coalesce(u.usage, 0) > 0
           ORDER BY g.name""",
        {"name": name, "pending": states.PENDING, "active": list(states.ACTIVE), "finished": list(states.FINISHED)},
    ).fetchall()


def list_users(conn: DictConnection) -> list[ListedUser]:
    return conn.cursor(row_factory=class_row(ListedUser)).execute(
        f"""SELECT {_selected("u.")}, count(j.id) FILTER (WHERE j.state = %s) AS pending,
                  count(j.id) FILTER (WHERE j.state = ANY(%s)) AS active
           FROM users u LEFT JOIN jobs j ON j.user_name = u.name
           GROUP BY u.name ORDER BY u.name""",
        (states.PENDING, list(states.ACTIVE)),
    ).fetchall()


def users_of_group(conn: DictConnection, group: str) -> list[Member]:
    """Every user with jobs waiting or active in the group, or with usage there.

    A tick sends this: it must read only the group's unfinished jobs, never a user's history. Each
    branch below matches one partial index: a user's pending jobs are probed for in
    jobs_pending_user (sql/0019_pending_users.sql; a scan of every pending row, 100k, was most of
    the reconciliation's time), the group's few active jobs read through jobs_active. One condition
    on all unfinished states would match neither, and PostgreSQL would read every job of each user
    (jobs_user) or the whole table (tests/store/test_history.py)."""
    return conn.cursor(row_factory=class_row(Member)).execute(
        """SELECT u.name, u.shares, u.max_running, u.max_resources, u.account, coalesce(uu.usage, 0) AS usage
           FROM users u LEFT JOIN user_usage uu ON uu.user_name = u.name AND uu.group_name = %(group)s
           WHERE uu.usage > 0
              OR EXISTS (SELECT 1 FROM jobs WHERE group_name = %(group)s AND state = %(pending)s AND user_name = u.name)
              OR u.name IN (SELECT user_name FROM jobs WHERE group_name = %(group)s AND state = ANY(%(active)s))""",
        {"group": group, "pending": states.PENDING, "active": list(states.ACTIVE)},
    ).fetchall()
