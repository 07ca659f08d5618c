"""The planner's interface, exactly as docs/planner.md ("Snapshot", "Plan"): a snapshot in, a plan out.

Building: `Snapshot.model_validate(dict)` is the way in for the tick, `Snapshot.from_json(text)` for
files; each checks every field and names the bad one. The long lists (`running`, `pending`) hold
frozen msgspec Structs (`Running`, `Pending`), read by attribute: made once as the text is parsed
or the dicts converted, with no dict per job to make (a pending job takes 112 bytes, as a dict 184).
A key not given reads as None where null may be given (`started_at`), as 0 for `priority`, else as
UNSET, which is falsy (`bundles`, `priority_class` for the key `class`). Their fields are those of the
TypedDicts `RunningEntry` and `PendingEntry`, which pydantic reads. `bench/plan.py` times both ways in.
Datetimes may be given as aware `datetime` objects (as psycopg returns them) or ISO 8601 text; a
fraction of a second beyond microseconds is rounded, as PostgreSQL does.

The two long lists are read by msgspec first, on the same types (each alias below carries its
constraints for both libraries). Only where msgspec refuses a list, or might read it otherwise
than pydantic, does pydantic validate it, so that a bad job is named in pydantic's words, as ever
(`_fast_jobs`); what pydantic reads is then made Structs. From JSON, msgspec reads the two lists in
the same pass as it parses the text (`from_json`).

`Plan` is built by the planner without re-validation; `Plan.model_dump(mode="json")` is the
PLAN-FORMAT JSON, and `plan.placements` / `plan.waiting` are lists of plain dicts.
"""

from __future__ import annotations

import sys
import typing
from bisect import bisect_right
from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import islice
from operator import attrgetter, le, lt
from typing import Annotated, Any, Literal, NotRequired, TypeAlias

import msgspec
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from job.core import group_defaults
from job.core.planner.rules import POLICY_NAMES, PREEMPTION_NAMES, PREEMPTIONS, SELECTOR_NAMES, SELECTORS
from job.core.resources import to_units
from job.core.states import PLANNER_REASONS
from job.core.units import MAX_AMOUNT

# msgspec has no allow_inf_nan: an upper bound refuses inf, and any bound refuses nan.
_FINITE = sys.float_info.max
Name = Annotated[str, Field(min_length=1), msgspec.Meta(min_length=1)]
# At most what Ray can count (units.MAX_AMOUNT): a node of 1e308 CPUs was a traceback in to_units.
Amount = Annotated[float, Field(ge=0, le=MAX_AMOUNT, allow_inf_nan=False, strict=True), msgspec.Meta(ge=0, le=MAX_AMOUNT)]
ResourceMap = dict[Name, Amount]
if typing.TYPE_CHECKING:
    # Names read from registries as the module runs, which a type checker cannot: to it, text.
    Policy: TypeAlias = str
    SelectorName: TypeAlias = str
    Reason: TypeAlias = str
    Preemption: TypeAlias = str
else:
    # The rules' names, as rules.py declares them.
    Policy = Literal[POLICY_NAMES]
    SelectorName = Literal[SELECTOR_NAMES]
    # ScalingUp is never the planner's: job/core/autoscale.py gives it, after the plan, to Unschedulable
    # jobs that a node type of an autoscaling cluster can hold.
    Reason = Literal[PLANNER_REASONS]
    Preemption = Literal[PREEMPTION_NAMES]
# Ray's placement strategies, in Ray's own words (`ray.util.placement_group`).
BundleStrategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]
# Far more bundles than any gang of workers needs, few enough that one job cannot make a plan slow.
MAX_BUNDLES = 64


def _asks_for_something(bundle: dict[str, float]) -> dict[str, float]:
    # Ray refuses a bundle of nothing: refused here, where the field can be named.
    if not any(amount > 0 for amount in bundle.values()):
        raise ValueError("a bundle must ask for some resource")
    return bundle


Bundle = Annotated[ResourceMap, AfterValidator(_asks_for_something)]
Bundles = Annotated[list[Bundle], Field(min_length=1, max_length=MAX_BUNDLES), msgspec.Meta(min_length=1, max_length=MAX_BUNDLES)]


def _as_msgspec_reads(value: Any) -> Any:
    # msgspec rounds a fraction of a second beyond microseconds (as PostgreSQL does), pydantic cuts
    # it: a text msgspec reads is its time for both readers, so that no job need be looked at for one.
    if isinstance(value, str):
        try:
            return msgspec.convert(value, datetime)
        except msgspec.ValidationError:
            pass
    return value


