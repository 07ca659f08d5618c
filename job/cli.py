"""`python -m job`: the command line. This module only parses; each command lives in its own module,
imported when that command runs, so that `jobs` does not pay for importing Ray."""

from __future__ import annotations

import argparse
import importlib
import sys

from job.errors import JobError

DEFAULT_COMMAND = "tick"


def _lazy(target: str):
    def run(args: argparse.Namespace) -> int:
        module, function = target.split(":")
        return getattr(importlib.import_module(module), function)(args)

    return run


def _command(subparsers, name: str, target: str, help: str, json_output: bool = False) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=help, description=help)
    parser.set_defaults(handler=_lazy(target))
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def _group_options(parser: argparse.ArgumentParser, adding: bool) -> None:
    parser.add_argument("name", help="resource group name")
    parser.add_argument("--ray-address", required=adding, help="http://host:port of the dashboard, or raycluster://namespace/name")
    parser.add_argument("--node-label", action="append", metavar="K=V", help="only nodes carrying this label (repeatable)")
    parser.add_argument("--policy", help="queue policy: fifo, lifo, drf or fairshare")
    parser.add_argument("--selector", help="node selector: legacy, concentrated, dispersed or roundrobin")
    parser.add_argument("--resource-priority", metavar="R1,R2,...", help="resource order for node choice, e.g. GPU,CPU,memory")
    parser.add_argument("--half-life", metavar="DURATION", help="fair-share usage half life, e.g. 1h (0 plans as drf)")
    parser.add_argument("--max-running-per-user", metavar="N", help="at most N running jobs per user")
    parser.add_argument("--max-resources-per-user", action="append", metavar="NAME=AMOUNT", help="per-user resource cap (repeatable)")
    parser.add_argument("--strict-order", action=argparse.BooleanOptionalAction, default=None, help="a job that waits for resources blocks those behind it")
    parser.add_argument("--pending-timeout", metavar="DURATION", help="fail jobs pending longer than this")
    parser.add_argument("--max-attempts", metavar="N", help="submission attempts before a job fails")
    parser.add_argument("--use-head-node", action=argparse.BooleanOptionalAction, default=None, help="place jobs on the Ray head node too")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m job",
        description="Fair-share batch scheduler for Ray. With no command, runs one tick.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _command(sub, "migrate", "job.migrate:command", "apply the SQL migrations in sql/, once each")
    p.add_argument("--status", action="store_true", help="list applied and pending migrations, change nothing")

    p = _command(sub, "submit", "job.queue_commands:submit", "put a job in the queue and print its id", json_output=True)
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
    p.add_argument("--not-before", metavar="TIME", help="do not start before this time (ISO 8601)")
    p.add_argument("--max-runtime", metavar="DURATION", help="stop the job after this long, e.g. 2h")
    p.add_argument("--metadata", action="append", metavar="K=V", help="passed to Ray as job metadata (repeatable)")

    p = _command(sub, "cancel", "job.queue_commands:cancel", "cancel jobs: at once when pending, through Ray when running")
    p.add_argument("ids", nargs="+", metavar="ID")

    p = _command(sub, "jobs", "job.queue_commands:list_jobs", "list jobs, newest first", json_output=True)
    p.add_argument("--user")
    p.add_argument("--group")
    p.add_argument("--state", help="e.g. PENDING, RUNNING (comma-separated for several)")
    p.add_argument("--limit", default="50")

    p = _command(sub, "show", "job.queue_commands:show", "every field of one job, including why it waits", json_output=True)
    p.add_argument("id", metavar="ID")

    group = sub.add_parser("group", help="manage resource groups", description="manage resource groups")
    group_sub = group.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    _group_options(_command(group_sub, "add", "job.group_commands:add", "add a resource group"), adding=True)
    _group_options(_command(group_sub, "set", "job.group_commands:update", "change a resource group's options"), adding=False)
    _command(group_sub, "show", "job.group_commands:show", "one resource group", json_output=True).add_argument("name")
    _command(group_sub, "list", "job.group_commands:list_groups", "every resource group", json_output=True)
    _command(group_sub, "remove", "job.group_commands:remove", "remove a group without active jobs").add_argument("name")

    user = sub.add_parser("user", help="manage users and their shares", description="manage users and their shares")
    user_sub = user.add_subparsers(dest="user_command", metavar="ACTION", required=True)
    p = _command(user_sub, "set", "job.group_commands:user_set", "create or change a user")
    p.add_argument("name")
    p.add_argument("--shares", help="weight in fair share (default 1)")
    p.add_argument("--max-running", metavar="N", help="at most N running jobs of this user per group")
    p.add_argument("--max-resources", action="append", metavar="NAME=AMOUNT", help="resource cap per group (repeatable)")
    _command(user_sub, "show", "job.group_commands:user_show", "one user, with usage per group", json_output=True).add_argument("name")
    _command(user_sub, "list", "job.group_commands:user_list", "every user", json_output=True)

    p = _command(sub, "plan", "job.planner.command:command", "run the planner on a snapshot file and print the plan (no database, no Ray)")
    p.add_argument("snapshot", metavar="FILE|-", help="snapshot JSON, or - for standard input")

    p = _command(sub, "tick", "job.tick_commands:tick", "run one tick over every resource group (the default command)")
    p.add_argument("--group", help="only this group")
    p.add_argument("--dry-run", action="store_true", help="plan and print; change nothing, submit nothing")

    p = _command(sub, "loop", "job.tick_commands:loop", "run ticks until a deadline (what the CronJob runs)")
    p.add_argument("--for", dest="for_", metavar="DURATION", required=True, help="stop starting ticks after this long, e.g. 55s")
    p.add_argument("--every", metavar="DURATION", required=True, help="start a tick this often, e.g. 5s")
    p.add_argument("--group", help="only this group")

    p = _command(sub, "logs", "job.tick_commands:logs", "print a job's Ray driver logs")
    p.add_argument("id", metavar="ID")

    p = _command(sub, "demo", "job.demo:command", "run the scheduler on a local PostgreSQL and a local Ray cluster")
    p.add_argument("--jobs", default="12", help="how many demo jobs")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([DEFAULT_COMMAND, *(argv if argv is not None else sys.argv[1:])])
    try:
        from job import log
        from job.settings import settings

        config = settings()
        log.configure(config.log_format, config.log_level)
        return args.handler(args) or 0
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
