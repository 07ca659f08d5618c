"""A job's dependencies (`--after ID[:ok|any|fail]`): how they are written, and whether a pending
job may be planned, from the states of the jobs it waits for as the tick read them. Pure: the tick
reads those states in one statement (store/tick_jobs.py `states_of`) and writes what is decided here.

A dependency holds once the job it names ended as it asks; it can never hold once that job ended
otherwise, or is gone (pruned): the dependent then ends FAILED (DependencyNeverSatisfied). Until
then the dependent waits (reason Dependency), out of the plan: it holds no reservation and counts
in no share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from job.core import states

# What a dependency may name at most: a job that waits for more is a pipeline's join, not a sweep's.
MAX_DEPENDENCIES = 100


class When(StrEnum):
    """How the job a dependency names must end."""

    OK = "ok"
    ANY = "any"
    FAIL = "fail"


# How a state of the job named settles each kind of dependency: True holds, False never holds,
# a state not listed (unfinished) is waited for. A cancelled job did not fail: only `any` takes it.
SETTLES: dict[When, dict[str, bool]] = {
    When.OK: {states.SUCCEEDED: True, states.FAILED: False, states.STOPPED: False, states.CANCELLED: False},
    When.ANY: {state: True for state in states.FINISHED},
    When.FAIL: {states.SUCCEEDED: False, states.FAILED: True, states.STOPPED: True, states.CANCELLED: False},
}
WORDS = {When.OK: "succeed", When.ANY: "end", When.FAIL: "fail"}


@dataclass(frozen=True, slots=True)
class After:
    job: int
    when: When = When.OK

    def __str__(self) -> str:
        return f"job {self.job} to {WORDS[self.when]}"


def parse(value: Any) -> list[dict[str, Any]] | None:
    """The dependencies as given (a text `12,13:any`, a list of such texts, of ids or of
    {"job", "when"} maps) as stored: a list of {"job": id, "when": ok|any|fail}, each job once
    (its last kind kept); None for none. Raises ValueError naming what is wrong."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError("give job ids, each as ID or ID:ok|any|fail")
    found: dict[int, When] = {}
    for item in items:
        after = _one(item.strip() if isinstance(item, str) else item)
        found[after.job] = after.when
    if not found:
        return None
    if len(found) > MAX_DEPENDENCIES:
        raise ValueError(f"at most {MAX_DEPENDENCIES} jobs, got {len(found)}")
    return [{"job": job, "when": str(when)} for job, when in found.items()]


def _one(item: Any) -> After:
    if isinstance(item, dict):
        if set(item) - {"job", "when"} or "job" not in item:
            raise ValueError(f"{item!r}: give {{'job': ID, 'when': 'ok|any|fail'}}")
        job, when = item["job"], item.get("when", When.OK)
    elif isinstance(item, str):
        job, _, when = item.partition(":")
        when = when or When.OK
    else:
        job, when = item, When.OK
    if isinstance(job, str) and job.isascii() and job.isdigit():
        job = int(job)
    if isinstance(job, bool) or not isinstance(job, int) or not 0 < job < 2**63:
        raise ValueError(f"{item!r}: {job!r} is not a job id (a positive whole number)")
    if when not in When.__members__.values():
        raise ValueError(f"{item!r}: {when!r} is not one of ok, any, fail")
    return After(job, When(when))


def of(stored: list[dict[str, Any]] | None) -> list[After]:
    """The dependencies of a stored value (parse's), checked again: a row written past the CLI.
    Raises ValueError."""
    if stored is None:
        return []
    checked = parse(stored)
    return [After(item["job"], When(item["when"])) for item in checked or ()]


class Verdict(NamedTuple):
    """Whether a pending job may be planned: `ready`, `waiting` or `never`, and why."""

    outcome: str
    message: str


READY, WAITING, NEVER = "ready", "waiting", "never"
# What the tick takes a job to be that it fails in this tick, for the jobs waiting for it.
ENDING = states.FAILED


def judge(after: Iterable[After], found: Mapping[int, str]) -> Verdict:
    """A job's verdict from the states of the jobs it waits for (`found`: id -> state; a job not
    in it is gone). Never as soon as one dependency can never hold (the first such one named)."""
    waits, held = [], []
    for dependency in after:
        state = found.get(dependency.job)
        if state is None:
            return Verdict(NEVER, f"job {dependency.job} is gone (pruned), and this job waited for {dependency}")
        settled = SETTLES[dependency.when].get(state)
        if settled is False:
            ended = "was cancelled" if state == states.CANCELLED else f"ended {state}"
            return Verdict(NEVER, f"job {dependency.job} {ended}, and this job waited for {dependency}")
        if settled is None:
            waits.append(f"{dependency} ({state})")
        else:
            held.append(f"job {dependency.job} {state}")
    if waits:
        return Verdict(WAITING, "waits for " + ", ".join(waits))
    return Verdict(READY, "dependencies satisfied: " + ", ".join(held))


def judge_all(waiting: Iterable[tuple[int, list[After]]], found: Mapping[int, str]) -> dict[int, Verdict]:
    """Each job's verdict (`waiting`: (id, its dependencies)). A job failed here counts as FAILED for
    the jobs that wait for it, so that a chain's jobs fail in one tick: each job named existed
    before its dependents were submitted, so has a lower id, and one pass in id order sees every
    dependency's own verdict first."""
    found = dict(found)
    verdicts = {}
    for job, after in sorted(waiting, key=lambda item: item[0]):
        verdict = judge(after, found)
        verdicts[job] = verdict
        if verdict.outcome == NEVER and job in found:
            found[job] = ENDING
    return verdicts
