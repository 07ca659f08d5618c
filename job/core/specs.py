"""What people may ask for: the validated shapes of a job, a resource group and a user.

One set of models serves the CLI and the Python function `job.api.submit`, so both refuse the
same input with the same message. Strings are accepted wherever a number, duration or size is
expected ('2h', '4GiB'); the syntax of command-line options themselves is read in job/cli/options.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, create_model, field_validator, model_validator

from job.core import arrays, dependencies, group_defaults
from job.core.clusters import CLUSTER_LABEL
from job.core.errors import BadInput, key_named, quoted
from job.core.job import GATEWAY_PREFIX, INT32_MAX, SUBMITTED, JobField
from job.core.planner.snapshot import MAX_BUNDLES, BundleStrategy, Policy, Preemption, PriorityClass, SelectorName, describe_error
from job.core.resources import Resources, describe
from job.core.roles import reserved_role_problem
from job.core.runtime_env import KNOWN_KEYS, RAY_CONTROL, name_problem, queue_env_problem, runtime_env_problem
from job.core.units import check_ray_range, parse_amount, parse_duration, parse_memory, parse_pairs, parse_time

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,62}")
RESOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]{0,62}")
# Kubernetes-style label keys (optional DNS prefix and a name) and values, as Ray node labels use.
LABEL_KEY = re.compile(r"([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
RUNTIME_ENV_KEY = re.compile(r"[a-z][a-z0-9_]{0,62}")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?")
BUILTIN_RESOURCES = ("CPU", "GPU", "memory")
# Metadata keys the scheduler sets on every Ray job it submits.
RESERVED_METADATA_PREFIX = "scheduler."
# The gateway's metadata key -> the option it gives: its keyword and its `submit` option.
GATEWAY_KEYS = {**{field.gateway: (field.api_keyword, field.option) for field in SUBMITTED if field.gateway},
                arrays.GATEWAY_KEY: (arrays.KEYWORD, arrays.OPTION)}
BUNDLE_STRATEGIES = get_args(BundleStrategy)


def _check_name(value: str, pattern: re.Pattern, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(
            f"{quoted(value)} is not a valid {what} name: "
            "use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


def _check_resource_name(name: str) -> str:
    if not isinstance(name, str):
        raise ValueError(f"unknown resource {quoted(name)}: a resource's name is text")
    if name.startswith("node:"):
        raise ValueError(f"{quoted(name)}: node resources are chosen by the scheduler; use --node-label to restrict nodes")
    for builtin in BUILTIN_RESOURCES:
        if name != builtin and name.lower() == builtin.lower():
            raise ValueError(f"unknown resource {name!r}: did you mean {builtin!r}?")
    if name == "object_store_memory" or not RESOURCE_NAME.fullmatch(name):
        raise ValueError(f"unknown resource {quoted(name)}: use CPU, GPU, memory "
                         "or a custom resource name of letters, digits, '_', '.', '-', '/'")
    return name


def _at_most(value: Any, most: int, what: str) -> Any:
    """`value` as it is, unless it is a map or a list of more than `most` `what`: counted before
    any of them is read."""
    if isinstance(value, dict | list | tuple) and len(value) > most:
        raise ValueError(f"at most {most} {what}, got {len(value)}")
    return value


def parse_resources(resources: dict[str, Any]) -> dict[str, float]:
    """Resource name -> amount, memory in bytes (sizes such as '4GiB' accepted); at most
    MAX_RESOURCE_NAMES of them."""
    if not isinstance(resources, dict):
        raise ValueError("must be a map of resource name to amount")
    _at_most(resources, MAX_RESOURCE_NAMES, "resource names")
    parsed = {}
    for name, amount in resources.items():
        _check_resource_name(name)
        try:
            if name == "memory":
                parsed[name] = float(parse_memory(amount))
                check_ray_range(parsed[name])
            else:
                parsed[name] = parse_amount(amount)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return parsed


def parse_labels(labels: dict[str, Any]) -> dict[str, str]:
    if not isinstance(labels, dict):
        raise ValueError("must be a map of label key to value")
    for key, value in labels.items():
        if not isinstance(key, str) or not LABEL_KEY.fullmatch(key):
            raise ValueError(f"{quoted(key)} is not a valid label key (e.g. ray.io/accelerator-type or pool)")
        if not isinstance(value, str) or not LABEL_VALUE.fullmatch(value):
            raise ValueError(f"label {key}: {quoted(value)} is not a valid label value "
                             "(at most 63 letters, digits, '.', '_', '-')")
    return dict(labels)


# Bounds on what one job may carry: a row and a submission stay small whatever a client sends.
MAX_ENTRYPOINT_BYTES = 64 * 1024
MAX_RUNTIME_ENV_BYTES = 64 * 1024
MAX_METADATA_BYTES = 16 * 1024
MAX_METADATA_KEYS = 64
MAX_NODE_LABELS = 32
# Ray's own resources are a few; a job's custom ones name what its nodes have.
MAX_RESOURCE_NAMES = 64
MAX_ALLOWED_ENV_VARS = 64


def _storable(text: str, most_bytes: int, has_nul: bool, unit: str) -> None:
    """Refuses text PostgreSQL cannot store (NUL, a lone surrogate) or longer than `most_bytes`."""
    if has_nul:
        raise ValueError("must not contain NUL characters")
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise ValueError("must be text PostgreSQL can store (it holds a lone surrogate)") from None
    if size > most_bytes:
        raise ValueError(f"at most {most_bytes} {unit}, got {size}")


def _bounded_json(value: Any, most_bytes: int) -> Any:
    """A JSON value PostgreSQL can store (no NUL character, NaN or infinity) of at most
    `most_bytes` as UTF-8."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise ValueError("nested too deeply to store") from None
    except (TypeError, ValueError) as exc:  # not JSON: NaN, a set, a number of more digits than Python writes
        raise ValueError(f"must be JSON PostgreSQL can store: {str(exc).partition(';')[0]}") from None
    _storable(text, most_bytes, has_nul="\\u0000" in text, unit="bytes as JSON")
    return value


