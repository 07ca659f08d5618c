"""Users and accounts as the store reads them (store/users.py, store/accounts.py; psycopg's
class_row builds them): the rows people's commands show (`UserRow`, `AccountRow`: every column),
and a group's users as its tick reads them (`Member`), which the reconciliation charges, the
snapshot carries to the planner and the share figures read. The names are the columns'."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime


@dataclass(frozen=True, slots=True)
class UserRow:
    """Every column of `users`."""

    name: str
    shares: float
    max_running: int | None
    max_resources: dict[str, float] | None
    # Its account (team); None: the root.
    account: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ListedUser(UserRow):
    """A user as `user list` shows it: with its jobs pending and active."""

    pending: int
    active: int


@dataclass(frozen=True, slots=True)
class Member:
    """A user with jobs waiting or active in a group, or usage there."""

    name: str
    shares: float
    max_running: int | None
    max_resources: dict[str, float] | None
    # Its account (team); None: the root.
    account: str | None
    # Its decayed usage in the group, as last charged.
    usage: float


@dataclass(frozen=True, slots=True)
class AccountRow:
    """Every column of `accounts`: an account of the tree, as a tick, the share report and
    `account show` read it."""

    name: str
    # None: a top account, child of the root.
    parent: str | None
    shares: float
    max_running: int | None
    max_resources: dict[str, float] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ListedAccount(AccountRow):
    """An account as `account list` and `account show` show it: with its users and child accounts by name."""

    users: list[str]
    children: list[str]


def settings_of(row: UserRow | AccountRow) -> dict:
    """What a person sets of a user or an account (its columns but their times), in the table's
    order: what `user show` and `account show` print first, and what a `set` starts from."""
    base = UserRow if isinstance(row, UserRow) else AccountRow
    return {field.name: getattr(row, field.name) for field in fields(base) if field.name not in ("created_at", "updated_at")}