Time = Annotated[datetime, AwareDatetime, BeforeValidator(_as_msgspec_reads), msgspec.Meta(tz=True)]


class _StrictModel(BaseModel):
    # A misspelt option silently ignored would plan with its default: refuse it instead.
    model_config = ConfigDict(extra="forbid")


class PriorityClass(_StrictModel):
    name: Name
    value: int
    preemptible: bool = True


DEFAULT_CLASSES = (PriorityClass.model_validate(group_defaults.DEFAULT_CLASS),)


class Group(_StrictModel):
    name: Name = "default"
    policy: Policy
    selector: SelectorName
    resource_priority: list[Name] = Field(default_factory=lambda: list(group_defaults.RESOURCE_PRIORITY))
    half_life_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = group_defaults.HALF_LIFE_S
    max_running_per_user: Annotated[int, Field(ge=1)] | None = None
    max_resources_per_user: ResourceMap | None = None
    strict_order: bool = False
    priority_classes: list[PriorityClass] = Field(default_factory=lambda: list(DEFAULT_CLASSES), min_length=1)
    default_class: Name = DEFAULT_CLASSES[0].name
    preemption: Preemption = "off"
    min_runtime_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = group_defaults.MIN_RUNTIME_S
    max_preemptions: Annotated[int, Field(ge=0)] = group_defaults.MAX_PREEMPTIONS
    # The job first in line of its class that has waited this long for resources reserves the
    # node(s) where it will fit soonest; at most max_reservations at a time (0: none).
    reserve_after_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = group_defaults.RESERVE_AFTER_S
    max_reservations: Annotated[int, Field(ge=0)] = group_defaults.MAX_RESERVATIONS


@with_config(ConfigDict(extra="forbid"))
class HeldBeyond(TypedDict):
    """What one of our running jobs holds on a node beyond what its `running` entry counts there:
    its work (actors, tasks, placement groups) that Ray shows on the node and it did not declare."""

    job: Name
    resources: ResourceMap


class Node(_StrictModel):
    id: Name
    resources: ResourceMap
    labels: dict[str, str] = Field(default_factory=dict)
    # What work outside the queue holds on the node (Ray's amounts; the tick works it out from what
    # Ray reports free). The planner keeps it free, at most the node's total of each resource.
    outside: ResourceMap = Field(default_factory=dict)
    # What our running jobs hold there beyond their declaration (the tick's observed use): kept
    # free like outside load, and named in the waiting messages by job and user.
    held: list[HeldBeyond] = Field(default_factory=list)


# `class` is a Python keyword: the functional form of TypedDict is the way to name that key (and
# a type checker reads that form only as an assignment of its own: the config is set after).
RunningEntry = TypedDict("RunningEntry", {
    "id": Name,
    "user": Name,
    # A node that is not in `nodes` (it left the group) holds nothing, but the user is charged.
    "node": Name,
    "resources": ResourceMap,
    "class": NotRequired[Name],
    # When Ray started it; None: not started, never a victim.
    "started_at": NotRequired[Time | None],
    # Asked to stop already: its resources are still held, and it is never chosen again.
    "stopping": NotRequired[bool],
    # Its bundles and the node each is held on, one per bundle: its whole footprint is held there.
    "bundles": NotRequired[Bundles],
    "bundle_strategy": NotRequired[BundleStrategy],
    "bundle_nodes": NotRequired[list[Name]],
    # When it is expected to end (its start plus its max runtime, or an estimate); None: unknown.
    "expected_end": NotRequired[Time | None],
    # What Ray shows it holding, on every node (the tick's observed use): its user is charged, per
    # resource, the larger of this and its declared footprint.
    "uses": NotRequired[ResourceMap],
})
with_config(ConfigDict(extra="forbid"))(RunningEntry)


