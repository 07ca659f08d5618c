"""The commands on resource groups and users."""

from __future__ import annotations

import argparse

from job import db, store
from job.errors import NotFound
from job.output import format_resources, iso, print_fields, print_json, print_table
from job.specs import GroupSpec, UserSpec, pairs, validated
from job.units import format_duration

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


def add(args: argparse.Namespace) -> int:
    spec = validated(GroupSpec, {"name": args.name, **_group_fields(args)})
    with db.session() as conn:
        store.insert_group(conn, spec)
    print(f"group {spec.name} added: policy={spec.policy} selector={spec.selector} ray_address={spec.ray_address}")
    return 0


def update(args: argparse.Namespace) -> int:
    with db.session() as conn:
        current = store.get_group(conn, args.name, for_update=True)
        spec = validated(GroupSpec, {**{field: current[field] for field in GroupSpec.model_fields}, **_group_fields(args)})
        store.update_group(conn, spec)
    print(f"group {spec.name} updated: policy={spec.policy} selector={spec.selector} ray_address={spec.ray_address}")
    return 0


def _group_json(row: dict) -> dict:
    return {**{field: row[field] for field in GroupSpec.model_fields},
            "usage_charged_at": iso(row["usage_charged_at"]), "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"])}


def show(args: argparse.Namespace) -> int:
    with db.session() as conn:
        row = store.get_group(conn, args.name)
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
    with db.session() as conn:
        rows = store.list_groups(conn)
    if args.json:
        print_json([{**_group_json(row), "pending": row["pending"], "active": row["active"]} for row in rows])
        return 0
    print_table(rows, ["name", "ray_address", "policy", "selector", "pending", "active"])
    return 0


def remove(args: argparse.Namespace) -> int:
    with db.session() as conn:
        finished = store.remove_group(conn, args.name)
    print(f"group {args.name} removed, with {finished} finished job(s)")
    return 0


def user_set(args: argparse.Namespace) -> int:
    with db.session() as conn:
        current = store.get_user(conn, args.name) or {}
        fields = {field: current[field] for field in UserSpec.model_fields if field in current}
        fields["name"] = args.name
        for option, field in (("shares", "shares"), ("max_running", "max_running")):
            if getattr(args, option) is not None:
                fields[field] = getattr(args, option)
        if args.max_resources is not None:
            fields["max_resources"] = pairs(args.max_resources, "--max-resources")
        spec = validated(UserSpec, fields)
        store.upsert_user(conn, spec)
    print(f"user {spec.name} {'updated' if current else 'added'}: shares={spec.shares:g}")
    return 0


def _user_json(row: dict) -> dict:
    return {**{field: row[field] for field in UserSpec.model_fields},
            "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"])}


def user_show(args: argparse.Namespace) -> int:
    with db.session() as conn:
        row = store.get_user(conn, args.name)
        if row is None:
            raise NotFound(f"user {args.name!r} does not exist (add it with `python -m job user set {args.name}`)")
        usage = store.user_usage(conn, args.name)
    user = {**_user_json(row), "groups": usage}
    if args.json:
        print_json(user)
        return 0
    user.pop("groups")
    user["max_resources"] = format_resources(user["max_resources"])
    print_fields(user)
    if usage:
        print()
        print_table(usage, ["group", "usage", "pending", "active", "finished"])
    return 0


def user_list(args: argparse.Namespace) -> int:
    with db.session() as conn:
        rows = store.list_users(conn)
    if args.json:
        print_json([{**_user_json(row), "pending": row["pending"], "active": row["active"]} for row in rows])
        return 0
    print_table(rows, ["name", "shares", "max_running", "pending", "active"])
    return 0
