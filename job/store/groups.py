"""Statements on resource groups: their options, the tick's lock on each, the state its selector
keeps, and when usage was last charged; and the installation's id."""

from __future__ import annotations

from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from job.core import states
from job.core.errors import Conflict, NotFound
from job.core.group import OPTIONS as _GROUP_COLUMNS
from job.core.group import GroupConfig
from job.core.specs import GroupSpec
from job.store import DictConnection, one
from job.store.params import json_param

# Advisory lock namespace of the per-group tick lock: pg_try_advisory_lock(int, int).
TICK_LOCK_CLASS = 0x6A6F62  # "job"


def _one_autoscaler_per_cluster(conn: DictConnection, spec: GroupSpec) -> None:
    """Ray keeps one request_resources per cluster, the last one made: two groups asking for their
    own demand on one cluster would each erase the other's."""
    if not spec.autoscale:
        return
    addresses = [c.address for c in spec.clusters]
    other = conn.execute("""SELECT name, c ->> 'address' AS address FROM resource_groups, jsonb_array_elements(clusters) c
                            WHERE autoscale AND c ->> 'address' = ANY(%s) AND name <> %s LIMIT 1""",
                         (addresses, spec.name)).fetchone()
    if other:
        raise Conflict(f"group {other['name']!r} already autoscales the Ray cluster {other['address']}: Ray keeps one "
                       "demand per cluster, so only one group of a cluster may autoscale")


def insert_group(conn: DictConnection, spec: GroupSpec) -> None:
    _one_autoscaler_per_cluster(conn, spec)
    values = spec.model_dump()
    try:
        conn.execute(
            f"INSERT INTO resource_groups ({', '.join(_GROUP_COLUMNS)}) VALUES ({', '.join(['%s'] * len(_GROUP_COLUMNS))})",
            [json_param(column, values[column]) for column in _GROUP_COLUMNS],
        )
    except psycopg.errors.UniqueViolation:
        conn.rollback()
        raise Conflict(f"group {spec.name!r} already exists (change it with `python -m job group set {spec.name}`)") from None


def get_group(conn: DictConnection, name: str, *, for_update: bool = False) -> GroupConfig:
    row = conn.execute(
        "SELECT * FROM resource_groups WHERE name = %s" + (" FOR UPDATE" if for_update else ""), (name,)
    ).fetchone()
    if row is None:
        raise NotFound(f"group {name!r} does not exist (see `python -m job group list`)")
    return GroupConfig.from_row(row)


def update_group(conn: DictConnection, spec: GroupSpec) -> None:
    """Write the group's options. Dropping a cluster (or changing its address) is refused while
    jobs are active in it: their submissions live there, and the next tick, not finding them, would
    submit them again. Dropping a class is refused while unfinished jobs name it."""
    current = get_group(conn, spec.name, for_update=True)
    dropped = sorted(current.class_names - {c["name"] for c in spec.priority_classes})
    if dropped:
        used = conn.execute(
            """SELECT priority_class, count(*) AS n FROM jobs
               WHERE group_name = %s AND state = ANY(%s) AND priority_class = ANY(%s)
               GROUP BY priority_class ORDER BY priority_class""",
            (spec.name, list(states.UNFINISHED), dropped),
        ).fetchall()
        if used:
            counts = ", ".join(f"{row['n']} of class {row['priority_class']}" for row in used)
            raise Conflict(f"group {spec.name!r} has unfinished jobs of the classes to drop ({counts}): "
                           "keep those classes until the jobs finish (or cancel them)")
    kept = {(c.name, c.address) for c in spec.clusters}
    dropped = [c.name for c in current.clusters if (c.name, c.address) not in kept]
    if dropped:
        # A tick holds this lock from its plan to its last submission: wait for it, so that no
        # job becomes active between the count and the change.
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (TICK_LOCK_CLASS, spec.name))
        first = current.clusters[0].name
        active = one(conn.execute(
            """SELECT count(*) AS n FROM jobs WHERE group_name = %s AND state = ANY(%s)
                 AND coalesce(cluster, %s) = ANY(%s)""",
            (spec.name, list(states.ACTIVE), first, dropped),
        ))["n"]
        if active:
            raise Conflict(f"group {spec.name!r} has {active} active job(s) in cluster {dropped[0]}: use "
                           "--remove-ray-address, which takes no new job there and drops the cluster once they end")
    _one_autoscaler_per_cluster(conn, spec)
    values = spec.model_dump()
    columns = [column for column in _GROUP_COLUMNS if column != "name"]
    conn.execute(
        f"UPDATE resource_groups SET {', '.join(f'{column} = %s' for column in columns)}, updated_at = now() WHERE name = %s",
        [*(json_param(column, values[column]) for column in columns), spec.name],
    )


