"""A job row as stored, checked as its readers use it: a row written past the CLI (an admin's SQL)
with a value no command would have written is shown with what is wrong with it, not formatted (and
the tick fails it, InvalidJob, when it is pending: core/group_snapshot.py). The fields checked are
those of core/job.py FIELDS with a `stored` shape, in the table's order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from job.core import dependencies
from job.core.job import STORED, Job
from job.core.units import MAX_DURATION_S

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from job.core.job import ActiveJob


@cache
def _shapes() -> dict[str, TypeAdapter]:
    # Built at the first row checked, pydantic and the snapshot's shapes (the planner's package) with
    # them: they are not for a command that finds no row, `jobs` on an empty queue (issue 24).
    from typing import Annotated

    from pydantic import AfterValidator, BaseModel, ConfigDict, Field, FiniteFloat, TypeAdapter

    from job.core.planner.snapshot import Bundles, ResourceMap

    class ObservedRecord(BaseModel):
        # What core/observed.py `record` writes; other keys are let be.
        model_config = ConfigDict(extra="allow")

        declared: dict[str, FiniteFloat]
        used: dict[str, FiniteFloat]
        charged: dict[str, FiniteFloat]
        nodes: dict[str, dict[str, FiniteFloat]]
        placement_groups: int
        actors: int
        tasks: int
        over_since: str | None = None

    shapes: dict[str, TypeAdapter] = {
        "duration": TypeAdapter(Annotated[float, Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)] | None),
        "resources": TypeAdapter(ResourceMap),
        "labels": TypeAdapter(dict[str, str]),
        "bundles": TypeAdapter(Bundles | None),
        "nodes": TypeAdapter(list[str] | None),
        "observed": TypeAdapter(ObservedRecord | None),
        "after": TypeAdapter(Annotated[list, AfterValidator(dependencies.parse)] | None),
    }
    return {field.column: shapes[stored] for field in STORED if (stored := field.stored)}


def row_problem(row: Mapping[str, Any] | Job) -> str | None:
    """What is wrong with the row's first malformed field, as `field.key: message (value)`, or None;
    of the fields the row has (a report reads a few)."""
    from pydantic import ValidationError  # at the first row checked, as _shapes's

    if not isinstance(row, Mapping):
        row = {field.column: getattr(row, field.column) for field in STORED}
    for field, shape in _shapes().items():
        if field not in row:
            continue
        try:
            shape.validate_python(row[field])
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            path = ".".join(str(part) for part in (field, *error["loc"]))
            return f"{path}: {error['msg']} (stored: {_short(row[field])})"
    nodes, bundles = row.get("bundle_nodes"), row.get("bundles")
    if nodes is not None and len(nodes) != len(bundles or ()):
        return f"bundle_nodes: {len(nodes)} node(s) for {len(bundles or ())} bundle(s) (stored: {_short(nodes)})"
    return None


def stored_problem(column: str, value: Any) -> str | None:
    """What is wrong with one stored value of a column, or None."""
    return row_problem({column: value})


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def usable(active: list[ActiveJob]) -> tuple[list[ActiveJob], dict[int, str]]:
    """The active jobs as the tick can count them, and the malformed ones' problems by id. A job
    already in Ray with a malformed row is left to run, counted as declaring nothing (Ray's free
    resources still show what it holds), without a run time limit and its observed use dropped,
    so that one row does not stop its group's tick."""
    problems = {job.id: problem for job in active if (problem := row_problem(asdict(job)))}
    return [replace(job, **_cleared()) if job.id in problems else job for job in active], problems


@cache
def _cleared() -> dict[str, Any]:
    from job.core.job import ActiveJob

    held = {field.name for field in fields(ActiveJob)}
    return {field.column: None if field.optional else {} for field in STORED if field.column in held}
