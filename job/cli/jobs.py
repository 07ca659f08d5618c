"""The commands on jobs: submit, cancel, jobs, show."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from job.cli.output import format_footprint, format_resources, iso, print_fields, print_json, print_table
from job.cli.parsing import bundles, command, database, job_id, json_object, pairs, positive_number
from job.core import arrays, dependencies, states
from job.core.errors import BadInput, PermissionDenied
from job.core.job import REQUIRED, SHOWN, SUBMITTED, Job, JobField
from job.core.job_row import row_problem
from job.core.units import format_duration, time_of_day
from job.store import jobs as job_rows

# `--resource`'s shortcuts, before it: option, resource name, help.
_BUILTIN_RESOURCES = (("--cpus", "CPU", "CPUs (default 1 when no resource is given)"), ("--gpus", "GPU", None),
                      ("--memory", "memory", "memory, e.g. 512MiB or 4GiB"))


def _option(field: JobField) -> tuple[str, str]:
    """A submitted field's `submit` option and its dest, the field's name in JobSpec: every field
    of SUBMITTED has both, which JobField's type, the table's for every field, cannot say."""
    assert field.option is not None and field.spec is not None, field
    return field.option, field.spec


def _given(args: argparse.Namespace, field: JobField) -> tuple[Any, str]:
    """What argparse read of a submitted field's option, and the option."""
    option, dest = _option(field)
    return getattr(args, dest), option


def _resources(args: argparse.Namespace, field: JobField) -> dict[str, str] | None:
    resources = pairs(*_given(args, field))
    for option, name, _ in _BUILTIN_RESOURCES:
        value = getattr(args, option[2:])
        if value is not None:
            if name in resources:
                raise BadInput(f"{option}: {name} is also given with --resource")
            resources[name] = value
    return resources or None


def _json(args: argparse.Namespace, field: JobField) -> dict | None:
    text, option = _given(args, field)
    return None if text is None else json_object(text, option)


# How a submit option's text becomes job.api.submit's keyword (core/job.py JobField.read); the
# repeatable ones are given as lists.
READS: dict[str, Callable[[argparse.Namespace, JobField], Any]] = {
    "text": lambda args, field: _given(args, field)[0],
    "pairs": lambda args, field: pairs(*_given(args, field)),
    "json": _json,
    "bundles": lambda args, field: bundles(*_given(args, field)),
    "resources": _resources,
    "list": lambda args, field: [word for text in _given(args, field)[0] or () for word in text.split(",")] or None,
}
_REPEATED = ("pairs", "bundles", "resources", "list")


def add_submit_options(parser: argparse.ArgumentParser) -> None:
    """A job's options, from the field table: `submit`'s, and `schedule add`'s template."""
    for field in SUBMITTED:
        if field.read == "resources":
            for option, _, help in _BUILTIN_RESOURCES:
                parser.add_argument(option, help=help)
        option, dest = _option(field)
        parser.add_argument(option, dest=dest, action="append" if field.read in _REPEATED else "store",
                            metavar=field.metavar, help=field.help, required=field.default is REQUIRED)


def submit_options(args: argparse.Namespace) -> dict[str, Any]:
    """job.api.submit's keywords from the options of add_submit_options."""
    return {field.api_keyword: READS[field.read](args, field) for field in SUBMITTED}


def register(sub) -> None:
    p = command(sub, "submit", submit, json_output=True)
    add_submit_options(p)
    p.add_argument(arrays.OPTION, metavar="SPEC", help=arrays.HELP)

    p = command(sub, "cancel", cancel)
    p.add_argument("ids", nargs="+", metavar="ID", help="a job's id, or an array's: its tasks not ended")

    p = command(sub, "jobs", list_jobs, json_output=True)
    p.add_argument("--user")
    p.add_argument("--group")
    p.add_argument("--state", help="e.g. PENDING, RUNNING (comma-separated for several)")
    p.add_argument("--limit", default="50")
    p.add_argument("--array", metavar="ID", help="the tasks of this array, in index order (else an array is one line)")

    p = command(sub, "show", show, json_output=True)
    p.add_argument("id", metavar="ID")


