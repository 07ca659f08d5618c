"""Helpers of the tests that tick a real group: a group row, a tick as `python -m job tick` runs
it, the jobs' rows, ticking until a condition holds, and what Ray has of our submissions."""

from __future__ import annotations

import time

import requests
from psycopg.types.json import Jsonb

from job.cli.scheduler import tick_config
from job.scheduler import tick

FINAL = ("SUCCEEDED", "FAILED", "STOPPED", "CANCELLED")
ACTIVE = ("SUBMITTING", "SUBMITTED", "RUNNING")


def add_group(conn, address, name="main", users=("alice", "bob", "carol"), **options):
    columns = {"name": name, "clusters": Jsonb([{"name": "c", "address": address}]), "policy": "drf", "selector": "dispersed",
               "half_life_s": 0, **options}
    conn.execute(f"INSERT INTO resource_groups ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                 list(columns.values()))
    for user in users:
        conn.execute("INSERT INTO users (name) VALUES (%s) ON CONFLICT DO NOTHING", (user,))


def run_tick(group=None):
    """One tick with the settings of the environment, as `python -m job tick` runs it."""
    return tick.run_tick(tick_config(), group)


def jobs(conn) -> dict[int, dict]:
    return {row["id"]: row for row in conn.execute("SELECT * FROM jobs ORDER BY id")}


def all_final(rows):
    return all(row["state"] in FINAL for row in rows.values())


def tick_until(conn, done, timeout=120, group=None, seen=None):
    """Tick once a second until `done(rows)`; `seen(rows)`, if given, looks at the rows of every tick."""
    deadline = time.monotonic() + timeout
    while True:
        run_tick(group)
        rows = jobs(conn)
        if seen is not None:
            seen(rows)
        if done(rows):
            return rows
        assert time.monotonic() < deadline, {i: (r["state"], r["reason"], r["message"]) for i, r in rows.items()}
        time.sleep(1)


def wait_for(what, timeout=120):
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < deadline, f"timed out waiting for {what.__doc__ or what}"
        time.sleep(0.5)
    return found


def ray_submissions(address, conn) -> dict[int, dict[str, str]]:
    """Per job id of this database, the submission ids Ray has for it, with their status: from
    Ray's whole job history, which only a test may list."""
    prefix = conn.execute("SELECT id FROM installation").fetchone()["id"] + "-"
    found: dict[int, dict[str, str]] = {}
    for details in requests.get(f"{address}/api/jobs/", timeout=30).json():
        submission_id = details.get("submission_id") or ""
        if submission_id.startswith(prefix):
            found.setdefault(int(submission_id.split("-")[1]), {})[submission_id] = details["status"]
    return found
