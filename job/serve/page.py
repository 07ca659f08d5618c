"""The status page at `/`: server-rendered HTML, no script. Per group its nodes' use, each user's
share of the group against its entitlement (an inline SVG bar chart), and the head of the pending
queue. It reloads itself every REFRESH_S seconds and fits a phone's width."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from job.core.arrays import ArraySummary
from job.core.job_row import row_problem
from job.core.resources import Resources, describe, footprint
from job.core.share import AccountShare, UserShare
from job.core.units import format_duration, time_of_day
from job.serve.report import Report

REFRESH_S = 15
# Users drawn per group, the busiest first; the rest are counted.
CHART_USERS = 30
# A waiting message longer than this is cut on the page (whole in its tooltip and in `show`).
MESSAGE_SHOWN = 90

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:.5rem 1rem;color:#222}
h1{font-size:1.3rem}h2{font-size:1.1rem;border-bottom:1px solid #ccc;margin-top:1.5rem}
table{border-collapse:collapse;width:100%;font-size:.85rem}td,th{text-align:left;padding:.2rem .4rem;
border-bottom:1px solid #eee}th{background:#f4f4f4}.scroll{overflow-x:auto}.muted{color:#777}
.legend span{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 .8rem;vertical-align:middle}
svg{max-width:100%;height:auto}td.why{min-width:16rem}
"""


def render(report: Report, now: datetime) -> str:
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8>"
             f"<meta name=viewport content='width=device-width,initial-scale=1'>"
             f"<meta http-equiv=refresh content={REFRESH_S}><title>job: queue status</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>Queue status</h1><p class=muted>as of {_when(now)}; reloads every {REFRESH_S} s</p>"]
    if not report.groups:
        parts.append("<p>No resource group yet (<code>python -m job group add</code>).</p>")
    for group in report.groups:
        parts.append(_group(report, group, now))
    parts.append("</body></html>")
    return "".join(parts)


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _group(report: Report, group: dict, now: datetime) -> str:
    name = group["name"]
    rows = report.shares.get(name, [])
    pending = sum(row.pending for row in rows)
    running = sum(row.running for row in rows)
    ticked = (f"last tick {int((now - group['ticked_at']).total_seconds())} s ago" if group["ticked_at"]
              else "never ticked")
    if group.get("failing_since") is not None:
        ticked += (f"; <strong class='failing'>failing since {int((now - group['failing_since']).total_seconds())} s"
                   f" ago: {escape(group['failing_cause'] or '')}</strong>")
    out = [f"<section id='group-{escape(name)}'><h2>{escape(name)}</h2>",
           f"<p>{escape(group['policy'])}, {escape(group['selector'])}; {running} active, {pending} pending; "
           f"{ticked}</p>", _nodes(group), _tree_chart(report.accounts.get(name, [])), _chart(rows),
           _queue([job for job in report.queue if job["group_name"] == name], pending, now, report.arrays)]
    out.append("</section>")
    return "".join(out)


def _nodes(group: dict) -> str:
    if not group["nodes"]:
        return "<p class=muted>No node seen yet.</p>"
    lines = ["<div class=scroll><table><tr><th>node</th><th>resources</th><th>in use</th></tr>"]
    for node in group["nodes"]:
        total = Resources.of(node["resources"])
        if node["free"] is None:
            used = "unknown"
        else:
            # Every resource of the node, those none of is in use too (`CPU 0`).
            in_use = total - Resources.of(node["free"])
            used = describe((name, in_use.get(name)) for name in total)
        lines.append(f"<tr><td>{escape(node['id'][:12])}</td><td>{escape(str(total))}</td>"
                     f"<td>{escape(used)}</td></tr>")
    lines.append("</table></div>")
    return "".join(lines)


def _chart(rows: list[UserShare]) -> str:
    """Each active user's dominant share of the group (bar) against its entitlement (mark)."""
    shown = sorted((row for row in rows if row.active), key=lambda row: (-row.dominant_share, -row.pending, row.user))
    if not shown:
        return "<p class=muted>No user has jobs here.</p>"
    left = shown[CHART_USERS:]
    more = f"<p class=muted>and {len(left)} more user(s) with jobs</p>" if left else ""
    return _bars([(row.user, row) for row in shown[:CHART_USERS]], "user") + more


def _tree_chart(rows: list[AccountShare]) -> str:
    """The accounts with jobs, in the tree's order (a child indented under its parent): each
    subtree's dominant share against its entitlement down the tree."""
    shown = [("\u00a0" * 2 * row.depth + row.account, row) for row in rows if row.running or row.pending]
    return _bars(shown[:CHART_USERS], "account") if shown else ""