def job_json(job: Job) -> dict:
    """A job as `--json` prints it (and as programs read it): stable keys, ISO 8601 UTC times."""
    return {
        **{field.shown: _shown(field, getattr(job, field.column)) for field in SHOWN},
        # Pending jobs' place in plan order and estimated start, as the last tick worked them out
        # (None past the first 1,000 in line, or before the first tick; the basis says why none).
        **dict(zip(("position", "estimated_start_at", "estimate_basis"), _estimate(job), strict=True)),
        # A pending job's reservation (None: it holds none): why it holds it (`preemption`, `head`),
        # its nodes (its driver's first) and when it is expected to start there (None: not known).
        "reservation": _reservation(job),
        "expected_start": iso(_reserved_start(job)),
        # Only for a row written past the CLI with a value no command writes.
        **({"problem": problem} if (problem := row_problem(job)) else {}),
    }


def _shown(field: JobField, value: Any) -> Any:
    return iso(value) if field.is_time else value


def _after(since: datetime | None, moment: datetime | None) -> str | None:
    """How long after `since` a moment came, e.g. `+0.31s`: where a job's time went before it ran."""
    if since is None or moment is None:
        return None
    return f"+{max(0.0, (moment - since).total_seconds()):.2f}s"


def timeline(job: Job, running_seen: datetime | None) -> str | None:
    """A job's way to Ray, each step after the one before: `placed +0.31s, in Ray +0.05s,
    running +0.80s` (running: when a tick saw it run, within a poll of it). None before placed."""
    steps = [("placed", job.placed_at), ("in Ray", job.accepted_at), ("running", running_seen)]
    said, last = [], job.submitted_at
    for name, moment in steps:
        if moment is None:
            break
        said.append(f"{name} {_after(last, moment)}")
        last = moment
    return ", ".join(said) or None


def _reserved(job: Job) -> bool:
    return job.state == states.PENDING and job.reserved_node is not None


def _reservation(job: Job) -> dict | None:
    if not _reserved(job):
        return None
    nodes = [job.reserved_node, *(job.reserved_bundle_nodes or ())]
    return {"kind": job.reserved_kind or "preemption", "nodes": list(dict.fromkeys(nodes))}


def _reserved_start(job: Job) -> datetime | None:
    return job.reserved_start if _reserved(job) else None


def _estimate(job: Job) -> tuple:
    """What the last tick stored, for a job still pending: a job that left PENDING by a cancel or a
    failure keeps its columns, not its place in line."""
    if job.state != states.PENDING:
        return None, None, None
    return job.queue_position, iso(job.estimated_start_at), job.estimate_basis


def _est_start(job: Job, now: datetime) -> str:
    """A reserved job's expected start is its reservation's; another's, the forecast's."""
    if _reserved(job):
        start = job.reserved_start
        return "unknown" if start is None else time_of_day(max(start, now), now)
    if job.state != states.PENDING or job.estimate_basis is None:
        return "-"
    return "unknown" if job.estimated_start_at is None else time_of_day(job.estimated_start_at, now)


def submit(args: argparse.Namespace) -> int:
    options = submit_options(args)
    # Imported here: a submit's validation (pydantic's models) is not every command's start.
    from job import api

    spec = None if args.array is None else arrays.parse_array(args.array)
    new_id = api.submit(**options, **({} if spec is None else {arrays.KEYWORD: args.array}))
    if args.json:
        print_json({"id": new_id, **({} if spec is None else {"array": {"id": new_id, "spec": str(spec),
                                                                       "tasks": len(spec.indexes)}})})
        return 0
    if spec is not None:
        print(f"array {spec}: {len(spec.indexes)} task{'s' if len(spec.indexes) > 1 else ''}, ids from {new_id}")
    # Last: what a script reads (`| tail -1`), the array's id for an array.
    print(new_id)
    return 0


