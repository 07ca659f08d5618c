"""A group's pending rows that wait for other jobs, split by the tick from the rows it plans: those
whose dependencies do not hold yet wait out of the plan (reason Dependency), those whose never will
end FAILED, the others are planned. Pure: the rows and the states of the jobs they wait for (one
statement, store/tick_jobs.py `states_of`) come in, what to write goes out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from job.core import dependencies
from job.core.dependencies import NEVER, READY, After
from job.core.estimates import FIRST, WaitingOn
from job.core.group_snapshot import MadeJobs
from job.core.job import PendingRow
from job.core.states import FINISHED, Reason

_AFTER = attrgetter("after")
# The reasons of a job whose dependencies are judged: new (none yet, or Queued by its submit) or
# waiting for them. Any other reason is the planner's or a requeue's: its dependencies held when it
# was planned, and hold for good (a job waited for and pruned since no longer matters).
JUDGED = (None, Reason.QUEUED, Reason.DEPENDENCY)


def waited_for(pending: list[PendingRow]) -> tuple[dict[int, list[After]], dict[int, str]]:
    """The rows whose dependencies are to be judged (JUDGED), id -> their dependencies, and those
    whose stored dependencies cannot be read (written past `submit`), id -> why. Most rows wait for
    none: one pass of C over them finds that none does."""
    if not any(map(_AFTER, pending)):
        return {}, {}
    read: dict[str, list[After] | str] = {}
    after_of, invalid = {}, {}
    for row in pending:
        if row.after is None or row.reason not in JUDGED:
            continue
        found = read.get(row.after)
        if found is None:
            found = read[row.after] = _read(row.after)
        if isinstance(found, str):
            invalid[row.id] = found
        elif found:
            after_of[row.id] = found
    return after_of, invalid


def _read(text: str) -> list[After] | str:
    try:
        return dependencies.of(json.loads(text))
    except ValueError as exc:
        return f"after: {exc}"


def named(after_of: dict[int, list[After]]) -> list[int]:
    """The jobs waited for, whose states the tick reads."""
    return sorted({dependency.job for after in after_of.values() for dependency in after})


@dataclass(frozen=True)
class Dependents:
    """What the dependencies decide in one tick."""

    # The rows to plan, in the order read.
    plannable: list[PendingRow]
    # Reasons to write (id -> (reason, message)): of the rows that wait (Dependency) whose stored
    # ones differ, and of those that waited and no longer do (Queued, what satisfied them; written
    # before a placement, so that its event shows).
    waiting: dict[int, tuple[str, str]] = field(default_factory=dict)
    satisfied: dict[int, tuple[str, str]] = field(default_factory=dict)
    # The rows to end FAILED: id -> why (never: DependencyNeverSatisfied; invalid: InvalidJob).
    never: dict[int, str] = field(default_factory=dict)
    invalid: dict[int, str] = field(default_factory=dict)
    # The rows that wait, by id.
    waits: frozenset[int] = frozenset()

    @property
    def held(self) -> int:
        return len(self.waits)


def split(pending: list[PendingRow], after_of: dict[int, list[After]], invalid: dict[int, str],
          found: dict[int, str], made: MadeJobs | None = None) -> Dependents:
    """The rows split by their dependencies' verdicts (core/dependencies.py judge_all), from the
    states `found` of the jobs they name (id -> state; a job not in it is gone). `made`: the
    group's MadeJobs, that keeps the last list to plan, given again while the same rows are read
    and the same held back (the planner's jobs are then not made again)."""
    if not after_of and not invalid:
        return Dependents(pending)
    verdicts = dependencies.judge_all(after_of.items(), found)
    rows = {row.id: row for row in pending if row.id in after_of}
    waiting: dict[int, tuple[str, str]] = {}
    satisfied: dict[int, tuple[str, str]] = {}
    never: dict[int, str] = {}
    for job, verdict in verdicts.items():
        row = rows[job]
        if verdict.outcome == NEVER:
            never[job] = verdict.message
        elif verdict.outcome == READY:
            if row.reason == Reason.DEPENDENCY:
                satisfied[job] = (Reason.QUEUED, verdict.message)
        elif (row.reason, row.message) != (Reason.DEPENDENCY, verdict.message):
            waiting[job] = (Reason.DEPENDENCY, verdict.message)
    held_back = frozenset(job for job, verdict in verdicts.items() if verdict.outcome != READY) | invalid.keys()
    return Dependents(_plannable(pending, held_back, made), waiting, satisfied, never, invalid,
                      held_back - never.keys() - invalid.keys())


def _plannable(pending: list[PendingRow], held_back: frozenset[int], made: MadeJobs | None) -> list[PendingRow]:
    if made is not None and made.read is pending and made.held_back == held_back:
        return made.plannable
    plannable = [row for row in pending if row.id not in held_back] if held_back else pending
    if made is not None:
        made.read, made.held_back, made.plannable = pending, held_back, plannable
    return plannable


def held_of(rows: Mapping[int, PendingRow], after_of: Mapping[int, list[After]], dependents: Dependents,
            found: Mapping[int, str]) -> dict[str, WaitingOn]:
    """The first FIRST of the pending rows their dependencies hold out of this plan (`rows`: by id),
    with the jobs each still waits for (`found`: the states of the jobs they name; one ended counts
    no more): what gets an estimate, as many as of the jobs in line."""
    return {str(job): WaitingOn.of_row(rows[job], [str(after.job) for after in after_of[job]
                                                   if found.get(after.job) not in FINISHED])
            for job in sorted(dependents.waits)[:FIRST]}