PendingEntry = TypedDict("PendingEntry", {
    "id": Name,
    "user": Name,
    "resources": ResourceMap,
    "priority": NotRequired[int],
    "submitted_at": NotRequired[Time | None],
    "not_before": NotRequired[Time | None],
    "node_labels": NotRequired[dict[str, str]],
    "class": NotRequired[Name],
    # What its work needs beside the driver, placed all or nothing with it (docs/planner.md, "Bundles").
    "bundles": NotRequired[Bundles],
    "bundle_strategy": NotRequired[BundleStrategy],
    # Since when it has waited for resources (default: its submitted_at).
    "waiting_since": NotRequired[Time | None],
    # Its max runtime: only a job whose end is known may use the room a reservation holds.
    "max_runtime_s": NotRequired[Annotated[float, Field(gt=0, allow_inf_nan=False), msgspec.Meta(gt=0, le=_FINITE)] | None],
})
with_config(ConfigDict(extra="forbid"))(PendingEntry)


def _struct_of(kind: type, defaults: dict[str, Any]) -> type[msgspec.Struct]:
    """The kind of job as the planner reads it: a msgspec Struct on the same types, which refuses
    the keys it does not name, as pydantic does. A key not given reads as `defaults`' value, else
    None where null may be given, else UNSET; the key `class` is the attribute `priority_class`."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for key, hint in typing.get_type_hints(kind, include_extras=True).items():
        name = "priority_class" if key == "class" else key
        if typing.get_origin(hint) is NotRequired:
            hint = typing.get_args(hint)[0]
            default = defaults.get(key, None if type(None) in typing.get_args(hint) else msgspec.UNSET)
            fields.append((name, hint | msgspec.UnsetType if default is msgspec.UNSET else hint, default))
        else:
            fields.append((name, hint))
    # A job holds no cycle for the collector to look for; a default is left out of its dump.
    return msgspec.defstruct(kind.__name__.removesuffix("Entry"), fields, kw_only=True, forbid_unknown_fields=True,
                             frozen=True, gc=False, omit_defaults=True, rename={"priority_class": "class"}, module=__name__)


if typing.TYPE_CHECKING:
    # What `_struct_of` makes of the TypedDicts above, which a type checker cannot run: the same
    # fields, types and defaults, kept in step with them.
    class Running(msgspec.Struct, kw_only=True, frozen=True):
        id: Name
        user: Name
        node: Name
        resources: ResourceMap
        priority_class: Name | msgspec.UnsetType = msgspec.UNSET
        started_at: Time | None = None
        stopping: bool = False
        bundles: Bundles | msgspec.UnsetType = msgspec.UNSET
        bundle_strategy: BundleStrategy | msgspec.UnsetType = msgspec.UNSET
        bundle_nodes: list[Name] | msgspec.UnsetType = msgspec.UNSET
        expected_end: Time | None = None
        uses: ResourceMap | msgspec.UnsetType = msgspec.UNSET

    class Pending(msgspec.Struct, kw_only=True, frozen=True):
        id: Name
        user: Name
        resources: ResourceMap
        priority: int = 0
        submitted_at: Time | None = None
        not_before: Time | None = None
        node_labels: dict[str, str] | msgspec.UnsetType = msgspec.UNSET
        priority_class: Name | msgspec.UnsetType = msgspec.UNSET
        bundles: Bundles | msgspec.UnsetType = msgspec.UNSET
        bundle_strategy: BundleStrategy | msgspec.UnsetType = msgspec.UNSET
        waiting_since: Time | None = None
        max_runtime_s: float | None = None
else:
    Running = _struct_of(RunningEntry, {"stopping": False})
    Pending = _struct_of(PendingEntry, {"priority": 0})
# The type each list of jobs is read as, by the TypedDict pydantic reads it as.
_LISTS: dict[object, type[list[Running]] | type[list[Pending]]] = {RunningEntry: list[Running], PendingEntry: list[Pending]}


def started(job: Pending, node: str, bundle_nodes: Sequence[str] = (), started_at: datetime | None = None,
            default_class: str | msgspec.UnsetType = msgspec.UNSET) -> Running:
    """The running job `job` becomes, placed on `node` and its bundles on `bundle_nodes`: what it
    asks, its class (`default_class` where it names none), and, started at `started_at`, when its
    max runtime ends it: what a reservation counts on."""
    ends = (started_at + timedelta(seconds=job.max_runtime_s)
            if started_at is not None and job.max_runtime_s is not None else None)
    return Running(id=job.id, user=job.user, node=node, resources=job.resources,
                   priority_class=job.priority_class or default_class, started_at=started_at,
                   bundles=job.bundles, bundle_strategy=job.bundle_strategy,
                   bundle_nodes=list(bundle_nodes) if bundle_nodes else msgspec.UNSET, expected_end=ends)


def _fast_jobs(jobs: Any, kind: object) -> list[Running] | list[Pending] | None:
    """The jobs as pydantic would read them, made Structs by msgspec; None where msgspec refuses
    them or may read them otherwise than pydantic, or where one is not a dict. Strict, msgspec
    takes no text for a number and no 1 for True, which pydantic converts; and it knows no
    validator: a bundle must ask for something (`_bundles_ask`)."""
    try:
        checked = msgspec.convert(jobs, _LISTS[kind], strict=True)
        return checked if _bundles_ask(checked) else None
    except (msgspec.ValidationError, TypeError):
        return None


_BUNDLES, _BUNDLE_NODES, _CLASS, _ID = (attrgetter(name) for name in ("bundles", "bundle_nodes", "priority_class", "id"))


def _unique_ids(jobs: Sequence[msgspec.Struct]) -> bool:
    """Whether no two jobs have the same id. Ids in the tick's order (shorter first, then by text,
    as entries.py sorts them) are found so by comparing neighbours, a run of one length at a time:
    cheaper than a set of a million."""
    ids = list(map(_ID, jobs))
    lengths = list(map(len, ids))
    if all(map(le, lengths, islice(lengths, 1, None))):
        start = 0
        while start < len(ids):
            end = bisect_right(lengths, lengths[start], start)
            if not all(map(lt, islice(ids, start, end - 1), islice(ids, start + 1, end))):
                break
            start = end
        else:
            return True
    return len(set(ids)) == len(ids)


def _bundles_ask(checked: Sequence[Running | Pending]) -> bool:
    """Whether every bundle of the jobs asks for some resource (`_asks_for_something`)."""
    return all(any(amount > 0 for amount in bundle.values())
               for bundles in filter(None, map(_BUNDLES, checked)) for bundle in bundles)


# Why a job holds a reservation: it preempted for the node, or it is first in line and has waited
# past the group's reserve_after.
ReservationKind = Literal["preemption", "head"]


@with_config(ConfigDict(extra="forbid"))
class PlannedReservation(TypedDict):
    """A pending job that keeps room for its request on `node` (its driver's; each bundle's on
    `bundle_nodes`)."""

    job: Name
    node: Name
    kind: NotRequired[ReservationKind]
    bundle_nodes: NotRequired[list[Name]]
    # When it is expected to start (the plan's; a snapshot's is judged again).
    expected_start: NotRequired[Time | None]


class User(_StrictModel):
    shares: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1
    usage: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0
    # Where set, these replace the group's per-user limits for this user.
    max_running: Annotated[int, Field(ge=1)] | None = None
    max_resources: ResourceMap | None = None
    # The account the user is in (`accounts`); None: the root, beside the top accounts.
    account: Name | None = None


DEFAULT_USER = User()


class Account(_StrictModel):
    """A team: its users and child accounts share its part of the group (docs/planner.md, "Accounts")."""

    # None: a top account, child of the root.
    parent: Name | None = None
    shares: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1
    # Limits on the whole subtree's jobs: running jobs, resources held.
    max_running: Annotated[int, Field(ge=1)] | None = None
    max_resources: ResourceMap | None = None


def limits_of(group: Group, user: User | None) -> tuple[int | None, dict[str, int] | None]:
    """A user's most running jobs and most resources (in units), its own where set, else the
    group's per-user ones. The resources stay a plain dict: a limit of 0 is a limit."""
    user = user or DEFAULT_USER
    most = user.max_running if user.max_running is not None else group.max_running_per_user
    limits = user.max_resources if user.max_resources is not None else group.max_resources_per_user
    return most, None if limits is None else {name: to_units(amount) for name, amount in limits.items()}


