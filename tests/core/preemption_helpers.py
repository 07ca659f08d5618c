"""Helpers for the preemption tests: the classes they use, times before NOW, random snapshots of a
group that preempts, and the check that fair-share reclaim never ping-pongs."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import strategies as st
from planner_helpers import NOW

from job.core.planner import Snapshot, plan

CLASSES = [{"name": "low", "value": 0}, {"name": "mid", "value": 5},
           {"name": "high", "value": 10}, {"name": "pinned", "value": 1, "preemptible": False}]
USERS = ["ann", "bob", "cy"]
CLASS_NAMES = [c["name"] for c in CLASSES]


def ago(minutes: float) -> str:
    return (NOW - timedelta(minutes=minutes)).isoformat()


@st.composite
def preempting_snapshots(draw, mode=None):
    nodes = {f"n{i}": {"CPU": draw(st.sampled_from([1, 2, 4])), "GPU": draw(st.sampled_from([0, 0, 1]))}
             for i in range(draw(st.integers(1, 3)))}
    running = []
    for i in range(draw(st.integers(0, 8))):
        running.append({"id": f"r{i}", "user": draw(st.sampled_from(USERS)), "node": draw(st.sampled_from(sorted(nodes))),
                        "resources": {"CPU": draw(st.sampled_from([0.5, 1, 2]))}, "class": draw(st.sampled_from(CLASS_NAMES)),
                        "started_at": draw(st.sampled_from([None, ago(1), ago(9), ago(10), ago(30), ago(120)])),
                        "stopping": draw(st.sampled_from([False, False, True]))})
    pending = [{"id": f"p{i}", "user": draw(st.sampled_from(USERS)),
                "resources": draw(st.sampled_from([{"CPU": 1}, {"CPU": 2}, {"CPU": 4}, {"CPU": 1, "GPU": 1}, {"CPU": 8}])),
                "class": draw(st.sampled_from(CLASS_NAMES)), "submitted_at": ago(draw(st.integers(0, 50)))}
               for i in range(draw(st.integers(0, 6)))]
    return {
        "group": {"policy": draw(st.sampled_from(["fifo", "lifo", "drf", "fairshare"])), "half_life_s": 3600,
                  "selector": draw(st.sampled_from(["legacy", "concentrated", "dispersed", "roundrobin"])),
                  "preemption": mode or draw(st.sampled_from(["priority", "fairshare"])),
                  "priority_classes": CLASSES, "default_class": "low", "min_runtime_s": 600,
                  "max_preemptions": draw(st.integers(0, 4))},
        "now": NOW.isoformat(),
        "nodes": [{"id": ident, "resources": resources} for ident, resources in nodes.items()],
        "running": running,
        "pending": pending,
        "users": {user: {"shares": draw(st.sampled_from([1, 2])), "usage": draw(st.sampled_from([0, 900]))} for user in USERS},
    }


def check_reclaim_never_ping_pongs(document: dict) -> None:
    """Carry out a plan's preemptions (victims back to pending, the preempting jobs running on
    their nodes), then plan again with no minimum run time: a job stopped by a reclaim within its
    class never stops, in turn, the job it was stopped for. (A job stopped for a higher class may
    well reclaim from another job of its own class: that is fair share, not a ping-pong.)"""
    document["group"]["min_runtime_s"] = 0
    for job in document["running"]:
        job["started_at"] = job["started_at"] or ago(1)
        job["stopping"] = False
    first = plan(Snapshot.model_validate(document)).document()
    if not first["preemptions"]:
        return
    running = {job["id"]: job for job in document["running"]}
    pending = {job["id"]: job for job in document["pending"]}
    stopped = {v for p in first["preemptions"] for v in p["victims"]}
    stopped_by = {v: p["job"] for p in first["preemptions"] for v in p["victims"]
                  if running[v]["class"] == pending[p["job"]]["class"]}
    placed = {p["job"]: p["node"] for p in first["placements"]}
    placed.update({p["job"]: p["node"] for p in first["preemptions"]})
    document["running"] = [job for job in document["running"] if job["id"] not in stopped] + [
        {"id": ident, "user": pending[ident]["user"], "node": node, "resources": pending[ident]["resources"],
         "class": pending[ident]["class"], "started_at": NOW.isoformat()} for ident, node in placed.items()]
    document["pending"] = [{k: v for k, v in running[ident].items() if k in ("id", "user", "resources", "class")}
                           for ident in sorted(stopped)]
    second = plan(Snapshot.model_validate(document)).document()
    for preemption in second["preemptions"]:
        assert stopped_by.get(preemption["job"]) not in preemption["victims"]
