"""The commands on resource groups: group add, set, show, list, remove."""

from __future__ import annotations

import argparse
import json
from typing import Any

from job.cli.options import OPTIONS, add_options, format_node_type, option_fields, read_fields
from job.cli.output import format_resources, iso, print_fields, print_json, print_table
from job.cli.parsing import command, database, parser_of
from job.core.errors import BadInput, InvalidRow
from job.core.group import GroupConfig
from job.core.specs import GroupSpec, NodeType, validated
from job.core.units import format_duration
from job.store import groups


def register(sub) -> None:
    group = parser_of(sub, "group")
    actions = group.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    _options(command(actions, "add", add, "add a resource group"), adding=True)
    _options(command(actions, "set", update, "change a resource group's options"), adding=False)
    command(actions, "show", show, "one resource group", json_output=True).add_argument("name")
    command(actions, "list", list_groups, "every resource group", json_output=True)
    command(actions, "remove", remove, "remove a group without active jobs").add_argument("name")


def _options(parser: argparse.ArgumentParser, adding: bool) -> None:
    parser.add_argument("name", help="resource group name")
    add_options(parser, OPTIONS, required=("clusters",) if adding else ())
    if not adding:
        parser.add_argument("--add-ray-address", action="append", metavar="[NAME=]ADDRESS", default=[],
                            help="add a Ray cluster to the group (repeatable)")
        parser.add_argument("--remove-ray-address", action="append", metavar="NAME|ADDRESS", default=[],
                            help="remove a Ray cluster: it takes no new job, and is dropped once its jobs have ended "
                                 "(repeatable)")


def add(args: argparse.Namespace) -> int:
    spec = validated(GroupSpec, {"name": args.name, **read_fields(option_fields(args, OPTIONS))})
    with database() as conn:
        groups.insert_group(conn, spec)
    print(f"group {spec.name} added: policy={spec.policy} selector={spec.selector} clusters={_clusters(spec)}")
    return 0


def update(args: argparse.Namespace) -> int:
    with database() as conn:
        current = groups.get_group(conn, args.name, for_update=True)
        fields = {**current.options(), **read_fields(option_fields(args, OPTIONS))}
        fields["clusters"] = _changed_clusters(fields["clusters"], args.add_ray_address, args.remove_ray_address)
        spec = validated(GroupSpec, fields)
        groups.update_group(conn, spec)
    print(f"group {spec.name} updated: policy={spec.policy} selector={spec.selector} clusters={_clusters(spec)}")
    return 0


def _changed_clusters(clusters: list, added: list[str], removed: list[str]) -> list:
    """The clusters with those added and those named (by name or address) marked for removal."""
    clusters = [*clusters, *added]
    for named in removed:
        at = [i for i, c in enumerate(clusters) if isinstance(c, dict) and named in (c.get("name"), c.get("address"))]
        if not at:
            raise BadInput(f"--remove-ray-address: {named!r} is not a cluster of the group")
        clusters[at[0]] = {**clusters[at[0]], "removing": True}
    return clusters


def _clusters(spec: GroupSpec) -> str:
    return ",".join(f"{c.name}={c.address}" + (" (removing)" if c.removing else "") for c in spec.clusters)


def _cluster_names(clusters: list[Any]) -> str:
    """The clusters' names; clusters written past the CLI without a name each, as stored."""
    if all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in clusters):
        return ",".join(c["name"] for c in clusters)
    return f"invalid: {json.dumps(clusters)[:120]}"


def _group_json(group: GroupConfig) -> dict:
    return {**group.options(), "usage_charged_at": iso(group.usage_charged_at), "created_at": iso(group.created_at),
            "updated_at": iso(group.updated_at)}


def show(args: argparse.Namespace) -> int:
    with database() as conn:
        stored = groups.get_group(conn, args.name)
    group = _group_json(stored)
    try:
        stored.check()
    except InvalidRow as exc:
        # Written past `group set`: shown as stored, with what is wrong, for `group set` to mend.
        group["problem"] = str(exc)
    if args.json or "problem" in group:
        (print_json if args.json else print_fields)(group)
        return 0
    for field in ("half_life_s", "pending_timeout_s", "start_timeout_s", "min_runtime_s", "reserve_after_s",
                  "cluster_lost_after_s"):
        if group[field] is not None:
            group[field] = format_duration(group[field])
    group["max_resources_per_user"] = format_resources(group["max_resources_per_user"])
    group["priority_classes"] = ", ".join(f"{c['name']}={c['value']}" + ("" if c["preemptible"] else ":non-preemptible")
                                          for c in group["priority_classes"])
    # As checked: a cluster stored without its name (past `group set`) is named from its address.
    group["clusters"] = _clusters(GroupSpec.model_validate(stored.options()))
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
    print_table([{**row, "clusters": _cluster_names(row["clusters"])} for row in rows],
                ["name", "clusters", "policy", "selector", "pending", "active"])
    return 0


def remove(args: argparse.Namespace) -> int:
    with database() as conn:
        finished = groups.remove_group(conn, args.name)
    print(f"group {args.name} removed, with {finished} finished job(s)")
    return 0
