"""Statements on accounts (teams above users: sql/0017_accounts.sql)."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, TypeVar

import psycopg
from psycopg.rows import class_row

from job.core.errors import BadInput, Conflict, NotFound
from job.core.members import AccountRow, ListedAccount
from job.store import DictConnection, one
from job.store.params import json_param

if TYPE_CHECKING:
    from job.core.specs import AccountSpec


def _columns(spec: AccountSpec) -> tuple[str, ...]:
    """The spec's fields, from the spec given: pydantic's models are for a write, not for `account list`."""
    return tuple(type(spec).model_fields)


def _unknown_parent(spec: AccountSpec) -> NotFound:
    return NotFound(f"parent: account {spec.parent!r} does not exist (add it with `python -m job account add {spec.parent}`)")


def insert_account(conn: DictConnection, spec: AccountSpec) -> None:
    values, columns = spec.model_dump(), _columns(spec)
    try:
        conn.execute(f"INSERT INTO accounts ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                     [json_param(column, values[column]) for column in columns])
    except psycopg.errors.UniqueViolation:
        conn.rollback()
        raise Conflict(f"account {spec.name!r} already exists (change it with `python -m job account set {spec.name}`)") from None
    except psycopg.errors.ForeignKeyViolation:
        conn.rollback()
        raise _unknown_parent(spec) from None


def update_account(conn: DictConnection, spec: AccountSpec) -> None:
    """Write the account's fields; a parent below it is refused by the table's trigger (a cycle)."""
    values = spec.model_dump()
    updates = [column for column in _columns(spec) if column != "name"]
    try:
        conn.execute(f"UPDATE accounts SET {', '.join(f'{c} = %s' for c in updates)}, updated_at = now() WHERE name = %s",
                     [*(json_param(column, values[column]) for column in updates), spec.name])
    except psycopg.errors.ForeignKeyViolation:
        conn.rollback()
        raise _unknown_parent(spec) from None
    except psycopg.errors.CheckViolation as exc:
        conn.rollback()
        if exc.diag.constraint_name != "accounts_no_cycle":
            raise
        raise BadInput(f"parent: {exc.diag.message_primary}") from None


_Account = TypeVar("_Account", bound=AccountRow)


def _rows(conn: DictConnection, kind: type[_Account]) -> psycopg.Cursor[_Account]:
    return conn.cursor(row_factory=class_row(kind))


def _selected(alias: str = "") -> str:
    return ", ".join(alias + field.name for field in fields(AccountRow))


def get_account(conn: DictConnection, name: str, *, for_update: bool = False) -> AccountRow:
    row = _rows(conn, AccountRow).execute(
        f"SELECT {_selected()} FROM accounts WHERE name = %s" + (" FOR UPDATE" if for_update else ""), (name,)).fetchone()
    if row is None:
        raise NotFound(f"account {name!r} does not exist (see `python -m job account list`)")
    return row


def list_accounts(conn: DictConnection) -> list[ListedAccount]:
    """Every account, with its users and child accounts by name."""
    return _rows(conn, ListedAccount).execute(
        f"""SELECT {_selected("a.")},
                  coalesce((SELECT array_agg(u.name ORDER BY u.name) FROM users u WHERE u.account = a.name), '{{}}') AS users,
                  coalesce((SELECT array_agg(c.name ORDER BY c.name) FROM accounts c WHERE c.parent = a.name), '{{}}') AS children
           FROM accounts a ORDER BY a.name""").fetchall()


def tree(conn: DictConnection) -> list[AccountRow]:
    """What the planner needs of every account (a tick reads it once per group)."""
    return _rows(conn, AccountRow).execute(f"SELECT {_selected()} FROM accounts ORDER BY name").fetchall()


def remove_account(conn: DictConnection, name: str) -> None:
    """Remove an account without users or child accounts."""
    get_account(conn, name, for_update=True)
    row = one(conn.execute("""SELECT (SELECT count(*) FROM users WHERE account = %(name)s) AS users,
                                     (SELECT count(*) FROM accounts WHERE parent = %(name)s) AS children""",
                           {"name": name}))
    if row["users"] or row["children"]:
        raise Conflict(f"account {name!r} has {row['users']} user(s) and {row['children']} child account(s):"
                       " move them to another account first")
    try:
        conn.execute("DELETE FROM accounts WHERE name = %s", (name,))
    except psycopg.errors.ForeignKeyViolation:
        # A user or a child account came in since the count.
        conn.rollback()
        raise Conflict(f"account {name!r} has users or child accounts: move them to another account first") from None
