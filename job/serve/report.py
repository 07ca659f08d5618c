"""The report the share command, the metrics and the status page are made from: a few aggregate
reads (job/store/reports.py), then the pure fair-share figures (job/core/share.py)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from job.core import states
from job.core.arrays import ArraySummary
from job.core.job_row import row_problem
from job.core.share import AccountShare, UserShare, account_shares, group_shares, totals_of
from job.store import DictConnection, reports
from job.store import accounts as account_rows
from job.store import jobs as job_rows


@dataclass
class Report:
    groups: list[dict]
    # Group name -> its users' figures.
    shares: dict[str, list[UserShare]]
    # Unfinished jobs per group, user, class, state and reason (job/store/reports.py job_counts).
    counts: list[dict]
    tick_totals: list[dict] = field(default_factory=list)
    event_totals: list[dict] = field(default_factory=list)
    # The first pending jobs of each group, for the status page.
    queue: list[dict] = field(default_factory=list)
    # Group name -> the accounts above its users, in the tree's order (none without accounts).
    accounts: dict[str, list[AccountShare]] = field(default_factory=dict)
    # (group, cluster) -> its active jobs: the drivers each cluster's head holds.
    drivers: Counter = field(default_factory=Counter)
    # The arrays of the jobs in `queue`, by id: the status page shows each on one line.
    arrays: dict[int, ArraySummary] = field(default_factory=dict)


def read_report(conn: DictConnection, group: str | None = None, *, totals: bool = False,
                queue: int = 0) -> Report:
    """The groups (one, or all), their users' shares, pending and active jobs; with `totals` the
    ticks' and events' running totals; with `queue` that many pending jobs per group."""
    chosen = reports.groups(conn, group)
    users = reports.users(conn)
    counts = reports.job_counts(conn, group)
    default_class = {row["name"]: row["default_class"] for row in chosen}
    for row in counts:
        row["class"] = row["class"] or default_class.get(row["group_name"], "")
    active = reports.active_jobs(conn, group)
    shares = {user["name"]: user["shares"] for user in users}
    member_of = {user["name"]: user["account"] for user in users}
    tree = {account.name: (account.parent, account.shares) for account in account_rows.tree(conn)}
    pending_of: dict[str, list] = defaultdict(list)
    for row in counts:
        if row["state"] == states.PENDING:
            pending_of[row["group_name"]].append((row["user_name"], row["reason"], row["jobs"]))
    active_of: dict[str, list] = defaultdict(list)
    for row in active:
        # A row written past the CLI with a malformed request counts as running, holding nothing known.
        held = row if row_problem(row) is None else {**row, "resources": {}, "bundles": None}
        active_of[row["group_name"]].append((row["user_name"], held))
    by_group, teams = {}, {}
    for row in chosen:
        row["totals"] = totals_of(row["nodes"])
        usage = {user["name"]: user["usage"][row["name"]] for user in users if row["name"] in user["usage"]}
        by_group[row["name"]] = group_shares(row, shares, usage, pending_of[row["name"]], active_of[row["name"]],
                                             row["totals"], member_of, tree)
        if tree:
            teams[row["name"]] = account_shares(row, by_group[row["name"]], tree, row["totals"])
    head = reports.queue_head(conn, queue) if queue else []
    arrays = sorted({row["array_id"] for row in head if row["array_id"] is not None})
    return Report(chosen, by_group, counts,
                  reports.tick_totals(conn) if totals else [], reports.event_totals(conn) if totals else [],
                  # A group's clusters written past the CLI may name none: its jobs' cluster is ''.
                  head, teams, Counter((row["group_name"], row["cluster"] or "") for row in active),
                  job_rows.array_summaries(conn, arrays) if arrays else {})
