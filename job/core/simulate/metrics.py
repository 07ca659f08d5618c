"""The figures of one simulation: waits, completion, use of the cluster, and fairness.

Fairness compares what each user received with what it was entitled to, per time window. What a
user received in a window is its dominant share (what it held, over the group's totals, on its
busiest resource) averaged over the window. Its entitlement is its weighted max-min fair part of
what all users received together: shares in proportion to its `shares`, but never more than it
asked for (the dominant share of its running and waiting jobs together, at most 1, averaged over
the window), the rest going to the others. So a user that asks for little is not counted as wronged, and
a cluster that cannot be packed full wrongs nobody. Jain's index of the ratios
received/entitlement is 1 when every active user got its entitlement, and 1/n when one user got
everything. Overall, the ratio is of the sums over the windows, each weighted by its length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from job.core.accounts import entitlements
from job.core.planner.snapshot import Account, account_path
from job.core.simulate.engine import Outcome, UserRecord

# Bounded slowdown's floor on the run time: a job of a few seconds that waited a minute is not
# slowed down a hundredfold in any sense that matters (Feitelson's bounded slowdown).
SLOWDOWN_BOUND_S = 10.0


@dataclass(slots=True)
class Windows:
    """Per window: its start, its length, and per user what it received and was entitled to."""

    starts: list[float]
    lengths: list[float]
    received: dict[str, list[float]]
    entitled: dict[str, list[float]]


def percentile(values: list[float], fraction: float) -> float | None:
    """Linear interpolation between the closest ranks of the sorted values."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def jain(values: list[float]) -> float | None:
    """(Σx)² / (n·Σx²): 1 when all are equal, 1/n when one has everything."""
    squares = sum(value * value for value in values)
    if not values or squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