def expand_bundles(items: Iterable[str], separator: str, example: str) -> list[dict[str, str]]:
    """`[Nx]NAME<separator>AMOUNT,...` items as one map per bundle (`4xGPU=1,CPU=8`: four of them),
    the amounts still text for `check_bundles`: `--bundle`'s values, and a trace's `bundles`."""
    found: list[dict[str, str]] = []
    for item in items:
        count, times, body = item.partition("x")
        if not (times and count.isdigit()):
            count, body = "1", item
        bundle = parse_pairs(filter(None, (part.strip() for part in body.split(","))), separator,
                             f"[Nx]NAME{separator}AMOUNT,...")
        # A count past MAX_BUNDLES is refused before a list that long is built.
        if not bundle or not 0 < int(count) <= MAX_BUNDLES:
            raise ValueError(f"{quoted(item)}: give 1 to {MAX_BUNDLES} bundles of NAME{separator}AMOUNT,..., e.g. {example}")
        found += [dict(bundle) for _ in range(int(count))]
        _at_most(found, MAX_BUNDLES, "bundles")
    return found


def check_bundles(value: Any) -> list[dict[str, float]] | None:
    """A job's bundles, each a resource map as `resources` takes, 1 to MAX_BUNDLES of them, each
    asking for something; None for none. Also the simulator's traces' check."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not value:
        raise ValueError("give at least one bundle, a map of resource name to amount (e.g. CPU=2)")
    _at_most(value, MAX_BUNDLES, "bundles")
    bundles = []
    for index, bundle in enumerate(value, 1):
        try:
            parsed = parse_resources(bundle)
        except ValueError as exc:
            raise ValueError(f"bundle {index}: {exc}") from None
        if not any(parsed.values()):
            # Ray refuses a placement group bundle of nothing.
            raise ValueError(f"bundle {index}: ask for more than nothing: at least one amount above zero (e.g. CPU=1)")
        bundles.append({name: amount for name, amount in parsed.items() if amount})
    return bundles


def check_bundle_strategy(value: str | None, has_bundles: bool) -> str | None:
    """A job's bundle strategy: PACK when bundles are given without one, None without bundles."""
    if not has_bundles:
        if value is not None:
            raise ValueError("a strategy places bundles: give them too (--bundle)")
        return None
    if value is None:
        return "PACK"
    if value not in BUNDLE_STRATEGIES:
        raise ValueError(f"{quoted(value)} is not a strategy: use {', '.join(BUNDLE_STRATEGIES)}")
    return value


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _entrypoint(value: str, info: ValidationInfo) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    _storable(value, MAX_ENTRYPOINT_BYTES, has_nul="\x00" in value, unit="bytes")
    return value