class Snapshot(_StrictModel):
    group: Group
    now: AwareDatetime | None = None
    nodes: list[Node] = Field(default_factory=list)
    # Read as these TypedDicts, held as their Structs (`_jobs`): to the type checker, the Structs.
    if typing.TYPE_CHECKING:
        running: list[Running] = Field(default_factory=list)
        pending: list[Pending] = Field(default_factory=list)
    else:
        running: list[RunningEntry] = Field(default_factory=list)
        pending: list[PendingEntry] = Field(default_factory=list)
    users: dict[Name, User] = Field(default_factory=dict)
    accounts: dict[Name, Account] = Field(default_factory=dict)
    state: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    reservations: list[PlannedReservation] = Field(default_factory=list)

    @classmethod
    def from_json(cls, data: bytes | str) -> Snapshot:
        """The snapshot of a JSON text, as `model_validate_json` reads it. msgspec reads the jobs
        while it parses, and pydantic the rest; where msgspec refuses the text, or could read it
        otherwise, pydantic reads it all, so that what is wrong is named in pydantic's words."""
        data = data.encode() if isinstance(data, str) else data
        try:
            return _from_json(data) or cls.model_validate_json(data)
        except (msgspec.ValidationError, msgspec.DecodeError, ValidationError):
            return cls.model_validate_json(data)

    @field_validator("running", "pending", mode="wrap")
    @classmethod
    def _jobs(cls, jobs: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
              ) -> list[Running] | list[Pending]:
        if info.context is _READ:
            return jobs
        kind = RunningEntry if info.field_name == "running" else PendingEntry
        fast = _fast_jobs(jobs, kind)
        # What pydantic reads is checked: it only becomes Structs.
        return msgspec.convert(handler(jobs), _LISTS[kind]) if fast is None else fast

    @field_serializer("running", "pending")
    def _dump_jobs(self, jobs: list[Running] | list[Pending]) -> list[dict[str, Any]]:
        # The jobs as the format gives them: a key not given is not there, times stay datetimes.
        return msgspec.to_builtins(jobs, builtin_types=(datetime,))

    @model_validator(mode="after")
    def _consistent(self) -> Snapshot:
        _first_repeat("group.resource_priority", self.group.resource_priority)
        _first_repeat("nodes", [node.id for node in self.nodes], ".id")
        if not _unique_ids(self.pending):
            _first_repeat("pending", [job.id for job in self.pending], ".id")
        if self.now is None:
            self._timeless()
        self._classes_known()
        _first_repeat("reservations", [r["job"] for r in self.reservations], ".job")
        check_tree(self.accounts, self.users)
        # Few running jobs have bundles: each is looked at only then.
        if any(map(_BUNDLES, self.running)) or any(map(_BUNDLE_NODES, self.running)):
            for index, job in enumerate(self.running):
                _held_bundles(f"running[{index}]", job)
        selector = SELECTORS[self.group.selector]
        try:
            selector.kind.State.model_validate(self.state.get(selector.state_name, {}))
        except ValidationError as exc:
            raise ValueError(f"state.{selector.state_name}.{describe_error(exc)}") from None
        return self

    def _timeless(self) -> None:
        """A snapshot without `now` plans nothing that needs one: a start time, preemption."""
        for index, job in enumerate(self.pending):
            if job.not_before is not None:
                raise ValueError(f"now: required, since pending[{index}].not_before is set")
        if PREEMPTIONS[self.group.preemption].preempts:
            raise ValueError(f"now: required, since group.preemption is {self.group.preemption!r}")

    def _classes_known(self) -> None:
        """Every class named, the default's and the jobs', is one of the group's, each named once."""
        classes = {c.name for c in self.group.priority_classes}
        _first_repeat("group.priority_classes", [c.name for c in self.group.priority_classes], ".name")
        if self.group.default_class not in classes:
            raise ValueError(f"group.default_class: {self.group.default_class!r} is not one of group.priority_classes")
        lists: tuple[tuple[str, Sequence[Running | Pending]], ...] = (("running", self.running), ("pending", self.pending))
        for field, jobs in lists:
            # Few jobs name a class, and fewer a wrong one: each is looked for only then.
            named = set(map(_CLASS, jobs))
            named.discard(msgspec.UNSET)
            if named <= classes:
                continue
            for index, job in enumerate(jobs):
                if (job.priority_class or self.group.default_class) not in classes:
                    raise ValueError(f"{field}[{index}].class: {job.priority_class!r} is not one of group.priority_classes")


