"""`python -m job demo`: the scheduler on this machine, start to finish, in about two minutes.

An embedded PostgreSQL (or JOB_DATABASE_URL) and a local Ray cluster of a head and two workers (or
RAY_ADDRESS), a fair-share group, three users with different shares and a dozen short jobs; then
ticks until every job has finished, and a table of what each user got. Everything it started is
stopped on the way out, Ctrl-C included."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from job import db, log, queue, store
from job.errors import BadInput
from job.migrate import migrate
from job.output import print_table
from job.settings import settings
from job.specs import GroupSpec, UserSpec
from job.tick import run_tick

GROUP = "demo"
USERS = {"alice": 2.0, "bob": 1.0, "carol": 1.0}
TICK_EVERY_S = 2.0
DEADLINE_S = 240.0


def _database(stack: ExitStack) -> str:
    url = settings().database_url
    if url:
        return url
    from job.local_postgres import start_embedded

    directory = Path(tempfile.mkdtemp(prefix="jobdemo-pg")) / "data"
    url, server = start_embedded(directory)
    stack.callback(server.cleanup)
    log.event("demo_postgres", mode="embedded", directory=str(directory))
    return url


def _ray(stack: ExitStack) -> str:
    address = os.environ.get("RAY_ADDRESS")
    if address:
        return address
    from job.local_ray import NodeSpec, LocalRayCluster

    cluster = LocalRayCluster(
        head=NodeSpec(cpus=1, labels={"role": "head"}),
        workers=[NodeSpec(cpus=2, labels={"pool": "a"}), NodeSpec(cpus=2, labels={"pool": "b"})],
    )
    stack.callback(cluster.stop)
    log.event("demo_ray_starting", nodes=3)
    return cluster.start()


def command(args: argparse.Namespace) -> int:
    if not args.jobs.isdigit() or not 1 <= int(args.jobs) <= 200:
        raise BadInput(f"--jobs: {args.jobs!r} is not a whole number from 1 to 200")
    with ExitStack() as stack:
        url = _database(stack)
        os.environ["JOB_DATABASE_URL"] = url
        settings.cache_clear()
        with db.connect(url, autocommit=True) as conn:
            migrate(conn)
        address = _ray(stack)
        _setup(url, address)
        ids = _submit_jobs(url, int(args.jobs))
        started = time.monotonic()
        while True:
            run_tick(GROUP)
            with db.session(url) as conn:
                rows = store.list_jobs(conn, user=None, group=GROUP, states=None, limit=len(ids))
            if all(row["state"] in store.FINISHED_STATES for row in rows):
                break
            if time.monotonic() - started > DEADLINE_S:
                log.error("demo_timeout", seconds=DEADLINE_S, unfinished=sum(row["state"] not in store.FINISHED_STATES for row in rows))
                return 1
            time.sleep(TICK_EVERY_S)
        _report(rows, time.monotonic() - started)
    return 0


def _setup(url: str, address: str) -> None:
    with db.session(url) as conn:
        if conn.execute("SELECT 1 FROM resource_groups WHERE name = %s", (GROUP,)).fetchone():
            store.update_group(conn, GroupSpec(name=GROUP, ray_address=address, policy="fairshare",
                                               selector="dispersed", half_life_s=60))
        else:
            store.insert_group(conn, GroupSpec(name=GROUP, ray_address=address, policy="fairshare",
                                               selector="dispersed", half_life_s=60))
        for name, shares in USERS.items():
            store.upsert_user(conn, UserSpec(name=name, shares=shares))
    log.event("demo_group", group=GROUP, ray_address=address, policy="fairshare", selector="dispersed",
              shares=",".join(f"{name}={shares:g}" for name, shares in USERS.items()))


def _submit_jobs(url: str, count: int) -> list[int]:
    # Everyone queues the same work at once; alice has twice the shares, so while all three wait
    # she gets about half of the CPUs and bob and carol a quarter each: her jobs wait less.
    users = list(USERS)
    ids = []
    for index in range(count):
        user = users[index % len(users)]
        seconds = 3 + index % 3
        ids.append(queue.submit(user=user, group=GROUP, entrypoint=f"sleep {seconds} && echo {user} job {index} done",
                                resources={"CPU": 1}, database_url=url))
    log.event("demo_submitted", jobs=count, users=len(users))
    return ids


def _report(rows: list[dict], elapsed_s: float) -> None:
    per_user: dict[str, dict] = {}
    for row in rows:
        user = per_user.setdefault(row["user_name"], {"user": row["user_name"], "shares": USERS.get(row["user_name"]),
                                                      "jobs": 0, "succeeded": 0, "cpu_seconds": 0.0, "waits": []})
        user["jobs"] += 1
        user["succeeded"] += row["state"] == "SUCCEEDED"
        if row["started_at"] and row["finished_at"]:
            user["cpu_seconds"] += row["resources"].get("CPU", 0) * (row["finished_at"] - row["started_at"]).total_seconds()
            user["waits"].append((row["started_at"] - row["submitted_at"]).total_seconds())
    total = sum(user["cpu_seconds"] for user in per_user.values()) or 1.0
    for user in per_user.values():
        user["share"] = f"{user['cpu_seconds'] / total:.0%}"
        user["cpu_seconds"] = round(user["cpu_seconds"], 1)
        user["mean_wait_s"] = round(sum(user["waits"]) / len(user["waits"]), 1) if user["waits"] else None
    print(f"\nAll {len(rows)} jobs finished in {elapsed_s:.0f} s.\n")
    print_table(sorted(per_user.values(), key=lambda u: u["user"]), ["user", "shares", "jobs", "succeeded", "cpu_seconds", "share", "mean_wait_s"])