def drop_clusters(conn: DictConnection, group: str, names: list[str]) -> None:
    """Drops the clusters of those names that are being removed (the tick's, once no job of the
    group is active in them)."""
    conn.execute("""UPDATE resource_groups SET clusters = (
                        SELECT jsonb_agg(c ORDER BY i) FROM jsonb_array_elements(clusters) WITH ORDINALITY AS e(c, i)
                        WHERE NOT (c ->> 'name' = ANY(%s) AND (c ->> 'removing')::boolean))
                    WHERE name = %s""", (names, group))


def list_groups(conn: DictConnection) -> list[dict]:
    return conn.execute(
        """SELECT g.*, count(j.id) FILTER (WHERE j.state = %s) AS pending,
                  count(j.id) FILTER (WHERE j.state = ANY(%s)) AS active
           FROM resource_groups g LEFT JOIN jobs j ON j.group_name = g.name
           GROUP BY g.name ORDER BY g.name""",
        (states.PENDING, list(states.ACTIVE)),
    ).fetchall()


def remove_group(conn: DictConnection, name: str) -> int:
    """Remove a group without pending or active jobs, with its finished jobs; returns how many."""
    get_group(conn, name, for_update=True)
    busy = one(conn.execute(
        "SELECT count(*) AS n FROM jobs WHERE group_name = %s AND state = ANY(%s)",
        (name, list(states.UNFINISHED)),
    ))["n"]
    if busy:
        raise Conflict(f"group {name!r} has {busy} pending or active job(s): cancel them or wait for them to finish first")
    finished = conn.execute("DELETE FROM jobs WHERE group_name = %s", (name,)).rowcount
    conn.execute("DELETE FROM resource_groups WHERE name = %s", (name,))
    return finished


def runtime_env_allowance(conn: DictConnection, name: str) -> tuple[frozenset[str], frozenset[str]]:
    """The runtime_env keys the group lets its jobs use beyond the known ones, and the env_vars Ray
    reads for control it lets them set (none for a group that does not exist: the job's insert
    says so)."""
    row = conn.execute("SELECT allowed_runtime_env_keys AS keys, allowed_env_vars AS env_vars FROM resource_groups "
                       "WHERE name = %s", (name,)).fetchone()
    return (frozenset(row["keys"]), frozenset(row["env_vars"])) if row else (frozenset(), frozenset())


def installation_id(conn: DictConnection) -> str:
    # Its one row is written with the table (sql/0001_initial.sql).
    return one(conn.execute("SELECT id FROM installation"))["id"]


def groups(conn: DictConnection, name: str | None) -> list[GroupConfig]:
    return [GroupConfig.from_row(row) for row in conn.execute(
        "SELECT * FROM resource_groups WHERE %(name)s::text IS NULL OR name = %(name)s ORDER BY name", {"name": name}
    )]


def try_lock(conn: DictConnection, group: str) -> bool:
    return one(conn.execute(
        "SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS locked", (TICK_LOCK_CLASS, group)
    ))["locked"]


def unlock(conn: DictConnection, group: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (TICK_LOCK_CLASS, group))


def group_state(conn: DictConnection, group: str) -> dict[str, dict]:
    return {row["name"]: row["document"]
            for row in conn.execute("SELECT name, document FROM group_state WHERE group_name = %s", (group,))}


def save_group_state(conn: DictConnection, group: str, documents: dict[str, dict]) -> None:
    if not documents:
        return
    conn.execute(
        """INSERT INTO group_state (group_name, name, document)
           SELECT %s, d.name, d.document FROM unnest(%s::text[], %s::jsonb[]) AS d(name, document)
           ON CONFLICT (group_name, name) DO UPDATE SET document = excluded.document, updated_at = now()""",
        (group, list(documents), [Jsonb(doc) for doc in documents.values()]),
    )


def charge_usage(conn: DictConnection, group: str, usage: dict[str, float], since: datetime | None,
                 now: datetime) -> bool:
    """Write users' usage as charged for the interval since..now, only if the group's last charge
    is still `since` (no other tick charged meanwhile); returns whether it was written."""
    return one(conn.execute(
        """WITH claimed AS (
               UPDATE resource_groups SET usage_charged_at = %(now)s
               WHERE name = %(group)s AND usage_charged_at IS NOT DISTINCT FROM %(since)s
               RETURNING name),
           charged AS (
               INSERT INTO user_usage (group_name, user_name, usage)
               SELECT %(group)s, u.name, u.usage FROM unnest(%(names)s::text[], %(usage)s::float8[]) AS u(name, usage)
               WHERE EXISTS (SELECT 1 FROM claimed)
               ON CONFLICT (group_name, user_name) DO UPDATE SET usage = excluded.usage)
           SELECT count(*) > 0 AS charged FROM claimed""",
        {"group": group, "names": list(usage), "usage": list(usage.values()), "since": since, "now": now},
    ))["charged"]