# The validation context of a snapshot whose jobs `_from_json` has read (identity: no input can be it).
_READ: dict[str, Any] = {}


# Every field of a snapshot but its jobs.
_REST = tuple(name for name in Snapshot.model_fields if name not in ("running", "pending"))
# A snapshot's text as msgspec reads it: the jobs checked, the rest as JSON gives it, for pydantic.
if typing.TYPE_CHECKING:
    class _Document(msgspec.Struct):
        running: list[Running]
        pending: list[Pending]
else:
    _Document = msgspec.defstruct("_Document", [("running", list[Running], []), ("pending", list[Pending], []),
                                                *((name, Any, msgspec.UNSET) for name in _REST)],
                                  forbid_unknown_fields=True)


def _from_json(data: bytes) -> Snapshot | None:
    """The snapshot, its jobs read by msgspec; None where a bundle asks for nothing, which only
    pydantic's validator names."""
    document = msgspec.json.decode(data, type=_Document, strict=True)
    running, pending = document.running, document.pending
    if not (_bundles_ask(running) and _bundles_ask(pending)):
        return None
    given = {name: value for name in _REST if (value := getattr(document, name)) is not msgspec.UNSET}
    return Snapshot.model_validate({**given, "running": running, "pending": pending}, context=_READ)


def check_tree(accounts: dict[str, Account], users: dict[str, User]) -> None:
    """Every parent and every user's account is an account, and no account is its own ancestor."""
    for name, account in accounts.items():
        if account.parent is not None and account.parent not in accounts:
            raise ValueError(f"accounts.{name}.parent: {account.parent!r} is not one of accounts")
    for name, user in users.items():
        if user.account is not None and user.account not in accounts:
            raise ValueError(f"users.{name}.account: {user.account!r} is not one of accounts")
    for name in accounts:
        seen, at = {name}, accounts[name].parent
        while at is not None:
            if at in seen:
                raise ValueError(f"accounts.{name}.parent: a cycle through {at!r}")
            seen.add(at)
            at = accounts[at].parent


