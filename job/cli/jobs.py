"""The commands on jobs: submit, cancel, jobs, show."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from job.cli.output import format_footprint, format_resources, iso, print_fields, print_json, print_table
from job.cli.parsing import bundles, command, database, job_id, json_object, pairs, positive_number
from job.core import states
from job.core.errors import BadInput, PermissionDenied
from job.core.job_row import row_problem
from job.core.units import format_duration, time_of_day
from job.store import jobs as job_rows


def register(sub) -> None:
    p = command(sub, "submit", submit, json_output=True)
    p.add_argument("--user", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--entrypoint", required=True, help="the shell command Ray runs")
    p.add_argument("--cpus", help="CPUs (default 1 when no resource is given)")
    p.add_argument("--gpus")
    p.add_argument("--memory", help="memory, e.g. 512MiB or 4GiB")
    p.add_argument("--resource", action="append", metavar="NAME=AMOUNT", help="any Ray resource (repeatable)")
    p.add_argument("--node-label", action="append", metavar="K=V", help="run only on nodes with this label (repeatable)")
    p.add_argument("--runtime-env", metavar="JSON|@FILE", help="Ray runtime_env, as JSON or @file")
    p.add_argument("--priority", help="higher goes first within the user's jobs")
    p.add_argument("--class", dest="priority_class", metavar="NAME",
                   help="a priority class of the group (default: the group's default class)")
    p.add_argument("--not-before", metavar="TIME", help="do not start before this time (ISO 8601)")
    p.add_argument("--max-runtime", metavar="DURATION", help="stop the job after this long, e.g. 2h")
    p.add_argument("--metadata", action="append", metavar="K=V", help="passed to Ray as job metadata (repeatable)")
    p.add_argument("--bundle", action="append", metavar="[Nx]NAME=AMOUNT,...",
                   help="what its work needs beside the driver, e.g. 4xGPU=1,CPU=8 (four bundles; repeatable)")
    p.add_argument("--bundle-strategy", metavar="STRATEGY",
                   help="how its bundles are spread: PACK (default), SPREAD, STRICT_PACK or STRICT_SPREAD")

    p = command(sub, "cancel", cancel)
    p.add_argument("ids", nargs="+", metavar="ID")

    p = command(sub, "jobs", list_jobs, json_output=True)
    p.add_argument("--user")
    p.add_argument("--group")
    p.add_argument("--state", help="e.g. PENDING, RUNNING (comma-separated for several)")
    p.add_argument("--limit", default="50")

    p = command(sub, "show", show, json_output=True)
    p.add_argument("id", metavar="ID")


def job_json(row: dict) -> dict:
    """A job as `--json` prints it (and as programs read it): stable keys, ISO 8601 UTC times."""
    return {
        "id": row["id"],
        "user": row["user_name"],
        "group": row["group_name"],
        "state": row["state"],
        "entrypoint": row["entrypoint"],
        "resources": row["resources"],
        # Its work beside the driver, and the node planned for each bundle once placed (else None).
        "bundles": row["bundles"],
        "bundle_strategy": row["bundle_strategy"],
        "bundle_nodes": row["bundle_nodes"],
        "node_labels": row["node_labels"],
        "runtime_env": row["runtime_env"],
        "metadata": row["metadata"],
        "priority": row["priority"],
        # None: the group's default class.
        "class": row["priority_class"],
        "attempt": row["attempt"],
        "preemptions": row["preemptions"],
        "submission_id": row["submission_id"],
        "node": row["node"],
        "reason": row["reason"],
        "message": row["message"],
        "ray_status": row["ray_status"],
        "ray_message": row["ray_message"],
        "exit_code": row["exit_code"],
        "submitted_at": iso(row["submitted_at"]),
        # When a tick placed the current attempt (its intent), and when Ray took its submission.
        "placed_at": iso(row["placed_at"]),
        "accepted_at": iso(row["accepted_at"]),
        "not_before": iso(row["not_before"]),
        "max_runtime_s": row["max_runtime_s"],
        "started_at": iso(row["started_at"]),
        "finished_at": iso(row["finished_at"]),
        "cancel_requested_at": iso(row["cancel_requested_at"]),
        "updated_at": iso(row["updated_at"]),
        # Pending jobs' place in plan order and estimated start, as the last tick worked them out
        # (None past the first 1,000 in line, or before the first tick; the basis says why none).
        **dict(zip(("position", "estimated_start_at", "estimate_basis"), _estimate(row))),
        # A pending job's reservation (None: it holds none): why it holds it (`preemption`, `head`),
        # its nodes (its driver's first) and when it is expected to start there (None: not known).
        "reservation": _reservation(row),
        "expected_start": iso(_reserved_start(row)),
        # Only for a row written past the CLI with a value no command writes.
        **({"problem": problem} if (problem := row_problem(row)) else {}),
    }


def _after(since: datetime | None, moment: datetime | None) -> str | None:
    """How long after `since` a moment came, e.g. `+0.31s`: where a job's time went before it ran."""
    if since is None or moment is None:
        return None
    return f"+{max(0.0, (moment - since).total_seconds()):.2f}s"