def water_fill(capacity: float, caps: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Weighted max-min fair parts of `capacity`: each user gets level·weight, at most its cap."""
    parts = {}
    left, weight = capacity, sum(weights[user] for user in caps)
    for user in sorted(caps, key=lambda name: caps[name] / weights[name]):
        level = left / weight if weight > 0 else 0.0
        parts[user] = min(caps[user], level * weights[user])
        left -= parts[user]
        weight -= weights[user]
    return parts


def windows(outcome: Outcome, window_s: float) -> Windows:
    """The windows of `window_s` from the first submission to the last tick."""
    if window_s <= 0:
        raise ValueError("window_s must be above zero")
    start_s = min((record.submit_s for record in outcome.records), default=0.0)
    end_s = max(outcome.end_s, start_s)
    count = max(1, -int(-(end_s - start_s) // window_s))
    starts = [start_s + index * window_s for index in range(count)]
    lengths = [min(window_s, end_s - start) or window_s for start in starts]
    received: dict[str, list[float]] = {}
    asked: dict[str, list[float]] = {}
    for user in outcome.users.values():
        received[user.name], asked[user.name] = _integrate(user, starts, lengths, window_s, start_s, end_s)
    entitled = {name: [0.0] * count for name in received}
    weights = {user.name: user.spec.shares for user in outcome.users.values()}
    for index in range(count):
        caps = {name: asked[name][index] for name in received if asked[name][index] > 0}
        parts = water_fill(sum(received[name][index] for name in received), caps, weights)
        for name, part in parts.items():
            entitled[name][index] = part
    return Windows(starts=starts, lengths=lengths, received=received, entitled=entitled)


def _integrate(user: UserRecord, starts: list[float], lengths: list[float], window_s: float, start_s: float,
               end_s: float) -> tuple[list[float], list[float]]:
    """The user's mean dominant share held per window, and the mean it asked for (at most 1)."""
    held = [0.0] * len(starts)
    asked = [0.0] * len(starts)
    points = user.timeline
    for index, (moment, share, wanted) in enumerate(points):
        until = points[index + 1][0] if index + 1 < len(points) else end_s
        first = min(int((moment - start_s) // window_s), len(starts) - 1)
        window = first
        while window < len(starts) and (window == first or starts[window] < until):
            begin = max(moment, starts[window])
            finish = min(until, starts[window] + window_s)
            if finish > begin:
                held[window] += share * (finish - begin)
                asked[window] += min(wanted, 1.0) * (finish - begin)
            window += 1
    return ([amount / length for amount, length in zip(held, lengths, strict=False)],
            [amount / length for amount, length in zip(asked, lengths, strict=False)])


def summarise(outcome: Outcome, shares: Windows) -> dict:
    """The figures, given the outcome's windows (`windows`)."""
    records = outcome.records
    # The jobs that started, with their last run's start and end (a run has both: engine._run).
    started = [(record, record.start_s, record.end_s) for record in records
               if record.start_s is not None and record.end_s is not None]
    submits = [record.submit_s for record in records]
    first = min(submits, default=0.0)
    waits = [start - record.submit_s for record, start, _ in started]
    completions = [end - record.submit_s for record, _, end in started]
    slowdowns = [max(1.0, (end - record.submit_s) / max(record.job.run_s, SLOWDOWN_BOUND_S))
                 for record, _, end in started]
    last = max((end for _, _, end in started), default=first)
    makespan = last - first
    utilization = {}
    for name, total in outcome.totals.items():
        work = sum(record.need.get(name, 0) * record.job.run_s for record, _, _ in started)
        utilization[name] = work / (total * makespan) if total > 0 and makespan > 0 else 0.0
    return {
        "jobs": len(records),
        "started": len(started),
        "unschedulable": sum(record.unschedulable for record in records),
        "never_started": sum(record.start_s is None and not record.unschedulable and record.state is None
                             for record in records),
        # Ended FAILED, never started: a job it waited for ended otherwise than it asked.
        "dependency_failed": sum(record.failed_on is not None for record in records),
        "wait_mean_s": _mean(waits),
        "wait_p50_s": percentile(waits, 0.5),
        "wait_p95_s": percentile(waits, 0.95),
        "completion_mean_s": _mean(completions),
        "bounded_slowdown_mean": _mean(slowdowns),
        "makespan_s": makespan,
        "utilization": utilization,
        **_fairness(shares),
        "preemptions": sum(len(record.stopped) for record in records),
        # A run with no start is a forecast's job stopped before Ray started it: none here.
        "lost_run_s": sum(stop - start for record in records for _, start, stop in record.stopped if start is not None),
        "ticks": outcome.ticks,
        "plans": outcome.plans,
        "events": outcome.events,
    }


def _fairness(shares: Windows) -> dict:
    """Jain's index of the users' received over entitled, over the whole run and per window, and
    the gaps between the two."""
    deviations: list[float] = []
    per_window: list[float | None] = []
    received_sum: dict[str, float] = {}
    entitled_sum: dict[str, float] = {}
    for index, length in enumerate(shares.lengths):
        window_ratios = []
        for name, entitled in shares.entitled.items():
            part, got = entitled[index], shares.received[name][index]
            if part <= 0:
                continue
            window_ratios.append(got / part)
            deviations.append(abs(got - part))
            received_sum[name] = received_sum.get(name, 0.0) + got * length
            entitled_sum[name] = entitled_sum.get(name, 0.0) + part * length
        per_window.append(jain(window_ratios))
    ratios = [received_sum[name] / entitled_sum[name] for name in entitled_sum]
    measured = [value for value in per_window if value is not None]
    return {"jain": jain(ratios), "jain_window_mean": _mean(measured), "jain_windows": per_window,
            "deviation_max": max(deviations, default=None), "deviation_mean": _mean(deviations)}


def tree_figures(outcome: Outcome, accounts: dict[str, Account]) -> dict:
    """Per user and per account, over the whole span (the first submission to the end, or to
    `--until`): `received`, its part of the dominant-resource time delivered (an account's, its
    users' together); `entitled`, its part down the tree among those with jobs in the span
    (core/accounts.py); `wait_mean_s`, the mean wait of its jobs started in the span (None: none
    started). A user's figures name its account (None: the root)."""
    start_s = min((record.submit_s for record in outcome.records), default=0.0)
    length = max(outcome.end_s - start_s, 0.0)
    held = {name: _integrate(user, [start_s], [length or 1.0], length or 1.0, start_s, outcome.end_s)[0][0]
            for name, user in outcome.users.items()}
    delivered = sum(held.values())
    waits: dict[str, list[float]] = {}
    for record in outcome.records:
        if record.start_s is not None:
            waits.setdefault(record.job.user, []).append(record.start_s - record.submit_s)
    users = {name: (user.spec.account, user.spec.shares) for name, user in outcome.users.items()}
    user_parts, account_parts = entitlements({name: (a.parent, a.shares) for name, a in accounts.items()}, users,
                                             outcome.users)
    people: dict[str, dict[str, Any]] = {
        name: {"account": users[name][0], "received": held[name] / delivered if delivered else 0.0,
               "entitled": user_parts[name], "wait_mean_s": _mean(waits.get(name, []))}
        for name in sorted(outcome.users)}
    teams = {}
    for name in sorted(accounts):
        below = [user for user in people if name in account_path(accounts, users[user][0])]
        teams[name] = {"parent": accounts[name].parent, "received": sum(people[user]["received"] for user in below),
                       "entitled": account_parts[name],
                       "wait_mean_s": _mean([wait for user in below for wait in waits.get(user, [])])}
    return {"users": people, "accounts": teams}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None