def _bars(shown: Sequence[tuple[str, UserShare | AccountShare]], kind: str) -> str:
    bar_h, gap, label_w, width = 16, 6, 120, 520
    plot = width - label_w - 10
    height = len(shown) * (bar_h + gap) + 20
    svg = [f"<svg role='img' aria-label='share of the group per {kind}' viewBox='0 0 {width} {height}' "
           f"width='{width}' height='{height}' xmlns='http://www.w3.org/2000/svg' font-size='11'>"]
    for i, (label, row) in enumerate(shown):
        y = i * (bar_h + gap)
        used = plot * row.dominant_share
        mark = label_w + plot * row.entitlement
        title = (f"{label.strip()}: dominant share {row.dominant_share:.1%}, entitled to {row.entitlement:.1%}; "
                 f"{row.running} active, {row.pending} pending")
        svg.append(f"<g class='{kind}'><title>{escape(title)}</title>"
                   f"<text x='0' y='{y + bar_h - 4}'>{escape(label[:18])}</text>"
                   f"<rect x='{label_w}' y='{y}' width='{plot}' height='{bar_h}' fill='#eee'/>"
                   f"<rect x='{label_w}' y='{y}' width='{used:.1f}' height='{bar_h}' fill='#7aaae8'/>"
                   f"<line x1='{mark:.1f}' x2='{mark:.1f}' y1='{y - 2}' y2='{y + bar_h + 2}' stroke='#d8553b' "
                   f"stroke-width='3'/>"
                   f"<text x='{label_w + 4}' y='{y + bar_h - 4}' fill='#111'>{row.dominant_share:.0%} of "
                   f"{row.entitlement:.0%}</text></g>")
    axis_y = len(shown) * (bar_h + gap) + 12
    svg.append(f"<text x='{label_w}' y='{axis_y}'>0</text><text x='{width - 40}' y='{axis_y}'>100%</text></svg>")
    return ("<p class=legend><span style='background:#7aaae8'></span>dominant share held now"
            "<span style='background:#d8553b'></span>entitlement</p>" + "".join(svg))


def _queue(jobs: list[dict], pending: int, now: datetime, arrays: dict[int, ArraySummary]) -> str:
    """The first pending jobs in plan order; an array on one line, where its first task in line
    stands, with its spec and its tasks' count per state (as `jobs` shows it)."""
    if not jobs:
        return "<p class=muted>Nothing pending.</p>"
    lines = [f"<p>Pending, in plan order ({len(jobs)} of {pending}):</p><div class=scroll><table>"
             "<tr><th>#</th><th>job</th><th>user</th><th>class</th><th>resources</th><th>waited</th>"
             "<th>starts</th><th>reason</th></tr>"]
    shown_arrays: set[int] = set()
    for job in jobs:
        array = arrays.get(job["array_id"])
        if array is not None and array.id in shown_arrays:
            continue
        why = job["reason"] + (f": {job['message']}" if job["message"] else "") if job["reason"] else "-"
        if array is not None:
            shown_arrays.add(array.id)
            why = f"array {array.spec}: {array.counts}"
        shown = why if len(why) <= MESSAGE_SHOWN else why[:MESSAGE_SHOWN - 1] + "…"
        problem = row_problem(job)
        # A row written past the CLI: what is wrong with it, in the reason's place.
        request, shown = ("?", f"invalid row: {problem}"[:MESSAGE_SHOWN]) if problem else (str(footprint(job)), shown)
        waited = format_duration(round(max((now - job["submitted_at"]).total_seconds(), 0)))
        basis = job["estimate_basis"]
        starts = ("-" if basis is None else "unknown" if job["estimated_start_at"] is None
                  else time_of_day(job["estimated_start_at"], now))
        ident = job["id"] if array is None else f"{array.id} (array)"
        lines.append(f"<tr><td>{job['queue_position'] or '-'}</td><td>{ident}</td>"
                     f"<td>{escape(job['user_name'])}</td>"
                     f"<td>{escape(job['priority_class'] or '-')}</td><td>{escape(request)}</td>"
                     f"<td title='{_when(job['submitted_at'])}'>{waited}</td>"
                     f"<td title='{escape(basis or 'no estimate yet')}'>{starts}</td>"
                     f"<td class=why title='{escape(why)}'>{escape(shown)}</td></tr>")
    lines.append("</table></div>")
    return "".join(lines)

