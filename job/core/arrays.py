"""Job arrays: one submission makes a job per index, in Slurm's syntax (`0-99`, `1,3,5`, `0-99:2`,
combinations of these, and `%N`: at most N of the array running or submitting at once), and the
throttle as the tick applies it: of a throttled array, the planner is given at most N less those
running or submitting of its pending tasks; the others wait (`ArrayThrottle`). Pure."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from job.core.errors import BadInput, quoted
from job.core.states import STATES, Reason

# Bounds: an array is one statement of at most this many rows (bench/arrays.py), and its indexes
# are numbers a person reads, as Slurm's MaxArraySize keeps them.
MAX_TASKS = 10_000
MAX_INDEX = 1_000_000
# `1,2,...,9999` is 49 KB: room for an explicit list of MAX_TASKS indexes, not a megabyte of text.
MAX_SPEC_CHARS = 100_000

# How a submit takes an array, declared once: job.api.submit's keyword, the `submit` option, the
# gateway's metadata key. Not a field of core/job.py: it makes the tasks, each with its own columns.
KEYWORD = "array"
OPTION = "--array"
GATEWAY_KEY = "queue.array"
HELP = ("one job per index, in Slurm's syntax: 0-99, 1,3,5, 0-99:2 or a combination, and %%N for at most N "
        f"running at once, e.g. 0-99%%10 (at most {MAX_TASKS} tasks, indexes 0 to {MAX_INDEX}); prints the array's id")

_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")
# Digits past MAX_INDEX's: refused before int() reads them (a spec may hold 100,000 of them).
_DIGITS = len(str(MAX_INDEX))
_THROTTLE = re.compile(r"[0-9]{1,7}")


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """An array as asked for: its indexes, ascending and each once, and its throttle (None: none)."""

    indexes: tuple[int, ...]
    throttle: int | None = None

    def __str__(self) -> str:
        return describe(self.indexes, self.throttle)


def parse_array(text: object, field: str = "array") -> ArraySpec:
    """`SPEC[%N]` read, or BadInput naming `field` in one line. Each range's size is counted
    before it is expanded, so that `0-1000000` costs no more than `0-9`."""
    if not isinstance(text, str):
        raise BadInput(f"{field}: {quoted(text)} is not an array spec (text such as 0-99%10)")
    if len(text) > MAX_SPEC_CHARS:
        raise BadInput(f"{field}: at most {MAX_SPEC_CHARS} characters, got {len(text)}")
    body, percent, limit = text.strip().partition("%")
    throttle = _throttle(limit, field) if percent else None
    indexes: set[int] = set()
    for item in body.split(","):
        indexes.update(_item(item, field))
        if len(indexes) > MAX_TASKS:
            raise BadInput(f"{field}: at most {MAX_TASKS} tasks an array, got more")
    return ArraySpec(tuple(sorted(indexes)), throttle)


def _throttle(limit: str, field: str) -> int:
    if not _THROTTLE.fullmatch(limit) or not 1 <= int(limit) <= MAX_TASKS:
        raise BadInput(f"{field}: {quoted(limit)} after '%' is not a throttle: give 1 to {MAX_TASKS} "
                       "(at most that many tasks running at once)")
    return int(limit)


def _item(item: str, field: str) -> range:
    """One index or range of a spec, its size checked before it is expanded."""
    found = _ITEM.fullmatch(item.strip())
    if found is None:
        raise BadInput(f"{field}: {quoted(item)} is not an index or a range: use N, A-B or A-B:STEP, "
                       "comma-separated, e.g. 0-99%10 or 1,3,5")
    first_text, last_text, step_text = found.groups()
    if len(first_text) > _DIGITS or len(last_text or "") > _DIGITS:
        raise BadInput(f"{field}: {quoted(item)}: indexes go from 0 to {MAX_INDEX}")
    if len(step_text or "") > _DIGITS:
        raise BadInput(f"{field}: {quoted(item)}: a step goes from 1 to {MAX_INDEX}")
    first = int(first_text)
    last = first if last_text is None else int(last_text)
    step = 1 if step_text is None else int(step_text)
    if last > MAX_INDEX:
        raise BadInput(f"{field}: {quoted(item)}: indexes go from 0 to {MAX_INDEX}")
    if last < first:
        raise BadInput(f"{field}: {quoted(item)}: a range goes up (A-B with A at most B)")
    if not 1 <= step <= MAX_INDEX:
        raise BadInput(f"{field}: {quoted(item)}: a step goes from 1 to {MAX_INDEX}")
    if (last - first) // step + 1 > MAX_TASKS:
        raise BadInput(f"{field}: at most {MAX_TASKS} tasks an array, {quoted(item)} alone makes "
                       f"{(last - first) // step + 1}")
    return range(first, last + 1, step)


def describe(indexes: Iterable[int], throttle: int | None = None) -> str:
    """Indexes as the shortest spec of runs reads them back (`0-99`, `0-98:2`, `1,3,7`), with the
    throttle: what `jobs` shows of an array, whose spec is not stored apart from its tasks."""
    values = sorted(set(indexes))
    parts, start = [], 0
    while start < len(values):
        end = start + 1
        if end < len(values):
            step = values[end] - values[start]
            while end + 1 < len(values) and values[end + 1] - values[end] == step:
                end += 1
            # A run of three or more (two, when consecutive) reads shorter as a range.
            if end - start >= 2 or (step == 1 and end - start == 1):
                suffix = "" if step == 1 else f":{step}"
                parts.append(f"{values[start]}-{values[end]}{suffix}")
                start = end + 1
                continue
        parts.append(str(values[start]))
        start += 1
    return ",".join(parts) + ("" if throttle is None else f"%{throttle}")


class _Pending(Protocol):
    id: int
    user_name: str
    array_id: int | None
    array_throttle: int | None


class _Active(Protocol):
    user_name: str
    array_id: int | None


class Throttled(NamedTuple):
    """What the tick gives the planner of its pending rows, and why the others wait."""

    planned: list
    # A waiting record per pending task held back, in id order, as the plan's (its job's id a
    # string, its reason, its message).
    waiting: list[dict]

    @property
    def said(self) -> list[tuple[str, str, list[dict]]]:
        """The records grouped by reason and message, as the plan's `said`."""
        groups: dict[str, list[dict]] = {}
        for record in self.waiting:
            groups.setdefault(record["message"], []).append(record)
        return [(Reason.ARRAY_THROTTLE.value, message, records) for message, records in groups.items()]


