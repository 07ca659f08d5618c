"""The demo's scenario: the scheduler on this machine, start to finish, in about two minutes.

An embedded PostgreSQL (or the given database) and a local Ray cluster of a head and two workers
(or the given Ray address), a fair-share group, three users with different shares and a dozen
short jobs; then ticks until every job has finished. Everything it started is stopped on the way
out, Ctrl-C included. `python -m job demo` runs it and prints what each user got."""

from __future__ import annotations

import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from job import api, log
from job.core import states
from job.core.job import Job
from job.core.specs import ClusterSpec, GroupSpec, UserSpec
from job.scheduler.config import TickConfig
from job.scheduler.tick import run_tick
from job.store import groups, jobs, users
from job.store.connection import connect, session
from job.store.migrations import migrate

GROUP = "demo"
USERS = {"alice": 2.0, "bob": 1.0, "carol": 1.0}
TICK_EVERY_S = 2.0
DEADLINE_S = 240.0


def _database(stack: ExitStack, url: str | None) -> str:
    if url:
        return url
    from job.devtools.local_postgres import start_embedded

    directory = Path(tempfile.mkdtemp(prefix="jobdemo-pg")) / "data"
    url, server = start_embedded(directory)
    stack.callback(server.cleanup)
    log.event("demo_postgres", mode="embedded", directory=str(directory))
    return url


def _ray(stack: ExitStack, address: str | None) -> str:
    if address:
        return address
    from job.devtools.local_ray import LocalRayCluster, NodeSpec

    cluster = LocalRayCluster(
        head=NodeSpec(cpus=1, labels={"role": "head"}),
        workers=[NodeSpec(cpus=2, labels={"pool": "a"}), NodeSpec(cpus=2, labels={"pool": "b"})],
    )
    stack.callback(cluster.stop)
    log.event("demo_ray_starting", nodes=3)
    return cluster.start()


def run(job_count: int, database_url: str | None, ray_address: str | None, submit_concurrency: int,
        ray_timeout_s: float) -> tuple[list[dict], float] | None:
    """Runs the demo; returns a row per user of what it got and the seconds it took, or None when
    the jobs did not all finish in time."""
    with ExitStack() as stack:
        url = _database(stack, database_url)
        with connect(url, autocommit=True) as conn:
            migrate(conn)
        address = _ray(stack, ray_address)
        _setup(url, address)
        ids = _submit_jobs(url, job_count)
        config = TickConfig(database_url=url, submit_concurrency=submit_concurrency, ray_timeout_s=ray_timeout_s)
        started = time.monotonic()
        while True:
            run_tick(config, GROUP)
            with session(url) as conn:
                rows = jobs.list_jobs(conn, user=None, group=GROUP, states=None, limit=len(ids))
            unfinished = sum(job.state not in states.FINISHED for job in rows)
            if not unfinished:
                return _per_user(rows), time.monotonic() - started
            if time.monotonic() - started > DEADLINE_S:
                log.error("demo_timeout", seconds=DEADLINE_S, unfinished=unfinished)
                return None
            time.sleep(TICK_EVERY_S)


def _setup(url: str, address: str) -> None:
    with session(url) as conn:
        if groups.groups(conn, GROUP):
            groups.update_group(conn, GroupSpec(name=GROUP, clusters=[ClusterSpec.model_validate(address)], policy="fairshare",
                                               selector="dispersed", half_life_s=60))
        else:
            groups.insert_group(conn, GroupSpec(name=GROUP, clusters=[ClusterSpec.model_validate(address)], policy="fairshare",
                                               selector="dispersed", half_life_s=60))
        for name, shares in USERS.items():
            users.upsert_user(conn, UserSpec(name=name, shares=shares))
    log.event("demo_group", group=GROUP, cluster=address, policy="fairshare", selector="dispersed",
              shares=",".join(f"{name}={shares:g}" for name, shares in USERS.items()))


def _submit_jobs(url: str, count: int) -> list[int]:
    # Everyone queues the same work at once; alice has twice the shares, so while all three wait
    # she gets about half of the CPUs and bob and carol a quarter each: her jobs wait less.
    names = list(USERS)
    ids = []
    for index in range(count):
        user = names[index % len(names)]
        seconds = 3 + index % 3
        ids.append(api.submit(user=user, group=GROUP, entrypoint=f"sleep {seconds} && echo {user} job {index} done",
                                resources={"CPU": 1}, database_url=url))
    log.event("demo_submitted", jobs=count, users=len(names))
    return ids


def _per_user(found: list[Job]) -> list[dict]:
    """Per user: jobs, CPU-seconds received and their share of the total, mean wait."""
    per_user: dict[str, dict] = {}
    for job in found:
        user = per_user.setdefault(job.user_name, {"user": job.user_name, "shares": USERS.get(job.user_name),
                                                   "jobs": 0, "succeeded": 0, "cpu_seconds": 0.0, "waits": []})
        user["jobs"] += 1
        user["succeeded"] += job.state == states.SUCCEEDED
        if job.started_at and job.finished_at:
            user["cpu_seconds"] += job.resources.get("CPU", 0) * (job.finished_at - job.started_at).total_seconds()
            user["waits"].append((job.started_at - job.submitted_at).total_seconds())
    total = sum(user["cpu_seconds"] for user in per_user.values()) or 1.0
    for user in per_user.values():
        waits = user.pop("waits")
        user["share"] = f"{user['cpu_seconds'] / total:.0%}"
        user["cpu_seconds"] = round(user["cpu_seconds"], 1)
        user["mean_wait_s"] = round(sum(waits) / len(waits), 1) if waits else None
    return sorted(per_user.values(), key=lambda u: u["user"])
