"""Seeing the queue: `share` (the fair-share report, as Slurm's sshare), `events ID` (a job's
history) and `serve` (Prometheus metrics, health and a status page over HTTP)."""

from __future__ import annotations

import argparse

from job import log
from job.cli.output import format_resources, iso, print_json, print_table
from job.cli.parsing import command, database, job_id
from job.core.accounts import walk
from job.core.errors import BadInput
from job.core.resources import UNIT
from job.core.units import parse_duration
from job.serve.report import read_report
from job.settings import settings
from job.store import events as event_rows
from job.store import jobs as job_rows
from job.store.groups import get_group

DEFAULT_PORT = 9464


def register(sub) -> None:
    p = command(sub, "share", share, json_output=True)
    p.add_argument("--group", help="only this group")

    p = command(sub, "events", job_events, json_output=True)
    p.add_argument("id", metavar="ID")

    p = command(sub, "serve", serve)
    p.add_argument("--port", default=str(DEFAULT_PORT), help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default every address)")
    p.add_argument("--cache", metavar="DURATION", default="5s",
                   help="how long one read of PostgreSQL answers scrapes and page loads (default 5s)")


def _ratio(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


def share_json(row) -> dict:
    return {"group": row.group, "user": row.user, "account": row.account, "shares": row.shares,
            "normalized_shares": row.normalized_shares, "usage": row.usage,
            "normalized_usage": row.normalized_usage, "dominant_share": row.dominant_share, "score": row.score,
            "entitlement": row.entitlement, "running": row.running, "pending": row.pending,
            "held": {name: units / UNIT for name, units in row.held.items()}, "waiting": dict(row.waiting)}


def share(args: argparse.Namespace) -> int:
    with database() as conn:
        if args.group is not None:
            get_group(conn, args.group)
        report = read_report(conn, args.group)
    rows = [row for group in report.groups for row in report.shares[group["name"]]]
    if args.json:
        print_json([share_json(row) for row in rows])
        return 0
    if not rows:
        print("no user has jobs or usage" + (f" in group {args.group}" if args.group else ""))
        return 0
    columns = ["shares", "norm_shares", "usage", "norm_usage", "dominant", "score", "entitled", "running", "pending",
               "waiting"]
    if not report.accounts:
        print_table([_figures(row, row.user) for row in rows], ["group", "user", *columns])
        return 0
    print_table([line for group in report.groups for line in _tree_lines(report, group["name"])],
                ["group", "account/user", *columns])
    return 0


def _tree_lines(report, group: str) -> list[dict]:
    """The group's accounts and users as a tree: an account (`name/`) followed by its subtree."""
    users = {row.user: row for row in report.shares[group]}
    teams = {row.account: row for row in report.accounts.get(group, [])}
    placed = walk({name: row.parent for name, row in teams.items()}, {name: row.account for name, row in users.items()})
    return [_figures(teams[name] if kind == "account" else users[name], "  " * depth + name + ("/" if kind == "account" else ""))
            for depth, name, kind in placed]


def _figures(row, name: str) -> dict:
    """One line of `share`: a user's figures, or an account's (of its subtree)."""
    waiting = getattr(row, "waiting", None)
    return {"group": row.group, "user": name, "account/user": name, "shares": row.shares,
            "norm_shares": _ratio(row.normalized_shares), "usage": f"{row.usage:.1f}",
            "norm_usage": _ratio(row.normalized_usage), "dominant": _ratio(row.dominant_share), "score": _ratio(row.score),
            "entitled": _ratio(row.entitlement), "running": row.running, "pending": row.pending,
            "waiting": None if waiting is None else ",".join(f"{reason}={count}" for reason, count in sorted(waiting.items()))}


def event_json(row: dict) -> dict:
    return {"at": iso(row["at"]), "kind": row["kind"], "from_state": row["from_state"], "state": row["state"],
            "reason": row["reason"], "message": row["message"], "node": row["node"], "attempt": row["attempt"],
            "details": row["details"]}


def describe_event(row: dict) -> str:
    """The event for people: its message, and at a placement the figures that put the job first."""
    text = row["message"] or ""
    details = row["details"]
    if row["kind"] == "placed" and details:
        if "score" in details:
            why = (f"{details['policy']}: score {details['score']:.4g} (shares {details['shares']:g}, "
                   f"usage {details['usage']:g}, dominant share {details['dominant_share']:.4g}), lowest first")
        else:
            why = f"{details['policy']}: priority {details['priority']}, submitted {details['submitted_at']}"
        for level in details.get("accounts", ()):
            why += f"; account {level['account']}: score {level['score']:.4g} (shares {level['shares']:g})"
        if details.get("class"):
            why = f"class {details['class']}, {why}"
        if details.get("bundle_nodes"):
            why = f"bundles on nodes {', '.join(details['bundle_nodes'])}; {why}"
        text = f"{text}; {why}" if text else why
    elif row["kind"] == "victim" and details:
        text = f"chosen to be stopped to make room for job {details['for_job']}"
    return text or "-"


def job_events(args: argparse.Namespace) -> int:
    ident = job_id(args.id)
    with database() as conn:
        job = job_rows.get_job(conn, ident)
        rows = event_rows.events_of(conn, ident)
    if args.json:
        print_json({"job": ident, "events": [event_json(row) for row in rows]})
        return 0
    print(f"job {ident}: {job.user_name} in {job.group_name}, {format_resources(job.resources)}, now {job.state}")
    # Ray's node ids are 56 hex digits: the first 12 tell them apart (--json has them whole).
    # `after`: since the event before, so that the way from queued to started reads as its steps.
    print_table([{**row, "state": (f"{row['from_state']}>{row['state']}" if row["from_state"] not in (None, row["state"])
                                   else row["state"]), "node": row["node"] and row["node"][:12],
                  "after": None if index == 0 else f"+{(row['at'] - rows[index - 1]['at']).total_seconds():.2f}s",
                  "what": describe_event(row)} for index, row in enumerate(rows)],
                ["at", "after", "kind", "state", "reason", "node", "attempt", "what"])
    return 0


def serve(args: argparse.Namespace) -> int:
    # The HTTP server and prometheus-client are for this long-lived command only: every short-lived
    # `tick` process would otherwise import them at its start.
    from job.serve.server import Source, make_server

    if not args.port.isdigit() or not 1 <= int(args.port) <= 65535:
        raise BadInput(f"--port: expected a TCP port from 1 to 65535, got {args.port!r}")
    try:
        max_age = parse_duration(args.cache)
    except ValueError as exc:
        raise BadInput(f"--cache: {exc}") from None
    source = Source(settings().require_reader_url(), max_age)
    source.ping()  # a wrong URL or an old schema is said now, not at the first scrape
    try:
        server = make_server(source, args.host, int(args.port))
    except OSError as exc:
        raise BadInput(f"--port: cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    log.event("serving", host=args.host, port=int(args.port), role=source.role, cache_s=max_age)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        source.close()
    return 0
