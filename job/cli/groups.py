"""The commands on resource groups: group add, set, show, list, remove."""

from __future__ import annotations

import argparse
from typing import NamedTuple

from job.cli.output import format_resources, iso, print_fields, print_json, print_table
from job.cli.parsing import command, database, pairs
from job.core.group import GroupConfig
from job.core.specs import GroupSpec, NodeType, format_node_type, validated
from job.core.units import format_duration
from job.store import groups


def register(sub) -> None:
    group = sub.add_parser("group", help="manage resource groups", description="manage resource groups")
    actions = group.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    _options(command(actions, "add", add, "add a resource group"), adding=True)
    _options(command(actions, "set", update, "change a resource group's options"), adding=False)
    command(actions, "show", show, "one resource group", json_output=True).add_argument("name")
    command(actions, "list", list_groups, "every resource group", json_output=True)
    command(actions, "remove", remove, "remove a group without active jobs").add_argument("name")


class Option(NamedTuple):
    flag: str
    field: str  # of GroupSpec
    kind: str  # "value", "pairs" (repeatable K=V), "list" (repeatable) or "switch" (--x / --no-x)
    metavar: str | None
    help: str


# Every option of `group add` and `group set`: an option not given leaves the field as it is.
OPTIONS = [
    Option("--ray-address", "ray_address", "value", None, "http://host:port of the dashboard, or raycluster://namespace/name"),
    Option("--node-label", "node_labels", "pairs", "K=V", "only nodes carrying this label (repeatable)"),
    Option("--policy", "policy", "value", None, "queue policy: fifo, lifo, drf or fairshare"),
    Option("--selector", "selector", "value", None, "node selector: legacy, concentrated, dispersed or roundrobin"),
    Option("--resource-priority", "resource_priority", "value", "R1,R2,...", "resource order for node choice, e.g. GPU,CPU,memory"),
    Option("--half-life", "half_life_s", "value", "DURATION", "fair-share usage half life, e.g. 1h (0 plans as drf)"),
    Option("--max-running-per-user", "max_running_per_user", "value", "N", "at most N running jobs per user"),
    Option("--max-resources-per-user", "max_resources_per_user", "pairs", "NAME=AMOUNT", "per-user resource cap (repeatable)"),
    Option("--strict-order", "strict_order", "switch", None, "a job that waits for resources blocks those behind it"),
    Option("--pending-timeout", "pending_timeout_s", "value", "DURATION", "fail jobs pending longer than this"),
    Option("--max-attempts", "max_attempts", "value", "N", "submissions Ray may refuse before a job fails"),
    Option("--max-requeues", "max_requeues", "value", "N",
            "requeues for infrastructure faults (lost, supervisor failed, node died or busy) before a job fails"),
    Option("--start-timeout", "start_timeout_s", "value", "DURATION",
            "requeue a job Ray has not started this long for lack of free resources on its node (default 5m)"),
    Option("--use-head-node", "use_head_node", "switch", None, "place jobs on the Ray head node too"),
    Option("--allow-runtime-env-key", "allowed_runtime_env_keys", "list", "KEY",
            "a runtime_env key its jobs may use beyond the known ones, unchecked (repeatable; replaces the list)"),
    Option("--priority-class", "priority_classes", "list", "NAME=VALUE[:non-preemptible]",
            "a priority class; the highest value goes first (repeatable; replaces the list)"),
    Option("--default-class", "default_class", "value", "NAME", "the class of jobs submitted without --class"),
    Option("--preemption", "preemption", "value", None,
            "off, priority (stop lower classes for higher ones) or fairshare (also reclaim for users below their share)"),
    Option("--min-runtime", "min_runtime_s", "value", "DURATION", "never stop a job before it ran this long (default 10m)"),
    Option("--max-preemptions", "max_preemptions", "value", "N", "at most N jobs stopped per tick (default 10)"),
    Option("--autoscale", "autoscale", "value", "on|off",
            "tell Ray's autoscaler what the queue needs, so that the cluster grows and shrinks with it (default off)"),
    Option("--node-type", "node_types", "list", "NAME=CPU:8,GPU:1,memory:32GiB[@LABEL=VALUE...]:max=N",
            "a kind of node an http:// group's cluster can add (repeatable; replaces the list; "
            "a raycluster:// group's are read from its RayCluster)"),
]


def _options(parser: argparse.ArgumentParser, adding: bool) -> None:
    parser.add_argument("name", help="resource group name")
    add_options(parser, OPTIONS, required=("ray_address",) if adding else ())


def add_options(parser: argparse.ArgumentParser, options: list[Option], required: tuple[str, ...] = ()) -> None:
    """The options as command-line flags (`python -m job simulate` takes the planner's)."""
    for option in options:
        if option.kind == "switch":
            parser.add_argument(option.flag, dest=option.field, action=argparse.BooleanOptionalAction, default=None,
                                help=option.help)
        else:
            parser.add_argument(option.flag, dest=option.field, action="store" if option.kind == "value" else "append",
                                metavar=option.metavar, help=option.help, required=option.field in required)


def option_fields(args: argparse.Namespace, options: list[Option]) -> dict:
    """The GroupSpec fields of the options given (the others are left out)."""
    fields = {}
    for option in options:
        value = getattr(args, option.field)
        if value is not None:
            fields[option.field] = pairs(value, option.flag) if option.kind == "pairs" else value
    return fields


def add(args: argparse.Namespace) -> int:
    spec = validated(GroupSpec, {"name": args.name, **option_fields(args, OPTIONS)})
    with database() as conn:
        groups.insert_group(conn, spec)
    print(f"group {spec.name} added: policy={spec.policy} selector={spec.selector} ray_address={spec.ray_address}")
    return 0


def update(args: argparse.Namespace) -> int:
    with database() as conn:
        current = groups.get_group(conn, args.name, for_update=True)
        spec = validated(GroupSpec, {**current.options(), **option_fields(args, OPTIONS)})
        groups.update_group(conn, spec)
    print(f"group {spec.name} updated: policy={spec.policy} selector={spec.selector} ray_address={spec.ray_address}")
    return 0


def _group_json(group: GroupConfig) -> dict:
    return {**group.options(), "usage_charged_at": iso(group.usage_charged_at), "created_at": iso(group.created_at),
            "updated_at": iso(group.updated_at)}


def show(args: argparse.Namespace) -> int:
    with database() as conn:
        group = _group_json(groups.get_group(conn, args.name))
    if args.json:
        print_json(group)
        return 0
    for field in ("half_life_s", "pending_timeout_s", "start_timeout_s", "min_runtime_s"):
        if group[field] is not None:
            group[field] = format_duration(group[field])
    group["max_resources_per_user"] = format_resources(group["max_resources_per_user"])
    group["priority_classes"] = ", ".join(f"{c['name']}={c['value']}" + ("" if c["preemptible"] else ":non-preemptible")
                                          for c in group["priority_classes"])
    group["node_types"] = " ".join(format_node_type(NodeType.model_validate(t)) for t in group["node_types"]) or None
    print_fields(group)
    return 0


def list_groups(args: argparse.Namespace) -> int:
    with database() as conn:
        rows = groups.list_groups(conn)
    if args.json:
        print_json([{**_group_json(GroupConfig.from_row(row)), "pending": row["pending"], "active": row["active"]}
                    for row in rows])
        return 0
    print_table(rows, ["name", "ray_address", "policy", "selector", "pending", "active"])
    return 0


def remove(args: argparse.Namespace) -> int:
    with database() as conn:
        finished = groups.remove_group(conn, args.name)
    print(f"group {args.name} removed, with {finished} finished job(s)")
    return 0
