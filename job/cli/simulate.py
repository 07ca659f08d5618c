"""`python -m job simulate`: a trace replayed through the planner on a virtual clock, under one or
several group configurations, with the figures that compare them (core/simulate)."""

from __future__ import annotations

import argparse
import csv
import time
from typing import Any

from job.cli.options import OPTIONS, add_options, option_fields, read_fields
from job.cli.output import print_json, print_table
from job.cli.parsing import MIB, command, pairs, positive_duration, read_input
from job.core.accounts import walk
from job.core.errors import BadInput, quoted
from job.core.planner.snapshot import Account, Group, User, check_tree
from job.core.resources import Resources
from job.core.simulate.cluster import parse_nodes, parse_nodes_json
from job.core.simulate.engine import Outcome, simulate
from job.core.simulate.generate import generate
from job.core.simulate.metrics import summarise, tree_figures, windows
from job.core.simulate.trace import CSV_FIELDS, Trace, parse_csv, parse_swf
from job.core.specs import GroupSpec, validated
from job.core.units import format_duration

# The group options the planner reads: those a simulation can vary.
PLANNER_OPTIONS = [option for option in OPTIONS if option.field in Group.model_fields]
DEFAULT_NODES = "4x{CPU:32,GPU:8,memory:256GiB}"
# GroupSpec asks for a Ray cluster; a simulated group has none, and the planner never reads it.
_NO_CLUSTER = "http://simulated"


def register(sub) -> None:
    p = command(sub, "simulate", run, json_output=True)
    p.add_argument("trace", nargs="?", metavar="TRACE",
                   help=f"CSV ({','.join(CSV_FIELDS[:4])}[,{','.join(CSV_FIELDS[4:])}]) or SWF (.swf) trace file")
    p.add_argument("--format", choices=("csv", "swf"), help="the trace's format (default: swf for .swf files, else csv)")
    p.add_argument("--generate", metavar="N", type=_positive, help="simulate N generated jobs instead of a trace")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated trace (default 1)")
    p.add_argument("--users", type=_positive, help="users of the generated trace (default: one per 100 jobs, at least 2)")
    p.add_argument("--load", type=float, default=1.0,
                   help="work the generated trace offers, as a fraction of what the nodes can run (default 1.0)")
    p.add_argument("--nodes", default=DEFAULT_NODES,
                   help=f"the nodes: COUNTx{{NAME:AMOUNT,...}} joined by +, or @FILE of JSON nodes (default {DEFAULT_NODES})")
    p.add_argument("--every", default="5s", metavar="DURATION", help="virtual time between ticks (default 5s)")
    p.add_argument("--window", default="1h", metavar="DURATION", help="time window of the fairness figures (default 1h)")
    p.add_argument("--compare", action="append", metavar="K=V,...",
                   help="a configuration to run, as group options over the others, e.g. policy=drf or "
                        "policy=fairshare,half_life=1h (repeatable)")
    p.add_argument("--account", action="append", metavar="NAME=SHARES[@PARENT]",
                   help="an account (team) of the simulated group, under PARENT (default: the root) (repeatable)")
    p.add_argument("--user", action="append", metavar="NAME=SHARES[@ACCOUNT]",
                   help="a user's shares and account (default: shares 1, the root) (repeatable)")
    p.add_argument("--until", metavar="DURATION", help="end the simulation at this virtual time (figures over that span)")
    p.add_argument("--plot", metavar="FILE", help="draw each user's share over time per configuration (.png or .svg; "
                                                  "needs matplotlib: pip install 'job[plot]')")
    p.add_argument("--jobs-out", metavar="FILE.csv",
                   help="write one row per job: id,user,submit_time,start_time,end_time in seconds of virtual time "
                        "(empty where never started), with a configuration column when several are compared")
    add_options(p, PLANNER_OPTIONS)


# The most jobs (or users) a generated trace has: a hundred times bench/simulate.py's.
MAX_GENERATED = 10_000_000
# The files read whole: a trace as long as the jobs generated at most (a CSV line or an SWF one is
# about 100 bytes), the nodes as many as `parse_nodes_json` takes.
MAX_TRACE_FILE = 1024 * MIB
MAX_NODES_FILE = 64 * MIB


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a whole number above zero")
    if len(text) > len(str(MAX_GENERATED)) or int(text) > MAX_GENERATED:
        raise argparse.ArgumentTypeError(f"{quoted(text)}: at most {MAX_GENERATED}")
    return int(text)


