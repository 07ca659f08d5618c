"""A workload trace: the jobs a simulation replays, parsed from text. Pure: the text comes in, the
jobs go out; reading the file is the command line's business.

Two formats:

- CSV, `submit_time,user,resources,run_time[,priority,class,max_runtime,bundles,bundle_strategy]`, one
  job a line. Times are seconds or durations (`90`, `5m`, `1h30m`) from the start of the trace;
  resources are written as for `--nodes`, `CPU:4,memory:8GiB` (quoted, since they hold commas;
  braces optional). Bundles are `--bundle`'s, in the same NAME:AMOUNT words, joined by `;`
  (`2xCPU:2;GPU:1,CPU:4`: three bundles); with them the driver may ask for nothing (`CPU:0`). A first line
  starting with `submit_time` is a header; blank lines and lines starting with `#` are skipped.
- SWF, the Standard Workload Format of the Parallel Workloads Archive: 18 whitespace-separated
  fields per job, comment lines starting with `;`. Used: submit time (2), run time (4), requested
  processors (8, or allocated processors (5) where not requested) as CPUs, requested time (9) as
  the max runtime (-1: none), user id (12). A job
  with no run time or no processors (-1: cancelled before it started) is skipped and counted.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field

from job.core.errors import BadInput
from job.core.specs import check_bundle_strategy, check_bundles, expand_bundles, parse_resources
from job.core.units import parse_duration, parse_pairs


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: str
    user: str
    submit_s: float
    resources: dict[str, float]
    run_s: float
    priority: int = 0
    # The job's priority class, None for the group's default.
    priority_class: str | None = None
    # The labels a node must carry to take it, and when it may start at the earliest (seconds
    # on the trace's clock, None for at once). Traces have none; a forecast's jobs may.
    node_labels: dict[str, str] = field(default_factory=dict)
    not_before_s: float | None = None
    # Its max runtime: stopped there if still running, and the end a reservation counts on.
    max_runtime_s: float | None = None
    # Its bundles (resource maps, placed all or nothing with the driver) and their strategy; None
    # for a job of its driver alone.
    bundles: tuple[dict[str, float], ...] | None = None
    bundle_strategy: str | None = None
    # Since when it has waited for resources, what reserve_after counts from (None: its
    # submission). Traces have none; a forecast's jobs have the tick's waiting_since.
    waiting_s: float | None = None


@dataclass(slots=True)
class Trace:
    jobs: list[TraceJob] = field(default_factory=list)
    # Jobs of the source left out, with why (SWF's cancelled jobs): what the figures do not cover.
    skipped: int = 0


def parse_resource_text(text: str, where: str, may_be_nothing: bool = False) -> dict[str, float]:
    """`CPU:4,GPU:1,memory:8GiB` (or `{...}`), as `--node-type` writes resources, as Ray amounts,
    memory in bytes; with `may_be_nothing` (a driver beside its bundles), all zeros give {}."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    try:
        amounts = parse_pairs(filter(None, (part.strip() for part in body.split(","))), ":", "NAME:AMOUNT")
        if not amounts:
            raise ValueError("no resources given (e.g. CPU:4,memory:8GiB)")
        parsed = parse_resources(amounts)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None
    if not any(parsed.values()):
        if may_be_nothing:
            return {}
        raise BadInput(f"{where}: ask for more than nothing: at least one amount above zero")
    return parsed


def parse_bundles(text: str, where: str) -> tuple[dict[str, float], ...] | None:
    """`2xCPU:2;GPU:1,CPU:4`: `--bundle`'s values in NAME:AMOUNT words, joined by `;`, each with
    an optional count; None for an empty cell. Checked as JobSpec checks a job's bundles."""
    if not text:
        return None
    try:
        return tuple(check_bundles(expand_bundles((item.strip() for item in text.split(";")), ":", "2xCPU:2;GPU:1,CPU:4")))
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None


def _bundle_strategy(text: str | None, bundles: tuple | None, where: str) -> str | None:
    if text and bundles is None:
        raise BadInput(f"{where}: a strategy places bundles: give them too (the bundles column)")
    try:
        return check_bundle_strategy(text or None, bundles is not None)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None


