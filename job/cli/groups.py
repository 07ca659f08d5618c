"""The commands on resource groups: group add, set, show, list, remove."""

from __future__ import annotations

import argparse

from job.cli.output import format_resources, iso, print_fields, print_json, print_table
from job.cli.parsing import command, database, pairs
from job.core.specs import GroupSpec, validated
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


# CLI option -> GroupSpec field, for the options given as strings.
_GROUP_OPTIONS = {
    "ray_address": "ray_address",
    "policy": "policy",
    "selector": "selector",
    "resource_priority": "resource_priority",
    "half_life": "half_life_s",
    "max_running_per_user": "max_running_per_user",
    "strict_order": "strict_order",
    "pending_timeout": "pending_timeout_s",
    "max_attempts": "max_attempts",
    "use_head_node": "use_head_node",
}


def _group_fields(args: argparse.Namespace) -> dict:
    fields = {field: getattr(args, option) for option, field in _GROUP_OPTIONS.items() if getattr(args, option) is not None}
    if args.node_label is not None:
        fields["node_labels"] = pairs(args.node_label, "--node-label")
    if args.max_resources_per_user is not None:
        fields["max_resources_per_user"] = pairs(args.max_resources_per_user, "--max-resources-per-user")
    return fields


def _options(parser, adding: bool) -> None:
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


def add(args: argparse.Namespace) -> int:
    spec = validated(GroupSpec, {"name": args.name, **_group_fields(args)})
    with database() as conn:
        groups.insert_group(conn, spec)
    print(f"group {spec.name} added: policy={spec.policy} selector={spec.selector} ray_address={spec.ray_address}")
    return 0


def update(args: argparse.Namespace) -> int:
    with database() as conn:
        current = groups.get_group(conn, args.name, for_update=True)
        spec = validated(GroupSpec, {**{field: current[field] for field in GroupSpec.model_fields}, **_group_fields(args)})
        groups.update_group(conn, spec)
    print(f"group {spec.name} updated: policy={spec.policy} selector={spec.selector} ray_address={spec.ray_address}")
    return 0


def _group_json(row: dict) -> dict:
    return {**{field: row[field] for field in GroupSpec.model_fields},
            "usage_charged_at": iso(row["usage_charged_at"]), "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"])}


def show(args: argparse.Namespace) -> int:
    with database() as conn:
        row = groups.get_group(conn, args.name)
    group = _group_json(row)
    if args.json:
        print_json(group)
        return 0
    for field in ("half_life_s", "pending_timeout_s"):
        if group[field] is not None:
            group[field] = format_duration(group[field])
    group["max_resources_per_user"] = format_resources(group["max_resources_per_user"])
    print_fields(group)
    return 0


def list_groups(args: argparse.Namespace) -> int:
    with database() as conn:
        rows = groups.list_groups(conn)
    if args.json:
        print_json([{**_group_json(row), "pending": row["pending"], "active": row["active"]} for row in rows])
        return 0
    print_table(rows, ["name", "ray_address", "policy", "selector", "pending", "active"])
    return 0


def remove(args: argparse.Namespace) -> int:
    with database() as conn:
        finished = groups.remove_group(conn, args.name)
    print(f"group {args.name} removed, with {finished} finished job(s)")
    return 0