def account_path(accounts: dict[str, Account], name: str | None) -> list[str]:
    """The accounts from the top down to `name` (the root itself not named); [] for None."""
    path = []
    while name is not None:
        path.append(name)
        name = accounts[name].parent
    return path[::-1]


def _held_bundles(field: str, job: Running) -> None:
    """A running job's bundles each name the node they are held on, and only bundles do."""
    nodes = None if job.bundle_nodes is msgspec.UNSET else job.bundle_nodes
    bundles = job.bundles or None
    if nodes is None and bundles is not None:
        raise ValueError(f"{field}.bundle_nodes: required, since {field}.bundles is set")
    if nodes is not None and len(nodes) != len(bundles or ()):
        raise ValueError(f"{field}.bundle_nodes: {len(nodes)} nodes for {len(bundles or ())} bundles, one per bundle")


def _first_repeat(field: str, values: list[str], suffix: str = "") -> None:
    if len(set(values)) == len(values):
        return
    seen: set[str] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise ValueError(f"{field}[{index}]{suffix}: {value!r} appears more than once")
        seen.add(value)


class Placement(TypedDict):
    job: str
    node: str
    # A job with bundles only: the node of each bundle, in the order of its bundles.
    bundle_nodes: NotRequired[list[str]]


class Waiting(TypedDict):
    job: str
    reason: Reason
    message: str


class PlannedPreemption(TypedDict):
    """The victims to stop so that `job` fits on `node` (its driver's; a gang spread over nodes,
    each bundle on its node of `bundle_nodes`)."""

    job: str
    node: str
    victims: list[str]
    bundle_nodes: NotRequired[list[str]]


class Plan(BaseModel):
    placements: list[Placement]
    waiting: list[Waiting]
    state: dict[str, dict[str, Any]]
    # Present when the group preempts or holds reservations: the preemptions decided, and the
    # reservations as they stand after the plan (the whole list).
    preemptions: list[PlannedPreemption] | None = None
    reservations: list[PlannedReservation] | None = None
    # Not in the JSON: the waiting records again, grouped as the planner words them, (reason,
    # message, records) with each record in one group, so that the tick compares a group's 100k
    # jobs with their rows by set operations (core/waiting.py) rather than record by record.
    said: list[tuple[Reason, str, list[Waiting]]] | None = Field(default=None, exclude=True)

    def document(self) -> dict[str, Any]:
        """The PLAN-FORMAT JSON as a dict: the optional lists only where present."""
        return self.model_dump(mode="json", exclude_none=True)


def describe_error(exc: ValidationError) -> str:
    """The first error as `pending[3].resources.CPU: Input should be ...`."""
    error = exc.errors(include_url=False)[0]
    path = "".join(_path_part(part) for part in error["loc"]).lstrip(".")
    cause = error.get("ctx", {}).get("error")
    message = str(cause) if isinstance(cause, ValueError) else error["msg"]
    return f"{path}: {message}" if path else message


def _path_part(part: int | str) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    # The round-robin pool of jobs without labels is keyed "".
    return f".{part}" if part else '[""]'
