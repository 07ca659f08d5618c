"""The commands on accounts (teams above users): account add, set, show, list, remove. An account's
spec (job.core.specs, pydantic's models) is imported where an account is written: the rows shown
are core/members.py's."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING

from job.cli.output import format_resources, iso, print_fields, print_json, print_table
from job.cli.parsing import command, database, pairs, parser_of
from job.core.accounts import walk
from job.core.members import AccountRow, ListedAccount, settings_of
from job.store import accounts

if TYPE_CHECKING:
    from job.core.specs import AccountSpec


def register(sub) -> None:
    account = parser_of(sub, "account", description="manage accounts: teams that share a group first, then among their users")
    actions = account.add_subparsers(dest="account_command", metavar="ACTION", required=True)
    _options(command(actions, "add", add, "add an account"), adding=True)
    _options(command(actions, "set", update, "change an account"), adding=False)
    command(actions, "show", show, "one account, with its users and child accounts", json_output=True).add_argument("name")
    command(actions, "list", list_accounts, "every account, as a tree", json_output=True)
    command(actions, "remove", remove, "remove an account without users or child accounts").add_argument("name")


def _options(parser: argparse.ArgumentParser, adding: bool) -> None:
    parser.add_argument("name", help="account name")
    parent = parser.add_mutually_exclusive_group()
    parent.add_argument("--parent", metavar="NAME", help="the parent account (default: none, a top account)")
    if not adding:
        parent.add_argument("--no-parent", action="store_true", help="make it a top account")
    parser.add_argument("--shares", metavar="N", help="weight among its siblings (default 1)")
    parser.add_argument("--max-running", metavar="N", help="at most N running jobs of its users together, per group")
    parser.add_argument("--max-resources", action="append", metavar="NAME=AMOUNT",
                        help="at most this much held by its users together, per group (repeatable)")


def _fields(args: argparse.Namespace, current: AccountRow | None) -> dict:
    fields = settings_of(current) if current else {}
    fields["name"] = args.name
    for option in ("parent", "shares", "max_running"):
        if getattr(args, option) is not None:
            fields[option] = getattr(args, option)
    if getattr(args, "no_parent", False):
        fields["parent"] = None
    if args.max_resources is not None:
        fields["max_resources"] = pairs(args.max_resources, "--max-resources")
    return fields


def _said(spec: AccountSpec) -> str:
    return f"parent={spec.parent or '-'} shares={spec.shares:g}"


def add(args: argparse.Namespace) -> int:
    from job.core.specs import AccountSpec, validated

    spec = validated(AccountSpec, _fields(args, None))
    with database() as conn:
        accounts.insert_account(conn, spec)
    print(f"account {spec.name} added: {_said(spec)}")
    return 0


def update(args: argparse.Namespace) -> int:
    from job.core.specs import AccountSpec, validated

    with database() as conn:
        spec = validated(AccountSpec, _fields(args, accounts.get_account(conn, args.name, for_update=True)))
        accounts.update_account(conn, spec)
    print(f"account {spec.name} updated: {_said(spec)}")
    return 0


def _account_json(account: ListedAccount) -> dict:
    return {**settings_of(account), "users": account.users, "children": account.children,
            "created_at": iso(account.created_at), "updated_at": iso(account.updated_at)}


def show(args: argparse.Namespace) -> int:
    with database() as conn:
        accounts.get_account(conn, args.name)
        row = next(row for row in accounts.list_accounts(conn) if row.name == args.name)
    account = _account_json(row)
    if args.json:
        print_json(account)
        return 0
    account["max_resources"] = format_resources(account["max_resources"])
    print_fields(account)
    return 0


def list_accounts(args: argparse.Namespace) -> int:
    with database() as conn:
        rows = {row.name: row for row in accounts.list_accounts(conn)}
    ordered = [(depth, rows[name]) for depth, name, _ in walk({name: row.parent for name, row in rows.items()})]
    if args.json:
        print_json([_account_json(row) for _, row in ordered])
        return 0
    print_table([{**asdict(row), "account": "  " * depth + row.name, "max_resources": format_resources(row.max_resources)}
                 for depth, row in ordered], ["account", "shares", "max_running", "max_resources", "users"])
    return 0


def remove(args: argparse.Namespace) -> int:
    with database() as conn:
        accounts.remove_account(conn, args.name)
    print(f"account {args.name} removed")
    return 0
