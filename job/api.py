"""The queue's Python interface, for programs that enqueue jobs (an API server, a notebook).

    from job.api import submit
    job_id = submit(user="alice", group="gpu", entrypoint="python train.py",
                    resources={"CPU": 4, "GPU": 1, "memory": "16GiB"})

Input is validated exactly as `python -m job submit` validates it: `job.core.errors.BadInput` names the
field that is wrong, and nothing is written. Pass `conn` to enqueue inside your own transaction;
otherwise JOB_DATABASE_URL (or `database_url`) is used and the job is committed on return.

What the connection may do is its database role's (docs/operations/roles-and-logins.md): a login granted
`job_submitter` submits only as itself (`user` is its login name) and cancels only its own jobs;
another `user` raises `job.core.errors.PermissionDenied` naming the rule, and another user's job is
not found by `cancel`. What a role may not do at all raises PostgreSQL's `InsufficientPrivilege`.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from job.core.arrays import KEYWORD as ARRAY
from job.core.arrays import ArraySpec, parse_array
from job.core.errors import BadInput, quoted
from job.core.job import REQUIRED, SUBMITTED
from job.core.runtime_env import KNOWN_KEYS, controls, runtime_env_problem
from job.core.specs import JobSpec, validated
from job.settings import settings
from job.store import DictConnection, groups, jobs
from job.store.connection import session


def submit(*, conn: DictConnection | None = None, database_url: str | None = None, **options: Any) -> int:
    """Enqueue one job and return its id. Its keywords are the fields a submit takes, as core/job.py
    FIELDS names them (`api_keyword`): user, group and entrypoint, then what the job asks for and
    when. A job that names no resource asks for CPU 1; memory is in bytes or a size such as
    '4GiB', a time a datetime or ISO 8601, a duration seconds or a text such as '2h'. `bundles`:
    what its work needs beside the driver (Ray Train workers, actors), resource maps read as
    `resources` is, placed all or nothing by `bundle_strategy` (PACK, SPREAD, STRICT_PACK,
    STRICT_SPREAD; default PACK); the driver may then ask for nothing (`resources={"CPU": 0}`).
    `after`: the jobs it waits for, each an id (to succeed) or 'ID:ok|any|fail' (`[12, "13:any"]`
    or `"12,13:any"`), each one the caller sees.
    None for a field that has a default is its default.

    `array`: a spec in Slurm's syntax (`0-99%10`, core/arrays.py) makes one job per index with these
    options, in one statement; the id returned is then the array's, that of its first task."""
    array = options.pop(ARRAY, None)
    spec = job_spec(**options)
    tasks = None if array is None else parse_array(array)
    if conn is not None:
        return _insert(conn, spec, tasks)
    with session(database_url or settings().require_database_url()) as own:
        return _insert(own, spec, tasks)


def job_spec(**options: Any) -> jobs.JobSpec:
    """A submit's keywords checked as `submit` checks them, nothing written: a job, or a schedule's
    template (cli/schedules.py)."""
    fields = {jobs.spec_name(field): options.pop(field.api_keyword) for field in SUBMITTED if field.api_keyword in options}
    if options:
        raise TypeError(f"submit() got an unexpected keyword argument {next(iter(options))!r}")
    fields = {name: value for name, value in fields.items() if value is not None or _DEFAULTS[name] is REQUIRED}
    # Keys beyond the known ones, and env_vars Ray reads for control, pass here if the group allows
    # them, which only the database knows.
    runtime_env = fields.get("runtime_env")
    unknown = frozenset(runtime_env) - KNOWN_KEYS if isinstance(runtime_env, dict) else frozenset()
    return validated(JobSpec, fields, context={"allowed_runtime_env_keys": unknown,
                                               "allowed_env_vars": controls(runtime_env)})


_DEFAULTS = {field.spec: field.default for field in SUBMITTED}
# What help() and an editor show: the table's keywords.
submit.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter(field.api_keyword, inspect.Parameter.KEYWORD_ONLY,
                       **({} if field.default is REQUIRED else {"default": field.default}))
     for field in SUBMITTED]
    + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in (ARRAY, "conn", "database_url")],
    return_annotation=int)


def _insert(conn: DictConnection, spec: jobs.JobSpec, array: ArraySpec | None) -> int:
    check_runtime_env(conn, spec)
    return jobs.insert_job(conn, spec, array)


def check_runtime_env(conn: DictConnection, spec: jobs.JobSpec) -> None:
    """What of the runtime_env only the group allows (keys beyond the known ones, env_vars Ray reads)."""
    if frozenset(spec.runtime_env) - KNOWN_KEYS or controls(spec.runtime_env):
        problem = runtime_env_problem(spec.runtime_env, *groups.runtime_env_allowance(conn, spec.group))
        if problem:
            raise BadInput(f"runtime_env: {problem}")


def cancel(ids: list[int], *, conn: DictConnection | None = None,
           database_url: str | None = None) -> dict[int, tuple[str | None, str | None]]:
    """Cancel jobs: PENDING ones at once; SUBMITTING, SUBMITTED and RUNNING ones get a cancel
    request that the next tick carries out in Ray. Returns per id the state before and after
    ((None, None) for an unknown id, or another user's job when the role may cancel only its own;
    an unchanged finished state for a finished job). An array's id cancels its tasks: each is
    then in the answer. An id that is not a positive whole number a bigint holds raises BadInput,
    before the database is asked."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise BadInput(f"ids: give a list of job ids, got {type(ids).__name__} {quoted(ids)}")
    for ident in ids:
        if isinstance(ident, bool) or not isinstance(ident, int) or not 0 < ident < 2**63:
            raise BadInput(f"ids: {quoted(ident)} is not a job id (a positive whole number)")
    if conn is not None:
        return _cancel(conn, ids)
    with session(database_url or settings().require_database_url()) as own:
        return _cancel(own, ids)


def _cancel(conn: DictConnection, ids: list[int]) -> dict[int, tuple[str | None, str | None]]:
    tasks = [task for found in jobs.array_tasks(conn, ids).values() for task in found]
    return jobs.cancel_jobs(conn, list(dict.fromkeys([*ids, *tasks])))
