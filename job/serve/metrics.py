"""The Prometheus metrics of `/metrics`, made from one report (serve/report.py) at scrape time.
Names follow Prometheus' conventions: the `job_` prefix, base units (seconds, ratios), counters
ending in `_total`. Counters come from running totals that never go down (tick_totals,
job_event_totals), so that a daily prune resets none of them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from job.core import states
from job.core.resources import UNIT, Resources
from job.serve.report import Report

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def families(report: Report) -> Iterator[Metric]:
    yield from _jobs(report)
    yield from _users(report)
    yield from _groups(report)
    yield from _ticks(report)
    yield from _events(report)


def _jobs(report: Report) -> Iterator[Metric]:
    pending = GaugeMetricFamily("job_pending_jobs", "Jobs waiting, by group, user, class and waiting reason",
                                labels=["group", "user", "class", "reason"])
    active = GaugeMetricFamily("job_active_jobs", "Jobs submitted to Ray or running, by group, user, class and state",
                               labels=["group", "user", "class", "state"])
    for row in report.counts:
        if row["state"] == states.PENDING:
            pending.add_metric([row["group_name"], row["user_name"], row["class"], row["reason"]], row["jobs"])
        else:
            active.add_metric([row["group_name"], row["user_name"], row["class"], row["state"]], row["jobs"])
    age = GaugeMetricFamily("job_oldest_pending_age_seconds", "Age of the group's oldest pending job (0: none)",
                            labels=["group"])
    for group in report.groups:
        age.add_metric([group["name"]], group["oldest_pending_s"])
    yield from (pending, active, age)


def _users(report: Report) -> Iterator[Metric]:
    # Normalized shares and usage are left to PromQL (x / on(group) group_left sum by (group) (x)):
    # with a thousand users, each series more is a thousand lines per scrape.
    figures = {
        "shares": ("job_user_shares", "The user's shares"),
        "entitlement": ("job_user_entitlement_ratio",
                        "Part of the group the user gets if every user with jobs is busy (0: no jobs)"),
        "usage": ("job_user_usage_dominant_share_seconds", "Fair share's decayed usage"),
        "dominant_share": ("job_user_dominant_share_ratio", "Dominant share held by the user's active jobs now"),
        "score": ("job_user_score", "The policy's score of the user (lowest goes first; drf and fairshare)"),
    }
    made = {key: GaugeMetricFamily(name, text, labels=["group", "user"]) for key, (name, text) in figures.items()}
    # The user's account as an info metric (join with `* on(group, user) group_left(account)`), so
    # that moving a user to another account starts no new series of its figures.
    accounts = GaugeMetricFamily("job_user_account_info", "The user's account ('' for none: the root)",
                                 labels=["group", "user", "account"])
    for group, rows in report.shares.items():
        for row in rows:
            accounts.add_metric([group, row.user, row.account or ""], 1)
            for key, metric in made.items():
                value = getattr(row, key)
                if value is not None:
                    metric.add_metric([group, row.user], value)
    yield from made.values()
    yield accounts
    yield from _accounts(report, figures)


def _accounts(report: Report, figures: dict[str, tuple[str, str]]) -> Iterator[Metric]:
    """The user figures per account, of its subtree (core/share.py AccountShare)."""
    made = {key: GaugeMetricFamily(name.replace("job_user_", "job_account_"), text.replace("user", "account") + " (its subtree)",
                                   labels=["group", "account", "parent"])
            for key, (name, text) in figures.items()}
    for group, rows in report.accounts.items():
        for row in rows:
            for key, metric in made.items():
                value = getattr(row, key)
                if value is not None:
                    metric.add_metric([group, row.account, row.parent or ""], value)
    yield from made.values()


def _groups(report: Report) -> Iterator[Metric]:
    total = GaugeMetricFamily("job_group_resource_total", "The group's alive nodes' resources at its last tick "
                              "(memory in bytes)", labels=["group", "resource"])
    held = GaugeMetricFamily("job_group_resource_held", "Resources held by the group's active jobs",
                             labels=["group", "resource"])
    last = GaugeMetricFamily("job_last_successful_tick_timestamp_seconds",
                             "When the group's last successful tick ended (Unix time)", labels=["group"])
    step = GaugeMetricFamily("job_last_tick_step_seconds", "Each step of the group's last successful tick",
                             labels=["group", "step"])
    drivers = GaugeMetricFamily("job_cluster_active_jobs", "Jobs of the group submitted to or running in each of its "
                                "Ray clusters: the drivers its head holds", labels=["group", "cluster"])
    for (group_name, cluster), count in sorted(report.drivers.items()):
        drivers.add_metric([group_name, cluster], count)
    for group in report.groups:
        name = group["name"]
        for resource, units in sorted(group["totals"].items()):
            total.add_metric([name, resource], units / UNIT)
        used = Resources.total(row.held for row in report.shares.get(name, []))
        for resource, units in sorted(used.items()):
            held.add_metric([name, resource], units / UNIT)
        if group["ticked_at"] is not None:
            last.add_metric([name], group["ticked_at"].timestamp())
            for step_name, seconds in group["tick_steps"].items():
                step.add_metric([name, step_name], seconds)
    yield from (total, held, last, step, drivers)


def _ticks(report: Report) -> Iterator[Metric]:
    ticks = CounterMetricFamily("job_ticks", "Ticks of each group, by outcome (ticked, skipped, failed)",
                                labels=["group", "outcome"])
    seconds = CounterMetricFamily("job_tick_seconds", "Time spent in ticks, by outcome", labels=["group", "outcome"])
    steps = CounterMetricFamily("job_tick_step_seconds", "Time spent in each step of the ticks",
                                labels=["group", "step"])
    by_step: Counter = Counter()
    for row in report.tick_totals:
        if row["step"] == "":
            ticks.add_metric([row["group_name"], row["outcome"]], row["ticks"])
            seconds.add_metric([row["group_name"], row["outcome"]], row["seconds"])
        else:
            by_step[row["group_name"], row["step"]] += row["seconds"]
    for labels, value in sorted(by_step.items()):
        steps.add_metric(list(labels), value)
    yield from (ticks, seconds, steps)


# job_event_totals kind -> (metric, help, the label kept, from the column)
_EVENT_COUNTERS = {
    "queued": ("job_submitted", "Jobs submitted", None),
    "placed": ("job_placements", "Jobs placed on a node by a tick (each attempt)", None),
    "started": ("job_started", "Jobs whose driver Ray started", None),
    "requeued": ("job_requeues", "Jobs sent back to the queue, by reason", "reason"),
    "preempted": ("job_preemptions", "Jobs preempted, by reason", "reason"),
    "finished": ("job_finished", "Jobs finished, by state", "state"),
}


def _events(report: Report) -> Iterator[Metric]:
    made = {kind: CounterMetricFamily(name, text, labels=["group"] + ([label] if label else []))
            for kind, (name, text, label) in _EVENT_COUNTERS.items()}
    counts: Counter = Counter()
    for row in report.event_totals:
        spec = _EVENT_COUNTERS.get(row["kind"])
        if spec is not None:
            counts[row["kind"], row["group_name"], row[spec[2]] if spec[2] else None] += row["count"]
    for (kind, group, label), count in sorted(counts.items(), key=lambda item: tuple(map(str, item[0]))):
        made[kind].add_metric([group] + ([label] if label is not None else []), count)
    yield from made.values()


class _Families(Collector):
    def __init__(self, report: Report):
        self.report = report

    def collect(self) -> Iterator[Metric]:
        return families(self.report)


def exposition(report: Report) -> bytes:
    """The report in Prometheus' text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(report))
    return generate_latest(registry)
