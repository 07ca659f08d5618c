"""The planner's snapshot of one group, built from what the tick read: Ray's nodes, our active jobs
and the group's pending rows, users and state. Pure: the rows come in, the snapshot goes out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError

from job.core.planner import Snapshot
from job.core.planner.snapshot import Group, ResourceMap


class PendingRow(NamedTuple):
    """A pending job as the tick reads it. The request and labels stay JSON text: with 100k jobs,
    decoding a jsonb and building a dict per row would cost more than the rest of the read, and
    the few distinct requests are decoded once each here."""

    id: int
    user_name: str
    resources: str
    node_labels: str
    priority: int
    submitted_at: datetime
    not_before: datetime | None
    reason: str | None
    message: str | None


_REQUEST = TypeAdapter(ResourceMap)
_LABELS = TypeAdapter(dict[str, str])


def _checked(adapter: TypeAdapter, text: str, field: str) -> dict | str:
    """The validated value of a JSON text, or what is wrong with it."""
    try:
        return adapter.validate_json(text)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        return f"{'.'.join(str(part) for part in (field, *error['loc']))}: {error['msg']}"


def build_snapshot(group: dict[str, Any], now: datetime, nodes: list, active: list[dict], pending: list[PendingRow],
                   users: list[dict], state: dict) -> tuple[Snapshot, dict[int, str]]:
    """The planner's snapshot, and the pending jobs left out of it because their row cannot be
    planned (e.g. a negative amount written around `submit`): id -> what is wrong.

    Pending jobs are checked here rather than by Snapshot's own validation, which costs about as
    much as the whole plan: ids, users, priorities and times come typed from PostgreSQL, and what a
    row can get wrong, its request and labels, is checked once per distinct value."""
    snapshot = Snapshot.model_validate({
        # The planner's group options are columns of resource_groups of the same names.
        "group": {option: group[option] for option in Group.model_fields},
        "now": now,
        "nodes": [{"id": n.id, "resources": n.resources, "labels": n.labels} for n in nodes],
        "running": [{"id": str(j["id"]), "user": j["user_name"], "node": j["node"], "resources": j["resources"]}
                    for j in active if j["node"]],
        "users": {u["name"]: {"shares": u["shares"], "usage": u["usage"], "max_running": u["max_running"],
                              "max_resources": u["max_resources"]} for u in users},
        "state": state,
    })
    requests: dict[str, dict | str] = {}
    labels: dict[str, dict | str] = {}
    jobs, invalid = [], {}
    for row in pending:
        request = requests.get(row.resources)
        if request is None:
            request = requests[row.resources] = _checked(_REQUEST, row.resources, "resources")
        label_map = labels.get(row.node_labels)
        if label_map is None:
            label_map = labels[row.node_labels] = _checked(_LABELS, row.node_labels, "node_labels")
        if isinstance(request, str) or isinstance(label_map, str):
            invalid[row.id] = request if isinstance(request, str) else label_map
            continue
        jobs.append({"id": str(row.id), "user": row.user_name, "resources": request, "priority": row.priority,
                     "submitted_at": row.submitted_at, "not_before": row.not_before, "node_labels": label_map})
    snapshot.pending = jobs
    return snapshot, invalid