def run(args: argparse.Namespace) -> int:
    every_s = positive_duration(args.every, "--every")
    window_s = positive_duration(args.window, "--window")
    until_s = None if args.until is None else positive_duration(args.until, "--until")
    accounts, people = _tree(args.account, args.user)
    if args.plot:
        from job.cli import plot
        plot.check(args.plot)
    configurations = _configurations(args)
    nodes = _nodes(args.nodes)
    totals = Resources.total(Resources.of(node.resources) for node in nodes)
    trace = _trace(args, totals.amounts())
    source = args.trace or "generated trace"
    results: list[dict[str, Any]] = []
    rows: list[dict] = []
    for name, group in configurations:
        started = time.perf_counter()
        try:
            outcome = simulate(trace.jobs, nodes, group, users=people, every_s=every_s, accounts=accounts, until_s=until_s)
        except ValueError as exc:
            # What the trace asks that the configuration has not (a class, say).
            raise BadInput(f"{source}: {exc} (configuration {name})") from None
        rows += _job_rows(outcome, name if len(configurations) > 1 else None)
        shares = windows(outcome, window_s)
        figures = {**summarise(outcome, shares), **tree_figures(outcome, accounts)}
        elapsed = time.perf_counter() - started
        results.append({"name": name, "group": group.model_dump(exclude={"name"}), "figures": figures,
                        "elapsed_s": round(elapsed, 3), "events_per_s": round(outcome.events / elapsed) if elapsed else None,
                        "shares": shares})
    if args.jobs_out:
        _write_jobs(args.jobs_out, rows)
    if args.plot:
        plot.shares(args.plot, [(result["name"], result["shares"]) for result in results])
    users = len({job.user for job in trace.jobs})
    if args.json:
        print_json({"trace": {"jobs": len(trace.jobs), "users": users, "skipped": trace.skipped},
                    "nodes": len(nodes), "totals": totals.amounts(), "every_s": every_s, "window_s": window_s,
                    "configurations": [{key: value for key, value in result.items() if key != "shares"} for result in results]})
        return 0
    print(f"{len(trace.jobs)} jobs from {users} users" + (f" ({trace.skipped} skipped)" if trace.skipped else "")
          + f" on {len(nodes)} nodes ({totals}); a tick every {format_duration(every_s)},"
          f" fairness per {format_duration(window_s)}")
    print_table([_row(result, totals) for result in results], _columns(totals))
    if accounts:
        print()
        print_table([{"configuration": result["name"], "account": "  " * depth + name,
                      **_team_row(result["figures"]["accounts"][name])}
                     for result in results for depth, name, _ in walk({n: a.parent for n, a in accounts.items()})],
                    ["configuration", "account", "received", "entitled", "wait_mean"])
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0


JOB_COLUMNS = ("id", "user", "submit_time", "start_time", "end_time", "state")


def _job_rows(outcome: Outcome, configuration: str | None) -> list[dict]:
    """One row per job of the trace, its last run's start and end (None where it never started), and
    how it ended (None: it had not by the end)."""
    rows = []
    for record in outcome.records:
        row = {"id": record.job.id, "user": record.job.user, "submit_time": record.submit_s,
               "start_time": record.start_s, "end_time": record.end_s if record.start_s is not None else None,
               "state": record.state}
        rows.append(row if configuration is None else {"configuration": configuration, **row})
    return rows