def throttle(pending: list[_Pending], active: Iterable[_Active]) -> Throttled:
    """The pending rows the planner is given: all but, of each throttled array, those past its
    throttle less its tasks running or submitting (`active`), in index order. An array is known by
    its id and its user's name, so that a row written past the CLI naming another user's array
    holds back only its own user's. `pending` itself is given back when nothing is throttled."""
    limits = {(row.user_name, row.array_id): row.array_throttle for row in pending
              if row.array_throttle is not None and row.array_id is not None}
    if not limits:
        return Throttled(pending, [])
    running = Counter((job.user_name, job.array_id) for job in active if (job.user_name, job.array_id) in limits)
    room = {key: max(0, limit - running[key]) for key, limit in limits.items()}
    planned, waiting = [], []
    for row in pending:
        key = (row.user_name, row.array_id)
        if key not in room:
            planned.append(row)
        elif room[key] > 0:
            room[key] -= 1
            planned.append(row)
        else:
            # Those running and those given to the planner now: the same words from tick to tick.
            waiting.append({"job": str(row.id), "reason": Reason.ARRAY_THROTTLE.value,
                            "message": f"array {row.array_id} runs {max(running[key], limits[key])} of at most {limits[key]}"})
    return Throttled(planned, waiting)


@dataclass(frozen=True, slots=True)
class ArraySummary:
    """An array as `jobs` shows it on one line and `show` of its id under its first task: its
    indexes and throttle (its spec, as `describe` gives it back) and its tasks' count per state."""

    id: int
    indexes: tuple[int, ...]
    throttle: int | None
    states: dict[str, int]

    @property
    def spec(self) -> str:
        return describe(self.indexes, self.throttle)

    @property
    def counts(self) -> str:
        """`RUNNING 2, PENDING 3`: the states in their life's order (core/states.py STATES)."""
        return ", ".join(f"{state} {self.states[state]}" for state in STATES if self.states.get(state))

    def document(self) -> dict:
        return {"id": self.id, "spec": self.spec, "tasks": len(self.indexes),
                "states": {state: self.states[state] for state in STATES if self.states.get(state)}}
