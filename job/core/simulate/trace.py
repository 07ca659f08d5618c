"""A workload trace: the jobs a simulation replays, parsed from text. Pure: the text comes in, the
jobs go out; reading the file is the command line's business.

Two formats:

- CSV, `submit_time,user,resources,run_time[,priority,class,max_runtime,bundles,bundle_strategy,id,after,array]`,
  one job a line. Times are seconds or durations (`90`, `5m`, `1h30m`) from the start of the trace;
  resources are written as for `--nodes`, `CPU:4,memory:8GiB` (quoted, since they hold commas;
  braces optional). Bundles are `--bundle`'s, in the same NAME:AMOUNT words, joined by `;`
  (`2xCPU:2;GPU:1,CPU:4`: three bundles); with them the driver may ask for nothing (`CPU:0`). A first
  line starting with `submit_time` is a header: it names the columns, in any order, and may leave out
  all but the first four. Blank lines and lines starting with `#` are skipped.
  A pipeline: `id` names a job (default: its number among the trace's jobs, `1`, `2`, ...); `after`
  waits for jobs named on lines above, as `submit --after` writes it (`prep`, `prep:any`,
  `train,prep:fail`); `array` makes one job per index, in `submit --array`'s syntax (`0-9%2`: ten
  tasks, at most two running at once), each named `ID_INDEX`, and `after` naming the array waits for
  all its tasks.
- SWF, the Standard Workload Format of the Parallel Workloads Archive: 18 whitespace-separated
  fields per job, comment lines starting with `;`. Used: submit time (2), run time (4), requested
  processors (8, or allocated processors (5) where not requested) as CPUs, requested time (9) as
  the max runtime (-1: none), user id (12). A job
  with no run time or no processors (-1: cancelled before it started) is skipped and counted.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import msgspec
from msgspec import UNSET

from job.core.arrays import parse_array
from job.core.dependencies import When
from job.core.errors import BadInput, quoted
from job.core.planner.snapshot import Pending
from job.core.specs import check_bundle_strategy, check_bundles, expand_bundles, parse_resources
from job.core.units import parse_duration, parse_pairs

# The virtual clock's origin: a trace's times are seconds after it.
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


class Dependency(NamedTuple):
    """A job of the trace waited for (its id, or an array's: every task), and how it must end."""

    job: str
    when: When = When.OK


@dataclass(frozen=True, slots=True)
class TraceJob:
    """A job the simulation replays: the planner's pending job, as a tick would be given it, and
    what only a replay knows: how long it runs, what it waits for, the array whose throttle holds it."""

    pending: Pending
    run_s: float
    after: tuple[Dependency, ...] = ()
    # The array it is a task of, and the array's throttle (None: none): at most that many of its
    # tasks running or given to the planner at once.
    array: str | None = None
    throttle: int | None = None

    @property
    def id(self) -> str:
        return self.pending.id

    @property
    def user(self) -> str:
        return self.pending.user

    @property
    def runs_s(self) -> float:
        """How long a replay runs it: its run time, cut at its max runtime (`cut`)."""
        limit = self.pending.max_runtime_s
        return self.run_s if limit is None else min(self.run_s, limit)

    @property
    def cut(self) -> bool:
        """Its max runtime ends it before its work is done: the tick stops it (STOPPED)."""
        return self.runs_s < self.run_s

    @classmethod
    def at(cls, id: str, user: str, submit_s: float, resources: dict[str, float], run_s: float, priority: int = 0,
           priority_class: str | None = None, *, after: tuple[Dependency, ...] = (), array: str | None = None,
           throttle: int | None = None, **planned: Any) -> TraceJob:
        """A job written in seconds from the trace's start (EPOCH), as traces write them; `planned`:
        the planner's other fields of it (max_runtime_s, bundles, ...), None for not given."""
        given = {name: value for name, value in planned.items() if value is not None}
        if given.get("bundles"):
            given |= {"bundles": list(given["bundles"]), "bundle_strategy": given.get("bundle_strategy") or "PACK"}
        return cls(Pending(id=id, user=user, resources=resources, priority=priority,
                           submitted_at=EPOCH + timedelta(seconds=submit_s), priority_class=priority_class or UNSET,
                           **given), run_s, after, array, throttle)


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
        bundles = check_bundles(expand_bundles((item.strip() for item in text.split(";")), ":", "2xCPU:2;GPU:1,CPU:4"))
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None
    assert bundles is not None, "check_bundles gives None only for None"
    return tuple(bundles)


def _bundle_strategy(text: str | None, bundles: tuple | None, where: str) -> str | None:
    if text and bundles is None:
        raise BadInput(f"{where}: a strategy places bundles: give them too (the bundles column)")
    try:
        return check_bundle_strategy(text or None, bundles is not None)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None


def _duration(text: str | float, where: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None


CSV_FIELDS = ("submit_time", "user", "resources", "run_time", "priority", "class", "max_runtime", "bundles",
              "bundle_strategy", "id", "after", "array")
# What a line without a header must give at least, and what a trace without pipelines gives at most.
REQUIRED_FIELDS, PLAIN_FIELDS = 4, 7


def parse_csv(text: str, source: str = "trace") -> Trace:
    trace = Trace()
    columns: tuple[str, ...] = CSV_FIELDS
    # Ids named so far: a job's own, and an array's (its tasks'); `after` names only these.
    named: dict[str, list[str]] = {}
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if number == 1 and row[0].strip() == "submit_time":
            columns = _header(row, source)
            continue
        where = f"{source} line {number}"
        if not REQUIRED_FIELDS <= len(row) <= len(columns):
            # The later columns are named only to a row that has more fields than a plain trace has.
            shown = columns if len(row) > PLAIN_FIELDS or columns is not CSV_FIELDS else columns[:PLAIN_FIELDS]
            raise BadInput(f"{where}: expected {REQUIRED_FIELDS} to {len(shown)} fields ({','.join(shown)}), got {len(row)}")
        cells = dict(zip(columns, (cell.strip() for cell in row), strict=False))
        job = _job(cells, str(len(trace.jobs) + 1), where)
        ident = cells.get("id") or job.id
        if ident in named:
            raise BadInput(f"{where}: id: {ident!r} names a job above already")
        after = _after(cells.get("after", ""), named, f"{where}: after")
        array = parse_array(cells["array"], f"{where}: array") if cells.get("array") else None
        if array is None:
            trace.jobs.append(_replace_id(job, ident, after=after))
            named[ident] = [ident]
            continue
        tasks = [_replace_id(job, f"{ident}_{index}", after=after, array=ident, throttle=array.throttle)
                 for index in array.indexes]
        named[ident] = [task.id for task in tasks]
        for task in tasks:
            if task.id in named:
                raise BadInput(f"{where}: array: its task {task.id!r} has the id of a job above")
            named[task.id] = [task.id]
        trace.jobs += tasks
    return trace


def _header(row: list[str], source: str) -> tuple[str, ...]:
    columns = tuple(cell.strip() for cell in row)
    for name in columns:
        if name not in CSV_FIELDS:
            raise BadInput(f"{source} line 1: unknown column {name!r}: use {','.join(CSV_FIELDS)}")
        if columns.count(name) > 1:
            raise BadInput(f"{source} line 1: column {name!r} given twice")
    if columns[:REQUIRED_FIELDS] != CSV_FIELDS[:REQUIRED_FIELDS]:
        raise BadInput(f"{source} line 1: the first columns are {','.join(CSV_FIELDS[:REQUIRED_FIELDS])}")
    return columns


def _job(cells: dict[str, str], ident: str, where: str) -> TraceJob:
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
    return TraceJob.at(
        ident, user, _duration(cells["submit_time"], f"{where}: submit_time"),
        parse_resource_text(cells["resources"], f"{where}: resources", may_be_nothing=bundles is not None),
        _duration(cells["run_time"], f"{where}: run_time"), priority, cells.get("class") or None,
        max_runtime_s=_max_runtime(cells.get("max_runtime"), f"{where}: max_runtime"), bundles=bundles,
        bundle_strategy=_bundle_strategy(cells.get("bundle_strategy"), bundles, f"{where}: bundle_strategy"))


def _replace_id(job: TraceJob, ident: str, **replay: Any) -> TraceJob:
    pending = job.pending if ident == job.id else msgspec.structs.replace(job.pending, id=ident)
    return TraceJob(pending, job.run_s, **replay)


def _after(text: str, named: dict[str, list[str]], where: str) -> tuple[Dependency, ...]:
    """`prep,train:any`: the jobs (or arrays) of the lines above waited for, each task of an array
    once; as `submit --after` writes it, with ids of the trace."""
    found: dict[str, When] = {}
    for item in filter(None, (item.strip() for item in text.split(","))):
        name, _, when = item.partition(":")
        if when and when not in When.__members__.values():
            raise BadInput(f"{where}: {item!r}: {when!r} is not one of ok, any, fail")
        if name not in named:
            raise BadInput(f"{where}: {name!r} is not the id of a job on a line above")
        for ident in named[name]:
            found[ident] = When(when or When.OK)
    return tuple(Dependency(ident, when) for ident, when in found.items())


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
        job = _swf_job(fields, where)
        if job is None:
            trace.skipped += 1
        else:
            trace.jobs.append(job)
    _unique_ids(trace, source)
    return trace


def _swf_job(fields: list[str], where: str) -> TraceJob | None:
    """The job of one SWF line, or None for one with no run time or no processors (skipped)."""
    values = {}
    for index, name in _SWF_FIELDS.items():
        try:
            values[index] = float(fields[index - 1])
        except ValueError:
            values[index] = math.nan
        if not math.isfinite(values[index]):
            raise BadInput(f"{where}: field {index} ({name}): not a number: {quoted(fields[index - 1])}")
    submit, run, allocated, requested, limit, user = (values[i] for i in (2, 4, 5, 8, 9, 12))
    if submit < 0:
        raise BadInput(f"{where}: field 2 (submit time): must not be negative, got {fields[1]!r}")
    processors = requested if requested > 0 else allocated
    if run < 0 or processors <= 0:
        return None
    # Bounded as a CSV trace's times and resources are.
    for index, seconds in ((2, submit), (4, run), (9, limit)):
        if seconds > 0:
            _duration(seconds, f"{where}: field {index} ({_SWF_FIELDS[index]})")
    try:
        cpus = parse_resources({"CPU": processors})
    except ValueError as exc:
        raise BadInput(f"{where}: field {8 if requested > 0 else 5} (processors): {exc}") from None
    return TraceJob.at(fields[0], f"u{int(user)}" if user >= 0 else "unknown", submit, cpus, run,
                       max_runtime_s=limit if limit > 0 else None)


def _unique_ids(trace: Trace, source: str) -> None:
    seen: set[str] = set()
    for job in trace.jobs:
        if job.id in seen:
            raise BadInput(f"{source}: job number {job.id} appears more than once")
        seen.add(job.id)