def timeline(row: dict, running_seen: datetime | None) -> str | None:
    """A job's way to Ray, each step after the one before: `placed +0.31s, in Ray +0.05s,
    running +0.80s` (running: when a tick saw it run, within a poll of it). None before placed."""
    steps = [("placed", row["placed_at"]), ("in Ray", row["accepted_at"]), ("running", running_seen)]
    said, last = [], row["submitted_at"]
    for name, moment in steps:
        if moment is None:
            break
        said.append(f"{name} {_after(last, moment)}")
        last = moment
    return ", ".join(said) or None


def _reserved(row: dict) -> bool:
    return row["state"] == states.PENDING and row["reserved_node"] is not None


def _reservation(row: dict) -> dict | None:
    if not _reserved(row):
        return None
    nodes = [row["reserved_node"], *(row["reserved_bundle_nodes"] or ())]
    return {"kind": row["reserved_kind"] or "preemption", "nodes": list(dict.fromkeys(nodes))}


def _reserved_start(row: dict) -> datetime | None:
    return row["reserved_start"] if _reserved(row) else None


def _estimate(row: dict) -> tuple:
    """What the last tick stored, for a job still pending: a job that left PENDING by a cancel or a
    failure keeps its columns, not its place in line."""
    if row["state"] != states.PENDING:
        return None, None, None
    return row["queue_position"], iso(row["estimated_start_at"]), row["estimate_basis"]


def _est_start(row: dict, now: datetime) -> str:
    """A reserved job's expected start is its reservation's; another's, the forecast's."""
    if _reserved(row):
        start = row["reserved_start"]
        return "unknown" if start is None else time_of_day(max(start, now), now)
    if row["state"] != states.PENDING or row["estimate_basis"] is None:
        return "-"
    return "unknown" if row["estimated_start_at"] is None else time_of_day(row["estimated_start_at"], now)


def submit(args: argparse.Namespace) -> int:
    resources = pairs(args.resource, "--resource")
    for option, name in (("cpus", "CPU"), ("gpus", "GPU"), ("memory", "memory")):
        value = getattr(args, option)
        if value is not None:
            if name in resources:
                raise BadInput(f"--{option}: {name} is also given with --resource")
            resources[name] = value
    # Imported here: a submit's validation (pydantic's models) is not every command's start.
    from job import api

    new_id = api.submit(
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
        priority_class=args.priority_class,
        bundles=bundles(args.bundle, "--bundle"),
        bundle_strategy=args.bundle_strategy,
    )
    if args.json:
        print_json({"id": new_id})
    else:
        print(new_id)
    return 0


def cancel(args: argparse.Namespace) -> int:
    from job import api

    ids = [job_id(text) for text in args.ids]
    with database() as conn:
        outcomes = api.cancel(ids, conn=conn)
        # A submitter sees only its own jobs: another user's job is not found either.
        own = job_rows.own_jobs_only(conn) if any(before is None for before, _ in outcomes.values()) else None
    status = 0
    for ident, (before, after) in outcomes.items():
        if before is None:
            print(f"job {ident}: does not exist" + (f" or is not yours ({job_rows.only_own(own)})" if own else ""))
            status = 2
        elif before == states.PENDING:
            print(f"job {ident}: cancelled")
        elif after in states.ACTIVE:
            print(f"job {ident}: cancel requested; the next tick stops it in Ray (it is {before})")
        else:
            print(f"job {ident}: already {before}, nothing to cancel")
    return status


