"""A job, declared once: `Job`, a row of the `jobs` table as people read it (`show`, `jobs --json`,
the gateway); `FIELDS`, each column with what it is called and how it is given where a person or a
program meets it; and the tick's typed rows of it (`ActiveJob`, `PendingRow`, `Intent`, `Victim`,
`Moved`), each the columns one of its statements reads.

Everything that takes or shows a job's fields by name loops over FIELDS: `job.api.submit`'s
keywords, JobSpec's fields and checks (core/specs.py), the `submit` command's options
(cli/jobs.py), the gateway's `queue.*` metadata keys (gateway/translate.py), the keys of
`jobs --json` and `show`, in this order, and the planner's job made of a pending row
(core/group_snapshot.py). A new field needs its migration, its column in Job, its row here, its
column in the tick's rows that read it, and its use. Nothing here imports pydantic, so that a
listing does not (tests/cli/test_start_imports.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple, get_origin, get_type_hints

from job.core.states import State

if TYPE_CHECKING:
    from job.core.planner.snapshot import BundleStrategy, ReservationKind

# JobSpec's default for a field a submit must give.
REQUIRED: Any = ...


@dataclass(frozen=True, slots=True)
class Job:
    """Every column of `jobs`, as stored (store/jobs.py builds it with psycopg's class_row): a row
    written past the CLI may hold what no command writes, core/job_row.py says what."""

    id: int
    user_name: str
    group_name: str
    state: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    resources: dict[str, float]
    node_labels: dict[str, str]
    priority: int
    submitted_at: datetime
    not_before: datetime | None
    max_runtime_s: float | None
    attempt: int
    submission_id: str | None
    node: str | None
    ray_status: str | None
    ray_message: str | None
    reason: str | None
    message: str | None
    started_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    cancel_requested_at: datetime | None
    updated_at: datetime
    requeues: int
    accepted_at: datetime | None
    requeued_at: datetime | None
    priority_class: str | None
    preempted_at: datetime | None
    preempted_by: int | None
    preemptions: int
    reserved_node: str | None
    reserved_at: datetime | None
    queue_position: int | None
    estimated_start_at: datetime | None
    estimate_basis: str | None
    bundles: list[dict[str, float]] | None
    bundle_strategy: str | None
    bundle_nodes: list[str] | None
    observed: dict[str, Any] | None
    reserved_kind: str | None
    reserved_bundle_nodes: list[str] | None
    reserved_start: datetime | None
    waiting_since: datetime | None
    version: Any
    placed_at: datetime | None
    after: list[dict[str, Any]] | None
    schedule: str | None
    slot: datetime | None
    array_id: int | None
    array_index: int | None
    array_throttle: int | None
    # The Ray cluster of its group it was placed in (None: placed before groups had several).
    cluster: str | None


# The gateway's metadata keys for a job's options (`queue.priority`): the gateway takes them out
# of the metadata, and a submit elsewhere refuses them (core/specs.py), where they would be
# passed to Ray unread.
GATEWAY_PREFIX = "queue."


@dataclass(frozen=True, slots=True)
class JobField:
    column: str
    # Its key in `jobs --json` and `show` (None: not shown).
    shown: str | None = None
    # For a field a submit takes: JobSpec's field, whose name a refusal gives (None: the queue writes it).
    spec: str | None = None
    # job.api.submit's keyword, where it is not `spec`.
    keyword: str | None = None
    # The `submit` option, how its text is read (cli/jobs.py READS), its metavar and help. A "list"
    # is a repeatable option whose values may each be comma-separated words, given to the check as
    # texts, as the gateway's key is (where another list or map is JSON).
    option: str | None = None
    read: str = "text"
    metavar: str | None = None
    help: str | None = None
    # Its key in a Ray job's metadata at the gateway (gateway/translate.py), GATEWAY_PREFIX and a name.
    gateway: str | None = None
    # How JobSpec checks it (core/specs.py CHECKS: a name of a check, not of a field), the checks'
    # fields it reads (they come first), its bounds (pydantic's Field: ge, le, gt) and its default.
    check: str | None = None
    needs: tuple[str, ...] = ()
    bounds: tuple[tuple[str, float], ...] = ()
    default: Any = None
    # How people's reads check its stored value (core/job_row.py: a row written past the CLI).
    stored: str | None = None
    # Whether the planner reads it: its snapshot job carries it (core/group_snapshot.py).
    planned: bool = False
    # Why a schedule's template refuses it (cli/schedules.py; None: it takes it): every slot's job
    # would get the same value.
    unscheduled: str | None = None

    @property
    def submitted(self) -> bool:
        return self.spec is not None

    @property
    def api_keyword(self) -> str:
        return self.keyword or self.spec or self.column

    @property
    def type(self) -> Any:
        """Its Python type, as Job declares its column."""
        return _hints()[self.column]

    @property
    def structured(self) -> bool:
        """A list or a map: a text that gives it (a metadata value) is JSON."""
        kind = self.type
        return any(get_origin(arm) in (list, dict) for arm in getattr(kind, "__args__", (kind,)))

    @property
    def is_time(self) -> bool:
        return datetime in getattr(self.type, "__args__", (self.type,))

    @property
    def optional(self) -> bool:
        return type(None) in getattr(self.type, "__args__", ())


@cache
def _hints() -> dict[str, Any]:
    return get_type_hints(Job)


INT32_MAX = 2**31 - 1
_PRIORITY_BOUNDS = (("ge", -INT32_MAX), ("le", INT32_MAX))

# In the order of `jobs --json` and `show`; a submit's fields in the order JobSpec checks them, but
# for `needs`.
FIELDS: tuple[JobField, ...] = (
    JobField("id", "id"),
    JobField("user_name", "user", spec="user", option="--user", check="user name", default=REQUIRED, planned=True),
    JobField("group_name", "group", spec="group", option="--group", check="group name", default=REQUIRED),
    JobField("state", "state"),
    JobField("entrypoint", "entrypoint", spec="entrypoint", option="--entrypoint", help="the shell command Ray runs",
             check="entrypoint", default=REQUIRED),
    JobField("resources", "resources", spec="resources", option="--resource", read="resources", metavar="NAME=AMOUNT",
             help="any Ray resource (repeatable)", check="resources", needs=("bundles",), default={"CPU": 1.0},
             stored="resources", planned=True),
    # Its work beside the driver, and the node planned for each bundle once placed (else None).
    JobField("bundles", "bundles", spec="bundles", option="--bundle", read="bundles", metavar="[Nx]NAME=AMOUNT,...",
             help="what its work needs beside the driver, e.g. 4xGPU=1,CPU=8 (four bundles; repeatable)",
             gateway="queue.bundles", check="bundles", stored="bundles", planned=True),
    JobField("bundle_strategy", "bundle_strategy", spec="bundle_strategy", option="--bundle-strategy",
             metavar="STRATEGY", help="how its bundles are spread: PACK (default), SPREAD, STRICT_PACK or STRICT_SPREAD",
             gateway="queue.bundle_strategy", check="bundle strategy", needs=("bundles",), planned=True),
    JobField("bundle_nodes", "bundle_nodes", stored="nodes"),
    JobField("node_labels", "node_labels", spec="node_labels", option="--node-label", read="pairs", metavar="K=V",
             help="run only on nodes with this label (repeatable)", check="labels", default={}, stored="labels",
             planned=True),
    JobField("runtime_env", "runtime_env", spec="runtime_env", option="--runtime-env", read="json",
             metavar="JSON|@FILE", help="Ray runtime_env, as JSON or @file", check="runtime_env", default={}),
    JobField("metadata", "metadata", spec="metadata", option="--metadata", read="pairs", metavar="K=V",
             help="passed to Ray as job metadata (repeatable)", check="metadata", default={}),
    JobField("priority", "priority", spec="priority", option="--priority", help="higher goes first within the user's jobs",
             gateway="queue.priority", check="whole number", bounds=_PRIORITY_BOUNDS, default=0, planned=True),
    # None: the group's default class. Its people's name is `class`, the column's `priority_class`.
    JobField("priority_class", "class", spec="priority_class", option="--class", metavar="NAME",
             help="a priority class of the group (default: the group's default class)", gateway="queue.class",
             check="class name", planned=True),
    JobField("attempt", "attempt"),
    JobField("preemptions", "preemptions"),
    JobField("submission_id", "submission_id"),
    JobField("node", "node"),
    JobField("cluster", "cluster"),
    JobField("reason", "reason"),
    JobField("message", "message"),
    JobField("ray_status", "ray_status"),
    JobField("ray_message", "ray_message"),
    JobField("exit_code", "exit_code"),
    JobField("submitted_at", "submitted_at", planned=True),
    # When a tick placed the current attempt (its intent), and when Ray took its submission.
    JobField("placed_at", "placed_at"),
    JobField("accepted_at", "accepted_at"),
    JobField("not_before", "not_before", spec="not_before", option="--not-before", metavar="TIME",
             help="do not start before this time (ISO 8601)", gateway="queue.not_before", check="time", planned=True,
             unscheduled="a schedule's jobs cannot all wait for one time (each slot's job would wait, and all start "
                         "together then); add the schedule then, or pause it until then"),
    JobField("max_runtime_s", "max_runtime_s", spec="max_runtime_s", keyword="max_runtime", option="--max-runtime",
             metavar="DURATION", help="stop the job after this long, e.g. 2h", gateway="queue.max_runtime",
             check="duration", bounds=(("gt", 0),), stored="duration", planned=True),
    # The jobs it waits for (core/dependencies.py), each {"job": id, "when": "ok"|"any"|"fail"}.
    JobField("after", "after", spec="after", option="--after", read="list", metavar="ID[:ok|any|fail]",
             help="start only once job ID succeeded (:any once it ended, :fail once it failed); "
                  "repeatable or comma-separated, all must hold",
             gateway="queue.after", check="dependencies", stored="after",
             unscheduled="a schedule's jobs cannot wait for other jobs (each slot would wait for the same ones); "
                         "use --concurrency forbid to keep a run from starting before the last one ended"),
    JobField("started_at", "started_at"),
    JobField("finished_at", "finished_at"),
    JobField("cancel_requested_at", "cancel_requested_at"),
    # A task of an array (core/arrays.py): the id of its first task, its index, the array's
    # throttle. A submit writes them from one `array` option, not as fields of JobSpec.
    JobField("array_id", "array_id"),
    JobField("array_index", "array_index"),
    JobField("array_throttle", "array_throttle"),
    JobField("updated_at", "updated_at"),
    # The schedule that made it and for which slot (sql/0026): the tick's to write, not a submit's.
    JobField("schedule", "schedule"),
    JobField("slot", "slot"),
    # The queue's own, shown in their own words (cli/jobs.py) or not at all.
    JobField("requeues"),
    JobField("requeued_at"),
    JobField("preempted_at"),
    JobField("preempted_by"),
    JobField("reserved_node"),
    JobField("reserved_at"),
    JobField("queue_position"),
    JobField("estimated_start_at"),
    JobField("estimate_basis"),
    JobField("observed", stored="observed"),
    JobField("reserved_kind"),
    JobField("reserved_bundle_nodes"),
    JobField("reserved_start"),
    JobField("waiting_since"),
    JobField("version"),
)

SUBMITTED: tuple[JobField, ...] = tuple(field for field in FIELDS if field.submitted)
# What a submit writes of an array's task beside its fields (store/jobs.py insert_array).
ARRAY_COLUMNS = ("array_id", "array_index", "array_throttle")
SHOWN: tuple[JobField, ...] = tuple(field for field in FIELDS if field.shown)
STORED: tuple[JobField, ...] = tuple(field for field in FIELDS if field.stored)
COLUMNS: tuple[str, ...] = tuple(Job.__dataclass_fields__)


# The tick's rows: a job as the tick's statements read it, one typed row per statement's columns
# (store/tick_jobs.py and scheduler/pending.py build them): the names are the columns', the ids the
# table's ints.


@dataclass(frozen=True, slots=True)
class ActiveJob:
    """One of our jobs Ray knows of, or is about to (SUBMITTING, SUBMITTED, RUNNING)."""

    id: int
    user_name: str
    state: State
    resources: dict[str, float]
    node: str | None
    attempt: int
    submission_id: str | None
    ray_status: str | None = None
    ray_message: str | None = None
    reason: str | None = None
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    max_runtime_s: float | None = None
    cancel_requested_at: datetime | None = None
    requeues: int = 0
    accepted_at: datetime | None = None
    priority_class: str | None = None
    preempted_at: datetime | None = None
    preempted_by: int | None = None
    # Whether Ray builds something for it before the driver starts (env_vars alone: no).
    builds_runtime_env: bool = False
    # Its bundles and the node planned for each (None: its driver alone); held there until it ends.
    bundles: list[dict[str, float]] | None = None
    bundle_strategy: str | None = None
    bundle_nodes: list[str] | None = None
    # Its use as the last tick observed it (core/observed.py `record`), None before any.
    observed: dict[str, Any] | None = None
    # The array it is a task of (None: none), whose throttle counts it.
    array_id: int | None = None
    # The cluster of its group it was placed in (None: the first).
    cluster: str | None = None


class PendingRow(NamedTuple):
    """A pending job as the tick reads it. The request and labels stay JSON text: with 100k jobs,
    decoding a jsonb and building a dict per row would cost more than the rest of the read, and
    the few distinct requests are decoded once each (core/group_snapshot.py)."""

    id: int
    user_name: str
    resources: str
    node_labels: str
    priority: int
    submitted_at: datetime
    not_before: datetime | None
    reason: str | None
    message: str | None
    priority_class: str | None = None
    # The node it holds room on since it preempted, and since when; a gang that preempted across
    # nodes, the node of each bundle too (JSON text).
    reserved_node: str | None = None
    reserved_at: datetime | None = None
    max_runtime_s: float | None = None
    # The estimate stored by the last tick (core/estimates.py).
    queue_position: int | None = None
    estimated_start_at: datetime | None = None
    estimate_basis: str | None = None
    # Its bundles as JSON text (None for most jobs, which cost nothing more), and their strategy.
    bundles: str | None = None
    bundle_strategy: BundleStrategy | None = None
    # Its reservation's kind ("preemption", "head"), its bundles' nodes and its expected start
    # (`Held`), and since when it has waited for resources (None: not yet).
    reserved_kind: ReservationKind | None = None
    reserved_bundle_nodes: list[str] | None = None
    reserved_start: datetime | None = None
    waiting_since: datetime | None = None
    # The jobs it waits for, as JSON text (None for most jobs; core/dependents.py).
    after: str | None = None
    # Of an array's task: the array, and its throttle (core/arrays.py `throttle`, before the plan).
    array_id: int | None = None
    array_throttle: int | None = None


@dataclass(frozen=True, slots=True)
class Intent:
    """What the submit step sends to Ray for a SUBMITTING job."""

    id: int
    user_name: str
    group_name: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, Any]
    resources: dict[str, float]
    node: str
    attempt: int
    submission_id: str
    priority_class: str | None
    # What the job learns of its footprint: its bundles, their strategy and planned nodes.
    bundles: list[dict[str, float]] | None = None
    bundle_strategy: str | None = None
    bundle_nodes: list[str] | None = None
    # Of an array's task: the array's id and its index (JOB_ARRAY_ID, JOB_ARRAY_INDEX).
    array_id: int | None = None
    array_index: int | None = None
    # The cluster of its node.
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class Victim:
    """A running job the commit marked to stop for `preempted_by`."""

    id: int
    user_name: str
    priority_class: str | None
    node: str | None
    started_at: datetime | None
    submission_id: str
    preempted_by: int
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class Moved:
    """A job a tick's write moved, with what its log line says: its state after the write, and its
    count of requeues or preemptions for the writes that add one."""

    id: int
    user_name: str
    state: State | None = None
    requeues: int | None = None
    preemptions: int | None = None
