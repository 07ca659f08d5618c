"""The commands on schedules: schedule add, list, show, pause, resume, remove. `add` takes the job's
options of `submit` (cli/jobs.py, from the field table): the template each slot's job is made from."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from job.cli.jobs import add_submit_options, submit_options
from job.cli.output import iso, print_fields, print_json, print_table
from job.cli.parsing import command, database, parser_of, positive_duration
from job.core.errors import BadInput
from job.core.job import SUBMITTED
from job.core.schedules import CONCURRENCY, Schedule, ScheduleRun, next_slot
from job.core.units import format_duration
from job.store import jobs as job_rows
from job.store import schedules

# How many of a schedule's last slots `show` lists.
SHOWN_SLOTS = 10


def register(sub) -> None:
    schedule = parser_of(sub, "schedule")
    actions = schedule.add_subparsers(dest="schedule_command", metavar="ACTION", required=True)
    p = command(actions, "add", add, "add a schedule: a job submitted at each slot of a cron expression or a period")
    p.add_argument("name", help="the schedule's name")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="'M H DOM MON DOW'", help="a 5-field cron expression, e.g. '30 2 * * mon-fri'")
    when.add_argument("--every", metavar="DURATION", help="a period, e.g. 10m (counted from the schedule's creation)")
    p.add_argument("--timezone", metavar="TZ", help="the cron expression's time zone, e.g. Europe/Paris (default UTC)")
    p.add_argument("--concurrency", choices=CONCURRENCY, default="allow",
                   help="while the last run is not ended: submit anyway (allow), skip the slot (forbid) or cancel "
                        "the last run and submit (replace)")
    p.add_argument("--starting-deadline", metavar="DURATION",
                   help="skip a slot missed by more than this (default: never skip)")
    add_submit_options(p)
    command(actions, "list", list_schedules, "every schedule, with its next slot and last job", json_output=True)
    command(actions, "show", show, "one schedule: its template, its last slots and their jobs",
            json_output=True).add_argument("name")
    for action, handler, help in (("pause", pause, "submit nothing until resumed"),
                                  ("resume", resume, "submit again: the latest slot missed while paused runs, unless past the "
                                   "starting deadline"),
                                  ("remove", remove, "remove a schedule (its jobs stay)")):
        command(actions, action, handler, help).add_argument("name")


def _template(spec: job_rows.JobSpec) -> dict[str, Any]:
    """The submit's checked fields by column, as JSON; user and group are the schedule's."""
    values = {field.column: getattr(spec, job_rows.spec_name(field)) for field in SUBMITTED}
    del values["user_name"], values["group_name"]
    return {column: iso(value) if isinstance(value, datetime) else value for column, value in values.items()}


def _read(args: argparse.Namespace) -> dict[str, Any]:
    """The schedule's own options, checked: each refusal names its option."""
    from job.core.cron import parse_cron, parse_timezone
    from job.core.specs import NAME  # pydantic's models, for `schedule add` only

    if not isinstance(args.name, str) or not NAME.fullmatch(args.name):
        raise BadInput(f"name: {args.name!r} is not a valid schedule name: use 1 to 63 letters, digits, '.', '_' or "
                       "'-', starting with a letter or digit")
    zone = "UTC" if args.timezone is None else args.timezone
    try:
        parse_timezone(zone)
    except ValueError as exc:
        raise BadInput(f"--timezone: {exc}") from None
    if args.cron is not None:
        try:
            parse_cron(args.cron, zone)
        except ValueError as exc:
            raise BadInput(f"--cron: {exc}") from None
    elif args.timezone is not None:
        raise BadInput("--timezone: a period (--every) counts real time; a time zone goes with --cron")
    return {"cron": args.cron, "every_s": None if args.every is None else positive_duration(args.every, "--every"),
            "timezone": zone, "concurrency": args.concurrency,
            "starting_deadline_s": (None if args.starting_deadline is None
                                    else positive_duration(args.starting_deadline, "--starting-deadline"))}


