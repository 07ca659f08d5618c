"""The commands on users: user set, show, list. A user's spec (job.core.specs, pydantic's models) is
imported where a user is written: the rows shown are core/members.py's."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from job.cli.output import format_resources, iso, print_fields, print_json, print_table
from job.cli.parsing import command, database, pairs, parser_of
from job.core.errors import NotFound
from job.core.members import UserRow, settings_of
from job.store import users


def register(sub) -> None:
    user = parser_of(sub, "user")
    actions = user.add_subparsers(dest="user_command", metavar="ACTION", required=True)
    p = command(actions, "set", user_set, "create or change a user")
    p.add_argument("name")
    p.add_argument("--shares", help="weight in fair share (default 1)")
    p.add_argument("--max-running", metavar="N", help="at most N running jobs of this user per group")
    p.add_argument("--max-resources", action="append", metavar="NAME=AMOUNT", help="resource cap per group (repeatable)")
    team = p.add_mutually_exclusive_group()
    team.add_argument("--account", metavar="NAME", help="the user's account (team); default: none, the root")
    team.add_argument("--no-account", action="store_true", help="take the user out of its account, to the root")
    command(actions, "show", user_show, "one user, with usage per group", json_output=True).add_argument("name")
    command(actions, "list", user_list, "every user", json_output=True)


def user_set(args: argparse.Namespace) -> int:
    from job.core.specs import UserSpec, validated

    with database() as conn:
        current = users.get_user(conn, args.name)
        fields = settings_of(current) if current else {}
        fields["name"] = args.name
        for option, field in (("shares", "shares"), ("max_running", "max_running"), ("account", "account")):
            if getattr(args, option) is not None:
                fields[field] = getattr(args, option)
        if args.no_account:
            fields["account"] = None
        if args.max_resources is not None:
            fields["max_resources"] = pairs(args.max_resources, "--max-resources")
        spec = validated(UserSpec, fields)
        users.upsert_user(conn, spec)
    print(f"user {spec.name} {'updated' if current else 'added'}: shares={spec.shares:g} account={spec.account or '-'}")
    return 0


def _user_json(user: UserRow) -> dict:
    return {**settings_of(user), "created_at": iso(user.created_at), "updated_at": iso(user.updated_at)}


def user_show(args: argparse.Namespace) -> int:
    with database() as conn:
        row = users.get_user(conn, args.name)
        if row is None:
            raise NotFound(f"user {args.name!r} does not exist (add it with `python -m job user set {args.name}`)")
        usage = users.user_usage(conn, args.name)
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
    with database() as conn:
        rows = users.list_users(conn)
    if args.json:
        print_json([{**_user_json(user), "pending": user.pending, "active": user.active} for user in rows])
        return 0
    print_table(map(asdict, rows), ["name", "account", "shares", "max_running", "pending", "active"])
    return 0