def _resources(value: Any, info: ValidationInfo) -> dict[str, float]:
    parsed = parse_resources(value)
    if parsed and not any(parsed.values()):
        if info.data.get("bundles"):
            # Its work is in its bundles: the driver holds nothing, as Ray's default entrypoint.
            return {}
        # It would fit every node, hold nothing and count for nothing in its user's share.
        raise ValueError("ask for more than nothing: at least one amount above zero (e.g. CPU=1)")
    return parsed or {"CPU": 1.0}


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a whole number")
    return value


def _runtime_env(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    # Its size first: what is checked key by key is bounded.
    _bounded_json(value, MAX_RUNTIME_ENV_BYTES)
    # The group's allowance, where the caller read it (job.api.submit).
    context = info.context or {}
    problem = runtime_env_problem(value, context.get("allowed_runtime_env_keys", frozenset()),
                                  context.get("allowed_env_vars", frozenset())) or queue_env_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _metadata(value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
    for key in value:
        if key.startswith(RESERVED_METADATA_PREFIX):
            raise ValueError(f"{quoted(key)}: keys starting with {RESERVED_METADATA_PREFIX!r} are set by the scheduler")
        if key.startswith(GATEWAY_PREFIX):
            given = GATEWAY_KEYS.get(key)
            raise ValueError(f"{quoted(key)}: the gateway's key for {given[0]}: give {given[0]} itself ({given[1]})"
                             if given else f"{quoted(key)}: keys starting with {GATEWAY_PREFIX!r} are the gateway's "
                             f"({', '.join(GATEWAY_KEYS)})")
    return _bounded_json(value, MAX_METADATA_BYTES)


def _optional(read: Callable[[Any], Any]) -> Callable[[Any, ValidationInfo], Any]:
    return lambda value, info: None if value is None else read(value)


# The checks a job's fields name in their rows (core/job.py FIELDS), each as (before, after)
# pydantic's own: before reads what was given as it came, after what pydantic made of it.
CHECKS: dict[str, tuple[Callable[[Any, ValidationInfo], Any] | None, Callable[[Any, ValidationInfo], Any] | None]] = {
    "user name": (None, lambda value, info: _check_name(value, USER_NAME, "user")),
    "group name": (None, lambda value, info: _check_name(value, NAME, "group")),
    "class name": (None, lambda value, info: value if value is None else _check_name(value, NAME, "class")),
    "entrypoint": (None, _entrypoint),
    "bundles": (lambda value, info: check_bundles(value), None),
    "bundle strategy": (None, lambda value, info: check_bundle_strategy(value, info.data.get("bundles") is not None)),
    "resources": (_resources, None),
    "labels": (lambda value, info: parse_labels(_at_most(value, MAX_NODE_LABELS, "labels")), None),
    # Not True for 1, which pydantic's lax int takes (as resources refuse it).
    "whole number": (lambda value, info: _not_bool(value), None),
    "time": (_optional(parse_time), None),
    "duration": (_optional(parse_duration), None),
    "runtime_env": (None, _runtime_env),
    "metadata": (lambda value, info: _at_most(value, MAX_METADATA_KEYS, "keys"), _metadata),
    "dependencies": (lambda value, info: dependencies.parse(value), None),
}


def _in_check_order(fields: tuple[JobField, ...]) -> list[JobField]:
    """The fields in the table's order, each after the fields its check reads (`needs`)."""
    ordered: list[JobField] = []
    waiting = list(fields)
    while waiting:
        done = {field.spec for field in ordered}
        ready = next(field for field in waiting if set(field.needs) <= done)
        ordered.append(ready)
        waiting.remove(ready)
    return ordered


def _job_spec() -> type[_Spec]:
    """A submitted job's model: a field per row of the table that a submit takes, its type the
    column's, checked as its row says."""
    fields: dict[str, Any] = {}
    # Each field's checks, by its name in the spec: a submitted field has one (JobField.submitted).
    reads: dict[str, Callable[[Any, ValidationInfo], Any]] = {}
    checks: dict[str, Callable[[Any, ValidationInfo], Any]] = {}
    for row in SUBMITTED:
        assert row.spec is not None
        read, check = CHECKS[row.check] if row.check else (None, None)
        if read:
            reads[row.spec] = read
        if check:
            checks[row.spec] = check
    for row in _in_check_order(SUBMITTED):
        assert row.spec is not None
        # Field's keywords, of as many types as its overloads: Any to the checker.
        default: dict[str, Any] = ({"default_factory": lambda given=row.default: dict(given)}
                                   if isinstance(row.default, dict) else {"default": row.default})
        bounds: dict[str, Any] = dict(row.bounds)
        fields[row.spec] = (row.type, Field(**default, **bounds, validate_default=bool(row.needs)))

    # info.field_name is None only for a model's validator: these are fields'.
    def before(cls, value: Any, info: ValidationInfo) -> Any:
        return reads[info.field_name](value, info)  # type: ignore[index]

    def after(cls, value: Any, info: ValidationInfo) -> Any:
        return checks[info.field_name](value, info)  # type: ignore[index]

    validators = {
        "_before": field_validator(*reads, mode="before")(before),
        "_after": field_validator(*checks)(after),
    }
    return create_model("JobSpec", __base__=_Spec, __validators__=validators, **fields)


JobSpec = _job_spec()


MAX_NODE_TYPES = 32


class NodeType(BaseModel):
    """A kind of node the cluster can add: each node has these resources and labels; there are at
    most `max` of them (KubeRay's maxReplicas times numOfHosts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    resources: dict[str, float]
    labels: dict[str, str] = Field(default_factory=dict)
    min: int = Field(default=0, ge=0)
    max: int = Field(ge=0, le=100_000)

    _name = field_validator("name")(lambda value: _check_name(value, NAME, "node type"))
    _labels = field_validator("labels", mode="before")(lambda value: parse_labels(value))

    @field_validator("resources", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> dict[str, float]:
        parsed = parse_resources(value)
        if not any(parsed.values()):
            raise ValueError("a node type has some resources, e.g. CPU:8")
        return parsed

    @model_validator(mode="after")
    def _bounds(self) -> NodeType:
        if self.min > self.max:
            raise ValueError(f"node type {self.name}: min {self.min} is above max {self.max}")
        return self

    def holds(self, need: Resources, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items()) and need.fits_in(Resources.of(self.resources))

    def __str__(self) -> str:
        labels = "".join(f" @{k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.name} ({describe(Resources.of(self.resources).items())}{labels}; at most {self.max})"


def parse_node_types(value: Any) -> list[NodeType]:
    """A group's node types from their fields (as stored, or read from `--node-type`); names are unique."""
    if not isinstance(value, list):
        raise ValueError("must be a list of node types")
    types = []
    for fields in value:
        try:
            types.append(NodeType.model_validate(fields))
        except ValidationError as exc:
            name = fields.get("name") if isinstance(fields, dict) else None
            raise ValueError(f"node type {name or fields!r}: {describe_error(exc)}") from None
    if len(types) > MAX_NODE_TYPES:
        raise ValueError(f"at most {MAX_NODE_TYPES} node types, got {len(types)}")
    names = [t.name for t in types]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"node type {name!r} is given more than once")
    return types


def parse_address(value: str) -> str:
    """A Ray cluster's address: its dashboard's URL, or a KubeRay RayCluster's name."""
    if re.fullmatch(r"https?://[^\s/:]+(:\d{1,5})?/?", value):
        return value.rstrip("/")
    if re.fullmatch(r"raycluster://[a-z0-9]([a-z0-9-]*[a-z0-9])?/[a-z0-9]([a-z0-9.-]*[a-z0-9])?", value):
        return value
    raise ValueError(f"{quoted(value)}: use http://host:port (the Ray dashboard) or raycluster://namespace/name")


def cluster_name_of(address: str) -> str:
    """The short name a cluster gets when none is given: a RayCluster's own name, else the
    dashboard's host and port (`10-0-0-5-8265`)."""
    if address.startswith("raycluster://"):
        return address.rsplit("/", 1)[1][:63]
    return re.sub(r"[^A-Za-z0-9-]+", "-", address.split("://")[-1]).strip("-")[:63] or "cluster"


class ClusterSpec(_Spec):
    """One Ray cluster of a group. `removing`: it takes no new job, and the tick drops it from the
    group once none of the group's jobs is active in it."""

    name: str
    address: str
    removing: bool = False

    _address = field_validator("address")(lambda value: parse_address(value))
    _name = field_validator("name")(lambda value: _check_name(value, NAME, "cluster"))

    @model_validator(mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        """An address alone, or NAME=ADDRESS, as `--ray-address` writes them."""
        if isinstance(value, str):
            name, equals, address = value.partition("=")
            value = {"name": name, "address": address} if equals and "://" not in name else {"address": value}
        if isinstance(value, dict) and "name" not in value and isinstance(value.get("address"), str):
            value = {**value, "name": cluster_name_of(value["address"])}
        return value


# More clusters than this in one group is a mistake: each is observed at every tick.
MAX_CLUSTERS = 32


class GroupSpec(_Spec):
    name: str
    # Its Ray clusters, in the order given; the first is where an autoscaling group's demand goes.
    clusters: list[ClusterSpec] = Field(min_length=1, max_length=MAX_CLUSTERS)
    node_labels: dict[str, str] = Field(default_factory=dict)
    policy: Policy = "fairshare"
    selector: SelectorName = "dispersed"
    resource_priority: list[str] = Field(default_factory=lambda: list(group_defaults.RESOURCE_PRIORITY))
    half_life_s: float = group_defaults.HALF_LIFE_S
    max_running_per_user: int | None = Field(default=None, gt=0, le=INT32_MAX)
    max_resources_per_user: dict[str, float] | None = None
    strict_order: bool = False
    pending_timeout_s: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=3, gt=0, le=100)
    use_head_node: bool = False
    # Requeues for infrastructure faults (not the job's own) before a job fails with the last one.
    max_requeues: int = Field(default=5, ge=0, le=1000)
    # How long Ray may hold a driver it cannot start on its busy node before it is requeued.
    start_timeout_s: float = Field(default=300.0, gt=0)
    # runtime_env keys its jobs may use beyond the known ones, taken as they are.
    allowed_runtime_env_keys: list[str] = Field(default_factory=list)
    # env_vars its jobs may set that Ray reads for control (core/runtime_env.py RAY_CONTROL).
    allowed_env_vars: list[str] = Field(default_factory=list)
    # Priority classes (highest value first in the queue) and preemption; see docs/planner.md.
    priority_classes: list[dict[str, Any]] = Field(default_factory=lambda: [dict(group_defaults.DEFAULT_CLASS)])
    # Checked against the classes even when not given: new classes without `default` need one named.
    default_class: str = Field(default=group_defaults.DEFAULT_CLASS["name"], validate_default=True)
    preemption: Preemption = "off"
    min_runtime_s: float = Field(default=group_defaults.MIN_RUNTIME_S, ge=0)
    max_preemptions: int = Field(default=group_defaults.MAX_PREEMPTIONS, ge=0, le=10_000)
    # The job first in line of its class that waited this long for resources reserves where it
    # fits soonest; at most max_reservations at a time, 0 for none (docs/planner.md).
    reserve_after_s: float = Field(default=group_defaults.RESERVE_AFTER_S, ge=0)
    max_reservations: int = Field(default=group_defaults.MAX_RESERVATIONS, ge=0, le=1000)
    # Tell Ray's autoscaler what the queue needs (job/core/autoscale.py).
    autoscale: bool = False
    # The nodes an http:// group's cluster can add; a raycluster:// group's come from its RayCluster.
    node_types: list[dict[str, Any]] = Field(default_factory=list, validate_default=True)
    # A running job that Ray shows holding more than it declared: let be (charged its use), or
    # stopped once it did so for longer than the grace (core/reconcile.py `over_use`).
    overuse: Literal["allow", "stop"] = "allow"
    overuse_grace_s: float = Field(default=60.0, ge=0)
    # The most drivers of ours a cluster runs at once; None: its head node's memory over
    # group_defaults.DRIVER_MEMORY_BYTES (a Ray head keeps a job supervisor per driver).
    max_drivers: int | None = Field(default=None, gt=0, le=100_000)
    # A cluster that does not answer this long is lost: its running jobs are requeued elsewhere.
    cluster_lost_after_s: float = Field(default=group_defaults.CLUSTER_LOST_AFTER_S, gt=0)

    _name = field_validator("name")(lambda value: _check_name(value, NAME, "group"))

    @field_validator("clusters")
    @classmethod
    def _clusters(cls, clusters: list[ClusterSpec]) -> list[ClusterSpec]:
        for what, values in (("name", [c.name for c in clusters]), ("address", [c.address for c in clusters])):
            repeated = sorted({value for value in values if values.count(value) > 1})
            if repeated:
                hint = " (name each: --ray-address NAME=URL)" if what == "name" else ""
                raise ValueError(f"cluster {what} {repeated[0]!r} is given more than once{hint}")
        if all(c.removing for c in clusters):
            raise ValueError("every cluster is being removed: keep at least one")
        return clusters
    _node_labels = field_validator("node_labels", mode="before")(lambda value: parse_labels(value))

    @field_validator("priority_classes")
    @classmethod
    def _classes(cls, classes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """{name, value, preemptible} each, as stored or read from `--priority-class`."""
        if not classes:
            raise ValueError("give at least one class, as NAME=VALUE[:non-preemptible]")
        checked = []
        for c in classes:
            try:
                model = PriorityClass.model_validate(c)
            except ValidationError as exc:
                raise ValueError(f"{c!r}: {describe_error(exc)}") from None
            _check_name(model.name, NAME, "class")
            if not -INT32_MAX <= model.value <= INT32_MAX:
                raise ValueError(f"class {model.name}: value {model.value} is out of range (at most {INT32_MAX} either way)")
            checked.append(model.model_dump())
        names = [c["name"] for c in checked]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"class {repeated[0]!r} is given more than once")
        return checked

    @field_validator("default_class")
    @classmethod
    def _default_class(cls, value: str, info: ValidationInfo) -> str:
        names = [c["name"] for c in info.data.get("priority_classes", [])]
        if names and value not in names:
            raise ValueError(f"{value!r} is not one of the group's classes ({', '.join(names)}); "
                             "name one with --default-class")
        return value

    @field_validator("allowed_runtime_env_keys")
    @classmethod
    def _runtime_env_keys(cls, keys: list[str]) -> list[str]:
        keys = [key for key in keys if key]  # `--allow-runtime-env-key ''` clears the list
        for key in keys:
            if key in KNOWN_KEYS:
                raise ValueError(f"{key!r} is a runtime_env key the scheduler knows and checks already")
            if not RUNTIME_ENV_KEY.fullmatch(key):
                raise ValueError(f"{key!r} is not a runtime_env key (lower-case letters, digits and '_')")
        return sorted(set(keys))

    @field_validator("allowed_env_vars")
    @classmethod
    def _env_vars(cls, names: list[str]) -> list[str]:
        names = [name for name in names if name]  # `--allow-env-var ''` clears the list
        if len(names) > MAX_ALLOWED_ENV_VARS:
            raise ValueError(f"at most {MAX_ALLOWED_ENV_VARS} names, got {len(names)}")
        for name in names:
            if problem := name_problem(name):
                raise ValueError(problem)
            if not RAY_CONTROL.fullmatch(name):
                raise ValueError(f"{name!r}: jobs may set it already; only names Ray reads for control need allowing")
        return sorted(set(names))

    @field_validator("node_types", mode="before")
    @classmethod
    def _node_types(cls, value: Any, info: ValidationInfo) -> list[dict[str, Any]]:
        types = [node_type.model_dump() for node_type in parse_node_types(value)]
        clusters = info.data.get("clusters")
        if clusters is None:
            return types
        kuberay = [c.address.startswith("raycluster://") for c in clusters]
        if any(kuberay) and types:
            raise ValueError("a raycluster:// group's node types are read from its RayCluster's workerGroupSpecs")
        if info.data.get("autoscale") and len(set(kuberay)) > 1:
            raise ValueError("a group that autoscales has raycluster:// clusters only, or http:// clusters only")
        if info.data.get("autoscale") and not any(kuberay) and not types:
            raise ValueError("an http:// group that autoscales needs its node types (--node-type), what its cluster can add")
        names = [c.name for c in clusters]
        if len(names) > 1:
            for node_type in types:
                if node_type["labels"].get(CLUSTER_LABEL) not in names:
                    raise ValueError(f"node type {node_type['name']!r}: name its cluster, one of {', '.join(names)}, "
                                     f"with @{CLUSTER_LABEL}=NAME")
        return types

    @field_validator("resource_priority")
    @classmethod
    def _priority(cls, names: list[str]) -> list[str]:
        if not names or any(not name for name in names):
            raise ValueError("give resource names separated by commas, e.g. GPU,CPU,memory")
        if len(set(names)) != len(names):
            raise ValueError("a resource is named twice")
        return [_check_resource_name(name) for name in names]

    @field_validator("half_life_s", "pending_timeout_s", "start_timeout_s", "min_runtime_s", "reserve_after_s", "overuse_grace_s",
                     "cluster_lost_after_s", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return None if value is None else parse_duration(value)

    @field_validator("max_resources_per_user", mode="before")
    @classmethod
    def _limits(cls, value: Any) -> dict[str, float] | None:
        return None if value is None else parse_resources(value) or None


class UserSpec(_Spec):
    name: str
    shares: float = Field(default=1.0, gt=0, le=1e9, allow_inf_nan=False)
    max_running: int | None = Field(default=None, gt=0, le=INT32_MAX)
    max_resources: dict[str, float] | None = None
    # Its account (team); None: the root.
    account: str | None = None

    _account = field_validator("account")(lambda value: value if value is None else _check_name(value, NAME, "account"))
    _limits = field_validator("max_resources", mode="before")(lambda value: _limits(value))

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        _check_name(value, USER_NAME, "user")
        problem = reserved_role_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def _limits(value: Any) -> dict[str, float] | None:
    """A user's or an account's most resources: none for no limit or an empty one."""
    return None if value is None else parse_resources(value) or None


class AccountSpec(_Spec):
    """A team: its users and child accounts share its part (docs/planner.md, "Accounts")."""

    name: str
    # None: a top account, child of the root.
    parent: str | None = None
    shares: float = Field(default=1.0, gt=0, le=1e9, allow_inf_nan=False)
    max_running: int | None = Field(default=None, gt=0, le=INT32_MAX)
    max_resources: dict[str, float] | None = None

    _name = field_validator("name")(lambda value: _check_name(value, NAME, "account"))
    _limits = field_validator("max_resources", mode="before")(lambda value: _limits(value))

    @field_validator("parent")
    @classmethod
    def _parent(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        _check_name(value, NAME, "account")
        if value == info.data.get("name"):
            raise ValueError(f"account {value!r} cannot be its own parent")
        return value


def validated(model: type[_Spec], fields: dict[str, Any], context: dict[str, Any] | None = None):
    """The model built from `fields`, or BadInput naming the first field that is wrong."""
    try:
        return model.model_validate(fields, context=context)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(key_named(part) for part in error["loc"]) or model.__name__
        message = error["msg"].removeprefix("Value error, ")
        raise BadInput(f"{field}: {message}") from None