def cancel(args: argparse.Namespace) -> int:
    from job import api

    ids = list(dict.fromkeys(job_id(text) for text in args.ids))
    with database() as conn:
        tasks = job_rows.array_tasks(conn, ids)
        outcomes = api.cancel(ids, conn=conn)
        # A submitter sees only its own jobs: another user's job is not found either.
        own = job_rows.own_jobs_only(conn) if any(before is None for before, _ in outcomes.values()) else None
    # Each job said once: a task of an array given is counted in the array's line.
    counted = {task for array, found in tasks.items() for task in found if task != array}
    status = 0
    for ident in (ident for ident in ids if ident not in counted):
        before, after = outcomes[ident]
        if ident in tasks:
            print(f"array {ident}: " + _cancelled([outcomes[task] for task in tasks[ident]]))
        elif before is None:
            print(f"job {ident}: does not exist" + (f" or is not yours ({job_rows.only_own(own)})" if own else ""))
            status = 2
        elif before == states.PENDING:
            print(f"job {ident}: cancelled")
        elif after in states.ACTIVE:
            print(f"job {ident}: cancel requested; the next tick stops it in Ray (it is {before})")
        else:
            print(f"job {ident}: already {before}, nothing to cancel")
    return status


def _cancelled(outcomes: list[tuple[str | None, str | None]]) -> str:
    """An array's cancel in one line: `3 cancelled, 2 cancel requested (the next tick stops them in Ray), 1 already ended`."""
    cancelled = sum(before == states.PENDING for before, _ in outcomes)
    requested = sum(before != states.PENDING and after in states.ACTIVE for before, after in outcomes)
    ended = len(outcomes) - cancelled - requested
    said = [f"{cancelled} cancelled"] if cancelled else []
    said += [f"{requested} cancel requested (the next tick stops them in Ray)"] if requested else []
    return ", ".join(said + ([f"{ended} already ended"] if ended else [])) or "nothing to cancel"


def list_jobs(args: argparse.Namespace) -> int:
    wanted = states.known_states([s.strip().upper() for s in args.state.split(",")]) if args.state else None
    limit = positive_number(args.limit, "--limit")
    with database() as conn:
        if args.user is not None:
            own = job_rows.own_jobs_only(conn)
            if own is not None and args.user != own:
                raise PermissionDenied(f"--user: {job_rows.only_own(own)}")
        if args.array is not None:
            found = job_rows.array_jobs(conn, job_id(args.array), states=wanted, limit=limit)
            summaries = {}
        else:
            found = job_rows.list_listed(conn, user=args.user, group=args.group, states=wanted, limit=limit)
            summaries = job_rows.array_summaries(conn, [job.array_id for job in found if job.array_id is not None])
    if args.json:
        print_json([{**job_json(job), **({"array": summaries[job.array_id].document()} if job.array_id in summaries else {})}
                    for job in found])
        return 0
    now = datetime.now(UTC)
    problems = {job.id: row_problem(job) for job in found}
    print_table(
        [_row(job, problems[job.id], now) if job.array_id not in summaries else _array_row(job, summaries[job.array_id])
         for job in found],
        ["id", "user", "group", "state", "class", "resources", "priority", "attempt", "cluster", "node", "reserved",
         "submitted_at",
         "placed", "in_ray", "pos", "est_start", "why"],
    )
    return 0


def _row(job: Job, problem: str | None, now: datetime) -> dict:
    return {**{field.shown: getattr(job, field.column) for field in SHOWN},
            "resources": "?" if problem else format_footprint(job.resources, job.bundles, job.bundle_strategy),
            "class": job.priority_class or "-", "why": _why(job, problem), "pos": _estimate(job)[0],
            "reserved": (_reservation(job) or {}).get("nodes"), "est_start": _est_start(job, now),
            "placed": _after(job.submitted_at, job.placed_at), "in_ray": _after(job.submitted_at, job.accepted_at)}


