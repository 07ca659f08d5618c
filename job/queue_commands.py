"""The commands on jobs: submit, cancel, jobs, show."""

from __future__ import annotations

import argparse

from job import db, queue, store
from job.errors import BadInput
from job.output import format_resources, iso, print_fields, print_json, print_table
from job.specs import json_object, pairs
from job.units import format_duration


def job_json(row: dict) -> dict:
    """A job as `--json` prints it (and as programs read it): stable keys, ISO 8601 UTC times."""
    return {
        "id": row["id"],
        "user": row["user_name"],
        "group": row["group_name"],
        "state": row["state"],
        "entrypoint": row["entrypoint"],
        "resources": row["resources"],
        "node_labels": row["node_labels"],
        "runtime_env": row["runtime_env"],
        "metadata": row["metadata"],
        "priority": row["priority"],
        "attempt": row["attempt"],
        "submission_id": row["submission_id"],
        "node": row["node"],
        "reason": row["reason"],
        "message": row["message"],
        "ray_status": row["ray_status"],
        "ray_message": row["ray_message"],
        "exit_code": row["exit_code"],
        "submitted_at": iso(row["submitted_at"]),
        "not_before": iso(row["not_before"]),
        "max_runtime_s": row["max_runtime_s"],
        "started_at": iso(row["started_at"]),
        "finished_at": iso(row["finished_at"]),
        "cancel_requested_at": iso(row["cancel_requested_at"]),
        "updated_at": iso(row["updated_at"]),
    }


def _job_id(text: str) -> int:
    if not text.isdigit() or int(text) <= 0 or int(text) >= 2**63:
        raise BadInput(f"job id: {text!r} is not a job id (a positive whole number)")
    return int(text)


def submit(args: argparse.Namespace) -> int:
    resources = pairs(args.resource, "--resource")
    for option, name in (("cpus", "CPU"), ("gpus", "GPU"), ("memory", "memory")):
        value = getattr(args, option)
        if value is not None:
            if name in resources:
                raise BadInput(f"--{option}: {name} is also given with --resource")
            resources[name] = value
    job_id = queue.submit(
        user=args.user,
        group=args.group,
        entrypoint=args.entrypoint,
        resources=resources or None,
        node_labels=pairs(args.node_label, "--node-label"),
        runtime_env=json_object(args.runtime_env, "--runtime-env") if args.runtime_env is not None else None,
        priority=args.priority if args.priority is not None else 0,
        not_before=args.not_before,
        max_runtime=args.max_runtime,
        metadata=pairs(args.metadata, "--metadata"),
    )
    if args.json:
        print_json({"id": job_id})
    else:
        print(job_id)
    return 0


def cancel(args: argparse.Namespace) -> int:
    ids = [_job_id(text) for text in args.ids]
    outcomes = queue.cancel(ids)
    status = 0
    for job_id, (before, after) in outcomes.items():
        if before is None:
            print(f"job {job_id}: does not exist")
            status = 2
        elif before == "PENDING":
            print(f"job {job_id}: cancelled")
        elif after in store.ACTIVE_STATES:
            print(f"job {job_id}: cancel requested; the next tick stops it in Ray (it is {before})")
        else:
            print(f"job {job_id}: already {before}, nothing to cancel")
    return status


def list_jobs(args: argparse.Namespace) -> int:
    states = store.require_known_states([s.strip().upper() for s in args.state.split(",")]) if args.state else None
    if not args.limit.isdigit() or int(args.limit) <= 0:
        raise BadInput(f"--limit: {args.limit!r} is not a positive whole number")
    with db.session() as conn:
        rows = store.list_jobs(conn, user=args.user, group=args.group, states=states, limit=int(args.limit))
    if args.json:
        print_json([job_json(row) for row in rows])
        return 0
    print_table(
        [{**row, "user": row["user_name"], "group": row["group_name"], "resources": format_resources(row["resources"]),
          "why": _why(row)} for row in rows],
        ["id", "user", "group", "state", "resources", "priority", "attempt", "node", "submitted_at", "why"],
    )
    return 0


def _why(row: dict) -> str:
    if row["reason"] is None:
        return "-"
    return f"{row['reason']}: {row['message']}" if row["message"] else row["reason"]


def show(args: argparse.Namespace) -> int:
    with db.session() as conn:
        row = store.get_job(conn, _job_id(args.id))
    job = job_json(row)
    if args.json:
        print_json(job)
        return 0
    job["resources"] = format_resources(row["resources"])
    if row["max_runtime_s"] is not None:
        job["max_runtime_s"] = format_duration(row["max_runtime_s"])
    job["why"] = _why(row)
    print_fields(job)
    return 0