def _write_jobs(path: str, rows: list[dict]) -> None:
    columns = ("configuration", *JOB_COLUMNS) if rows and "configuration" in rows[0] else JOB_COLUMNS
    try:
        with open(path, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(columns)
            writer.writerows([("" if row[column] is None else f"{row[column]:g}" if isinstance(row[column], float)
                               else row[column]) for column in columns] for row in rows)
    except OSError as exc:
        raise BadInput(f"--jobs-out: cannot write {path}: {exc.strerror or exc}") from None


def _configurations(args: argparse.Namespace) -> list[tuple[str, Group]]:
    base = option_fields(args, PLANNER_OPTIONS)
    if not args.compare:
        return [(_name(base), _group(base, "options"))]
    names = []
    configurations = []
    for text in args.compare:
        fields = {**base, **_compared(text)}
        names.append(text)
        configurations.append((text, _group(fields, f"--compare {text}")))
    if len(set(names)) != len(names):
        raise BadInput("--compare: a configuration is given twice")
    return configurations


def _name(fields: dict) -> str:
    return ",".join(f"{field.removesuffix('_s')}={value}" for field, value in fields.items()) or "defaults"


def _compared(text: str) -> dict:
    """`policy=fairshare,half_life=1h,max_resources_per_user=CPU=8` as GroupSpec fields. Keys are
    the options' flags without dashes (`half-life` or `half_life`); a repeatable option repeats."""
    by_key = {option.flag.removeprefix("--").replace("-", "_"): option for option in PLANNER_OPTIONS}
    raw: dict[str, list[str]] = {}
    for item in filter(None, (item.strip() for item in text.split(","))):
        key, sep, value = item.partition("=")
        option = by_key.get(key.strip().replace("-", "_"))
        if not sep or option is None:
            known = ", ".join(sorted(by_key))
            raise BadInput(f"--compare {text}: {item!r}: expected KEY=VALUE with KEY one of {known}")
        raw.setdefault(option.field, []).append(value.strip())
    fields: dict[str, Any] = {}
    for option in PLANNER_OPTIONS:
        values = raw.get(option.field)
        if values is None:
            continue
        if option.kind == "pairs":
            fields[option.field] = pairs(values, f"--compare {option.flag.removeprefix('--')}")
        elif option.kind == "list":
            fields[option.field] = values
        elif len(values) > 1:
            raise BadInput(f"--compare {text}: {option.flag.removeprefix('--')} given twice")
        elif option.kind == "switch":
            fields[option.field] = _switch(values[0], text)
        else:
            fields[option.field] = values[0]
    return fields


def _switch(value: str, text: str) -> bool:
    if value.lower() in ("true", "yes", "on", "1"):
        return True
    if value.lower() in ("false", "no", "off", "0"):
        return False
    raise BadInput(f"--compare {text}: {value!r} is not true or false")


def _group(fields: dict, where: str) -> Group:
    try:
        spec = validated(GroupSpec, {"name": "simulated", "clusters": [_NO_CLUSTER], **read_fields(fields)})
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None
    return Group(**{field: getattr(spec, field) for field in Group.model_fields if field != "name"})


def _nodes(text: str) -> list:
    if text.startswith("@"):
        path = text[1:]
        return parse_nodes_json(read_input(path, MAX_NODES_FILE, "--nodes"), path)
    return parse_nodes(text)


def _trace(args: argparse.Namespace, totals: dict[str, float]) -> Trace:
    if (args.trace is None) == (args.generate is None):
        raise BadInput("simulate: give a TRACE file or --generate N, not both" if args.trace else
                       "simulate: give a TRACE file or --generate N")
    if args.generate is not None:
        if not 0 < args.load <= 100:
            raise BadInput(f"--load: must be above 0 and at most 100, got {args.load:g}")
        return Trace(jobs=generate(args.generate, args.seed, totals, users=args.users, load=args.load))
    try:
        text = read_input(args.trace, MAX_TRACE_FILE).decode()
    except UnicodeDecodeError as exc:
        raise BadInput(f"{args.trace}: {exc}") from None
    kind = args.format or ("swf" if args.trace.lower().endswith(".swf") else "csv")
    trace = (parse_swf if kind == "swf" else parse_csv)(text, args.trace)
    if not trace.jobs:
        raise BadInput(f"{args.trace}: no jobs in the trace")
    return trace


def _tree(accounts: list[str] | None, users: list[str] | None) -> tuple[dict[str, Account], dict[str, User]]:
    """`--account NAME=SHARES[@PARENT]` and `--user NAME=SHARES[@ACCOUNT]` as the planner's accounts
    and users; a bad share, an unknown parent or account, a name given twice or a cycle refused."""
    teams = {name: Account(shares=shares, parent=parent)
             for name, shares, parent in _members(accounts, "--account", "NAME=SHARES[@PARENT]")}
    people = {name: User(shares=shares, account=account)
              for name, shares, account in _members(users, "--user", "NAME=SHARES[@ACCOUNT]")}
    try:
        check_tree(teams, people)
    except ValueError as exc:
        raise BadInput(f"--account/--user: {exc}") from None
    return teams, people


def _members(items: list[str] | None, option: str, form: str) -> list[tuple[str, float, str | None]]:
    found, seen = [], set()
    for item in items or ():
        name, sep, rest = item.partition("=")
        amount, _, parent = rest.partition("@")
        try:
            shares = float(amount)
        except ValueError:
            shares = None
        if not sep or not name or shares is None or not 0 < shares < float("inf"):
            raise BadInput(f"{option} {item}: give {form}, with SHARES a number above 0")
        if name in seen:
            raise BadInput(f"{option} {item}: {name!r} is given twice")
        seen.add(name)
        found.append((name, shares, parent or None))
    return found


def _team_row(figures: dict) -> dict:
    wait = figures["wait_mean_s"]
    return {"received": f"{figures['received']:.3f}", "entitled": f"{figures['entitled']:.3f}",
            "wait_mean": None if wait is None else format_duration(round(wait))}


def _columns(totals: Resources) -> list[str]:
    return ["configuration", "wait_mean", "wait_p50", "wait_p95", "completion_mean", "slowdown", "makespan",
            *(f"use_{name}" for name in totals), "jain", "jain_windows", "deviation_max", "deviation_mean",
            "preemptions", "lost", "events_per_s"]


def _row(result: dict, totals: Resources) -> dict:
    figures = result["figures"]

    def duration(value: float | None) -> str | None:
        return None if value is None else format_duration(round(value))

    def fraction(value: float | None) -> str | None:
        return None if value is None else f"{value:.3f}"

    return {
        "configuration": result["name"],
        "wait_mean": duration(figures["wait_mean_s"]),
        "wait_p50": duration(figures["wait_p50_s"]),
        "wait_p95": duration(figures["wait_p95_s"]),
        "completion_mean": duration(figures["completion_mean_s"]),
        "slowdown": None if figures["bounded_slowdown_mean"] is None else f"{figures['bounded_slowdown_mean']:.2f}",
        "makespan": duration(figures["makespan_s"]),
        **{f"use_{name}": fraction(figures["utilization"].get(name)) for name in totals},
        "jain": fraction(figures["jain"]),
        "jain_windows": fraction(figures["jain_window_mean"]),
        "deviation_max": fraction(figures["deviation_max"]),
        "deviation_mean": fraction(figures["deviation_mean"]),
        "preemptions": figures["preemptions"],
        "lost": duration(figures["lost_run_s"]),
        "events_per_s": result["events_per_s"],
    }