def _array_row(job: Job, array: arrays.ArraySummary) -> dict:
    """An array on one line, under its id: its spec and its tasks' count per state (its tasks:
    `jobs --array ID`)."""
    return {"id": array.id, "user": job.user_name, "group": job.group_name, "state": f"array {array.spec}",
            "class": job.priority_class or "-", "priority": job.priority, "submitted_at": job.submitted_at,
            "resources": "?" if row_problem(job) else format_footprint(job.resources, job.bundles, job.bundle_strategy),
            "why": array.counts}


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


def _why(job: Job, problem: str | None = None) -> str:
    if problem:
        return f"invalid row: {problem}"
    if job.reason is None:
        return "-"
    return f"{job.reason}: {job.message}" if job.message else job.reason


def show(args: argparse.Namespace) -> int:
    with database() as conn:
        job = job_rows.get_job(conn, job_id(args.id))
        running_seen = job_rows.running_seen(conn, job)
        found, before = job_rows.edges(conn, job)
        # An array's id: its first task, and the array's summary.
        array = job_rows.array_summaries(conn, [job.id]).get(job.id) if job.array_id == job.id else None
    shown = job_json(job)
    if array is not None:
        shown["array"] = array.document()
    if args.json or "problem" in shown:
        # A malformed row as it is stored, with what is wrong with it: nothing of it to format.
        (print_json if args.json else print_fields)({**shown, "before": before, "observed": job.observed})
        return 0
    # The edges both ways, side by side.
    at = list(shown).index("after") + 1
    edges = {"after": _after_words(job, found), "before": ", ".join(map(str, before)) or "-"}
    shown = {**dict(list(shown.items())[:at]), **edges, **dict(list(shown.items())[at:])}
    shown["resources"] = format_resources(job.resources)
    # Each bundle with its planned node beside it, once placed.
    nodes: Sequence[str | None] = job.bundle_nodes or [None] * len(job.bundles or ())
    shown["bundles"] = "; ".join(format_resources(bundle) + (f" on {node}" if node else "")
                                 for bundle, node in zip(job.bundles or (), nodes, strict=False)) or "-"
    del shown["bundle_nodes"]
    if job.observed is not None:
        shown.update(_observed(job.observed))
    for field in SHOWN:
        if field.check == "duration" and getattr(job, field.column) is not None:
            shown[field.shown] = format_duration(getattr(job, field.column))
    shown["why"] = _why(job)
    if array is not None:
        shown["array"] = f"{array.spec}: {array.counts}"
    shown["after submit"] = timeline(job, running_seen) or "-"
    del shown["position"], shown["estimated_start_at"], shown["estimate_basis"], shown["reservation"], shown["expected_start"]
    held = _reservation(job)
    if held is not None:
        shown["reserved"] = _reserved_words(job, held)
    if job.state == states.PENDING and job.estimate_basis is not None:
        shown["position"] = job.queue_position
        start = job.estimated_start_at
        shown["estimated start"] = (job.estimate_basis if start is None else
                                    f"about {time_of_day(start, datetime.now(UTC))}, {job.estimate_basis}")
    print_fields(shown)
    return 0


def _after_words(job: Job, found: dict[int, str]) -> str:
    """`12 to succeed (SUCCEEDED), 13 to end (RUNNING)`: what it waits for, and how each stands."""
    return ", ".join(f"{item['job']} to {dependencies.WORDS[dependencies.When(item['when'])]} "
                     f"({found.get(item['job'], 'not found')})" for item in job.after or ()) or "-"


def _reserved_words(job: Job, held: dict) -> str:
    """A reservation (_reservation's) as `show` says it: `node n-3 (first in line), expected to
    start about 14:20 UTC`."""
    why = "first in line" if held["kind"] == "head" else "it preempted there"
    nodes = f"node{'s' if len(held['nodes']) > 1 else ''} {', '.join(held['nodes'])} ({why})"
    if held["kind"] != "head":
        return f"{nodes}, to start once its victims have stopped"
    start = job.reserved_start
    now = datetime.now(UTC)
    when = "at a time not known" if start is None else f"about {time_of_day(max(start, now), now)}"
    return f"{nodes}, expected to start {when}"