def list_jobs(args: argparse.Namespace) -> int:
    wanted = states.known_states([s.strip().upper() for s in args.state.split(",")]) if args.state else None
    limit = positive_number(args.limit, "--limit")
    with database() as conn:
        if args.user is not None:
            own = job_rows.own_jobs_only(conn)
            if own is not None and args.user != own:
                raise PermissionDenied(f"--user: {job_rows.only_own(own)}")
        rows = job_rows.list_jobs(conn, user=args.user, group=args.group, states=wanted, limit=limit)
    if args.json:
        print_json([job_json(row) for row in rows])
        return 0
    now = datetime.now(timezone.utc)
    problems = {row["id"]: row_problem(row) for row in rows}
    print_table(
        [{**row, "user": row["user_name"], "group": row["group_name"],
          "resources": "?" if problems[row["id"]] else format_footprint(row),
          "class": row["priority_class"] or "-", "why": _why(row, problems[row["id"]]), "pos": _estimate(row)[0],
          "reserved": (_reservation(row) or {}).get("nodes"), "est_start": _est_start(row, now),
          "placed": _after(row["submitted_at"], row["placed_at"]),
          "in_ray": _after(row["submitted_at"], row["accepted_at"])} for row in rows],
        ["id", "user", "group", "state", "class", "resources", "priority", "attempt", "node", "reserved", "submitted_at",
         "placed", "in_ray", "pos", "est_start", "why"],
    )
    return 0


def _observed(record: dict) -> dict[str, str]:
    """Declared and used side by side, with what Ray says the use is, as the last tick that saw
    the job run observed it (core/observed.py `record`)."""
    nodes = "; ".join(f"{format_resources(held)} on node {node}" for node, held in record["nodes"].items())
    counts = [(record["placement_groups"], "placement group"), (record["actors"], "actor"), (record["tasks"], "task")]
    return {"declared": format_resources(record["declared"]),
            "used": format_resources(record["used"]) + (f" ({nodes})" if nodes else ""),
            "charged": format_resources(record["charged"]),
            "in ray": ", ".join(f"{count} {noun}{'' if count == 1 else 's'}" for count, noun in counts),
            # Stored as Python's isoformat: shown as every other time of `show`.
            **({"over since": iso(datetime.fromisoformat(record["over_since"]))} if record["over_since"] else {})}


def _why(row: dict, problem: str | None = None) -> str:
    if problem:
        return f"invalid row: {problem}"
    if row["reason"] is None:
        return "-"
    return f"{row['reason']}: {row['message']}" if row["message"] else row["reason"]


def show(args: argparse.Namespace) -> int:
    with database() as conn:
        row = job_rows.get_job(conn, job_id(args.id))
        running_seen = job_rows.running_seen(conn, row)
    job = job_json(row)
    if args.json or "problem" in job:
        # A malformed row as it is stored, with what is wrong with it: nothing of it to format.
        (print_json if args.json else print_fields)({**job, "observed": row["observed"]})
        return 0
    job["resources"] = format_resources(row["resources"])
    # Each bundle with its planned node beside it, once placed.
    nodes = row["bundle_nodes"] or [None] * len(row["bundles"] or ())
    job["bundles"] = "; ".join(format_resources(bundle) + (f" on {node}" if node else "")
                               for bundle, node in zip(row["bundles"] or (), nodes)) or "-"
    del job["bundle_nodes"]
    if row["observed"] is not None:
        job.update(_observed(row["observed"]))
    if row["max_runtime_s"] is not None:
        job["max_runtime_s"] = format_duration(row["max_runtime_s"])
    job["why"] = _why(row)
    job["after submit"] = timeline(row, running_seen) or "-"
    del job["position"], job["estimated_start_at"], job["estimate_basis"], job["reservation"], job["expected_start"]
    if _reserved(row):
        job["reserved"] = _reserved_words(row)
    if row["state"] == states.PENDING and row["estimate_basis"] is not None:
        job["position"] = row["queue_position"]
        start = row["estimated_start_at"]
        job["estimated start"] = (row["estimate_basis"] if start is None else
                                  f"about {time_of_day(start, datetime.now(timezone.utc))}, {row['estimate_basis']}")
    print_fields(job)
    return 0


def _reserved_words(row: dict) -> str:
    """A reservation as `show` says it: `node n-3 (first in line), expected to start about 14:20 UTC`."""
    held = _reservation(row)
    why = "first in line" if held["kind"] == "head" else "it preempted there"
    nodes = f"node{'s' if len(held['nodes']) > 1 else ''} {', '.join(held['nodes'])} ({why})"
    if held["kind"] != "head":
        return f"{nodes}, to start once its victims have stopped"
    start = row["reserved_start"]
    now = datetime.now(timezone.utc)
    return f"{nodes}, expected to start " + ("at a time not known" if start is None else f"about {time_of_day(max(start, now), now)}")
