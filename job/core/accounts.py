"""The account tree as people read it: depth first from the root, children by name. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def walk(parents: Mapping[str, str | None], members: Mapping[str, str | None] | None = None) -> list[tuple[int, str, str]]:
    """The tree depth first as (depth, name, kind), kind "account" or "user", depth 0 for the
    root's children: under each parent its accounts by name, each followed by its subtree, then
    its users by name. `parents`: every account's parent (None: the root); `members`: users'
    accounts (None: the root). A parent or account not among `parents` counts as the root, so a
    partial read still shows everything once."""
    children: dict[str | None, list[tuple[str, str]]] = {}
    for name, parent in parents.items():
        children.setdefault(parent if parent in parents else None, []).append(("account", name))
    for name, account in (members or {}).items():
        children.setdefault(account if account in parents else None, []).append(("user", name))
    found: list[tuple[int, str, str]] = []
    stack = [(0, *child) for child in sorted(children.get(None, ()), reverse=True)]
    while stack:
        depth, kind, name = stack.pop()
        found.append((depth, name, kind))
        if kind == "account":
            stack.extend((depth + 1, *child) for child in sorted(children.get(name, ()), reverse=True))
    return found


def entitlements(accounts: Mapping[str, tuple[str | None, float]], users: Mapping[str, tuple[str | None, float]],
                 active: Iterable[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Each user's and each account's entitlement down the tree: the part of the group it would
    get if every user with work were busy. At each level its shares over the sum of its active
    siblings' shares (users and accounts under one parent), times its parent's part (the root's
    is 1); 0 for those without work below them. `accounts`: name -> (parent, shares); `users`:
    name -> (account, shares) for every user named in `active` and any other."""
    busy = set(active)
    busy_accounts: set[str] = set()
    for user in busy:
        account = users[user][0]
        while account is not None and account not in busy_accounts:
            busy_accounts.add(account)
            account = accounts[account][0]
    totals: dict[str | None, float] = {}
    for name in busy:
        parent, shares = users[name]
        totals[parent] = totals.get(parent, 0.0) + shares
    for name in busy_accounts:
        parent, shares = accounts[name]
        totals[parent] = totals.get(parent, 0.0) + shares
    parts: dict[str, float] = {}

    def part(account: str | None) -> float:
        if account is None:
            return 1.0
        if account not in parts:
            parent, shares = accounts[account]
            parts[account] = part(parent) * shares / totals[parent] if account in busy_accounts else 0.0
        return parts[account]

    for name in accounts:
        part(name)
    return ({name: part(parent) * shares / totals[parent] if name in busy else 0.0 for name, (parent, shares) in users.items()},
            parts)