def add(args: argparse.Namespace) -> int:
    own = _read(args)
    options = submit_options(args)
    for field in SUBMITTED:
        if field.unscheduled is not None and options[field.api_keyword]:
            raise BadInput(f"{field.option}: {field.unscheduled}")
    from job import api  # pydantic's models, for `schedule add` only

    spec = api.job_spec(**options)
    with database() as conn:
        api.check_runtime_env(conn, spec)
        job_rows.check_class(conn, spec)
        schedules.insert_schedule(conn, Schedule(args.name, spec.user, spec.group, _template(spec), paused=False,
                                                 created_at=datetime.now(UTC), **own))
        added = schedules.get_schedule(conn, args.name)
    now = datetime.now(UTC)
    print(f"schedule {args.name} added: {added.schedule.said()}, next slot {iso(next_slot(added.schedule, now))}")
    return 0


def _state(run: ScheduleRun) -> str:
    return "paused" if run.schedule.paused else "active"


def _last(run: ScheduleRun) -> str | None:
    return None if run.last_job is None else f"{run.last_job} {run.last_state or 'pruned'}"


def _json(run: ScheduleRun, now: datetime) -> dict[str, Any]:
    s = run.schedule
    return {"name": s.name, "user": s.user_name, "group": s.group_name, "cron": s.cron, "every_s": s.every_s,
            "timezone": s.timezone, "concurrency": s.concurrency, "starting_deadline_s": s.starting_deadline_s,
            "state": _state(run), "created_at": iso(s.created_at), "last_slot": iso(run.last_slot),
            "last_job": run.last_job, "last_job_state": run.last_state,
            "next_slot": None if s.paused else iso(next_slot(s, now, run.last_slot)), "template": s.template}


def list_schedules(args: argparse.Namespace) -> int:
    with database() as conn:
        found = schedules.schedules(conn)
    now = datetime.now(UTC)
    if args.json:
        print_json([_json(run, now) for run in found])
        return 0
    print_table([{"name": run.schedule.name, "user": run.schedule.user_name, "group": run.schedule.group_name,
                  "when": run.schedule.said(),
                  "next": None if run.schedule.paused else next_slot(run.schedule, now, run.last_slot),
                  "last job": _last(run), "state": _state(run)} for run in found],
                ["name", "user", "group", "when", "next", "last job", "state"])
    return 0


def show(args: argparse.Namespace) -> int:
    with database() as conn:
        run = schedules.get_schedule(conn, args.name)
        slots = schedules.slots_of(conn, args.name, SHOWN_SLOTS)
    shown = _json(run, datetime.now(UTC))
    shown["slots"] = [{"slot": iso(row["slot"]), "outcome": row["outcome"], "job": row["job_id"],
                       "job_state": row["state"], "message": row["message"]} for row in slots]
    if args.json:
        print_json(shown)
        return 0
    template = shown.pop("template")
    slot_rows = shown.pop("slots")
    deadline = shown.pop("starting_deadline_s")
    shown["starting deadline"] = None if deadline is None else format_duration(deadline)
    del shown["cron"], shown["every_s"]
    print_fields({"name": shown.pop("name"), "when": run.schedule.said(), **shown,
                  **{f"job {field.shown}": template[field.column] for field in SUBMITTED
                     if template.get(field.column) not in (None, {}, [])}})
    print()
    print_table([{**row, "slot": datetime.fromisoformat(row["slot"]),
                  "job": None if row["job"] is None else f"{row['job']} {row['job_state'] or 'pruned'}"}
                 for row in slot_rows], ["slot", "outcome", "job", "message"])
    return 0


def _set_paused(args: argparse.Namespace, paused: bool) -> int:
    with database() as conn:
        schedules.set_paused(conn, args.name, paused)
    print(f"schedule {args.name} {'paused' if paused else 'resumed'}")
    return 0


def pause(args: argparse.Namespace) -> int:
    return _set_paused(args, True)


def resume(args: argparse.Namespace) -> int:
    return _set_paused(args, False)


def remove(args: argparse.Namespace) -> int:
    with database() as conn:
        schedules.remove_schedule(conn, args.name)
    print(f"schedule {args.name} removed (the jobs it made stay)")
    return 0
