"""Users and accounts as the store reads them for a group (store/users.py users_of_group,
store/accounts.py tree; psycopg's class_row builds them): the rows the reconciliation charges,
the snapshot carries to the planner and the share figures read. The names are the columns'."""

from __future__ import annotations

from dataclasses import dataclass


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
    """An account of the tree, what the planner and the share report need of it."""

    name: str
    # None: a top account, child of the root.
    parent: str | None
    shares: float
    max_running: int | None
    max_resources: dict[str, float] | None