def _duration(text: str, where: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None


CSV_FIELDS = ("submit_time", "user", "resources", "run_time", "priority", "class", "max_runtime", "bundles",
              "bundle_strategy")


def parse_csv(text: str, source: str = "trace") -> Trace:
    trace = Trace()
    rows = csv.reader(text.splitlines())
    for number, row in enumerate(rows, start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if number == 1 and row[0].strip() == "submit_time":
            continue
        where = f"{source} line {number}"
        if not 4 <= len(row) <= len(CSV_FIELDS):
            # The bundle columns are named only to a row that has more fields than any trace has.
            fields = CSV_FIELDS if len(row) > len(CSV_FIELDS) else CSV_FIELDS[:-2]
            raise BadInput(f"{where}: expected 4 to {len(fields)} fields ({','.join(fields)}), got {len(row)}")
        cells = dict(zip(CSV_FIELDS, (cell.strip() for cell in row), strict=False))
        user = cells["user"]
        if not user:
            raise BadInput(f"{where}: user: empty")
        priority = 0
        if cells.get("priority"):
            try:
                priority = int(cells["priority"])
            except ValueError:
                raise BadInput(f"{where}: priority: not a whole number: {cells['priority']!r}") from None
        bundles = parse_bundles(cells.get("bundles", ""), f"{where}: bundles")
        trace.jobs.append(TraceJob(
            id=str(len(trace.jobs) + 1),
            user=user,
            submit_s=_duration(cells["submit_time"], f"{where}: submit_time"),
            resources=parse_resource_text(cells["resources"], f"{where}: resources", may_be_nothing=bundles is not None),
            run_s=_duration(cells["run_time"], f"{where}: run_time"),
            priority=priority,
            priority_class=cells.get("class") or None,
            max_runtime_s=_max_runtime(cells.get("max_runtime"), f"{where}: max_runtime"),
            bundles=bundles,
            bundle_strategy=_bundle_strategy(cells.get("bundle_strategy"), bundles, f"{where}: bundle_strategy"),
        ))
    return trace


def _max_runtime(text: str | None, where: str) -> float | None:
    if not text:
        return None
    seconds = _duration(text, where)
    if seconds <= 0:
        raise BadInput(f"{where}: must be above zero, got {text!r}")
    return seconds


# SWF's fields, 1-based as the format numbers them.
_SWF_FIELDS = {2: "submit time", 4: "run time", 5: "allocated processors", 8: "requested processors",
               9: "requested time", 12: "user id"}


def parse_swf(text: str, source: str = "trace") -> Trace:
    trace = Trace()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(";"):
            continue
        where = f"{source} line {number}"
        fields = stripped.split()
        if len(fields) != 18:
            raise BadInput(f"{where}: expected the 18 fields of the Standard Workload Format, got {len(fields)}")
        values = {}
        for index, name in _SWF_FIELDS.items():
            try:
                values[index] = float(fields[index - 1])
            except ValueError:
                raise BadInput(f"{where}: field {index} ({name}): not a number: {fields[index - 1]!r}") from None
        submit, run, allocated, requested, limit, user = (values[i] for i in (2, 4, 5, 8, 9, 12))
        if submit < 0:
            raise BadInput(f"{where}: field 2 (submit time): must not be negative, got {fields[1]!r}")
        processors = requested if requested > 0 else allocated
        if run < 0 or processors <= 0:
            trace.skipped += 1
            continue
        trace.jobs.append(TraceJob(id=fields[0], user=f"u{int(user)}" if user >= 0 else "unknown", submit_s=submit,
                                   resources={"CPU": processors}, run_s=run, max_runtime_s=limit if limit > 0 else None))
    _unique_ids(trace, source)
    return trace


def _unique_ids(trace: Trace, source: str) -> None:
    seen: set[str] = set()
    for job in trace.jobs:
        if job.id in seen:
            raise BadInput(f"{source}: job number {job.id} appears more than once")
        seen.add(job.id)
