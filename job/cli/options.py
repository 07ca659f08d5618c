"""The group options as the command line writes them (`group add`, `group set`, `simulate`): their
flags, and their texts (`high=10:non-preemptible`, `gpu=CPU:8@pool=gpu:max=4`, `on`, `GPU,CPU`)
read into the fields of GroupSpec, which core/specs.py then validates."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from job.cli.parsing import pairs
from job.core.errors import BadInput, quoted
from job.core.job import INT32_MAX
from job.core.planner.rules import POLICY_NAMES, PREEMPTIONS, SELECTOR_NAMES, listed
from job.core.specs import NodeType
from job.core.units import parse_pairs


def parse_class(text: str) -> dict[str, Any]:
    """`high=10` or `system=100:non-preemptible` as {name, value, preemptible}."""
    name, equals, rest = text.partition("=")
    value, colon, flag = rest.partition(":")
    if not equals or not re.fullmatch(r"[+-]?[0-9]+", value.strip()) or (colon and flag != "non-preemptible"):
        raise ValueError(f"{quoted(text)}: give NAME=VALUE or NAME=VALUE:non-preemptible, e.g. high=10")
    # Past an int32's digits: out of range, as GroupSpec says of a value it reads, before int() does.
    if len(value.strip().lstrip("+-")) > len(str(INT32_MAX)):
        raise ValueError(f"{quoted(text)}: the value is out of range (at most {INT32_MAX} either way)")
    return {"name": name.strip(), "value": int(value), "preemptible": not colon}


def parse_node_type(text: str) -> dict[str, Any]:
    """`NAME=CPU:8,GPU:1,memory:32GiB[@label=value...]:max=N` to the fields of a NodeType (which
    checks them)."""
    head, sep_max, most = text.rpartition(":max=")
    if not sep_max or not most.strip().isdigit():
        raise ValueError(f"{text!r}: ends with :max=N, the most nodes of this type (e.g. :max=4)")
    name, sep, body = head.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"{text!r}: expected NAME=RESOURCES[@LABEL=VALUE...]:max=N, e.g. gpu=CPU:8,GPU:1@pool=gpu:max=4")
    amounts, *label_parts = body.split("@")
    try:
        resources = parse_pairs(filter(None, (part.strip() for part in amounts.split(","))), ":", "NAME:AMOUNT")
    except ValueError as exc:
        raise ValueError(f"{text!r}: resources: {exc}") from None
    try:
        labels = parse_pairs(label_parts, "=", "@KEY=VALUE")
    except ValueError as exc:
        raise ValueError(f"{text!r}: labels: {exc}") from None
    return {"name": name.strip(), "resources": resources, "labels": labels, "max": int(most)}


def format_node_type(node_type: NodeType) -> str:
    """The `--node-type` text of a node type (memory in bytes: exact, and read back the same)."""
    amounts = ",".join(f"{name}:{amount:g}" if name != "memory" else f"{name}:{int(amount)}"
                       for name, amount in node_type.resources.items())
    labels = "".join(f"@{k}={v}" for k, v in node_type.labels.items())
    return f"{node_type.name}={amounts}{labels}:max={node_type.max}"


def _on_off(text: str) -> bool:
    if text.strip().lower() not in ("on", "off"):
        raise ValueError(f"{text!r}: use on or off")
    return text.strip().lower() == "on"


def _names(text: str) -> list[str]:
    """`GPU,CPU,memory`; an empty name is left for GroupSpec to refuse."""
    return [name.strip() for name in text.split(",")]


class Option(NamedTuple):
    flag: str
    field: str  # of GroupSpec
    kind: str  # "value", "pairs" (repeatable K=V), "list" (repeatable) or "switch" (--x / --no-x)
    metavar: str | None
    help: str
    # The field's value from one text ("list": from each); none: the text as it is.
    read: Callable[[str], Any] | None = None


# Every option of `group add` and `group set`: an option not given leaves the field as it is.
OPTIONS = [
    Option("--ray-address", "clusters", "list", "[NAME=]ADDRESS",
           "a Ray cluster of the group: http://host:port of its dashboard, or raycluster://namespace/name, with an "
           "optional short name (repeatable; replaces the list)"),
    Option("--max-drivers", "max_drivers", "value", "N",
           "at most N jobs of ours running at once in each cluster (default: its head node's memory over 100 MB)"),
    Option("--cluster-lost-after", "cluster_lost_after_s", "value", "DURATION",
           "a cluster that does not answer this long is lost: its running jobs are requeued elsewhere (default 2m)"),
    Option("--node-label", "node_labels", "pairs", "K=V", "only nodes carrying this label (repeatable)"),
    Option("--policy", "policy", "value", None, f"queue policy: {listed(POLICY_NAMES)}"),
    Option("--selector", "selector", "value", None, f"node selector: {listed(SELECTOR_NAMES)}"),
    Option("--resource-priority", "resource_priority", "value", "R1,R2,...",
           "resource order for node choice, e.g. GPU,CPU,memory", _names),
    Option("--half-life", "half_life_s", "value", "DURATION", "fair-share usage half life, e.g. 1h (0 plans as drf)"),
    Option("--max-running-per-user", "max_running_per_user", "value", "N", "at most N running jobs per user"),
    Option("--max-resources-per-user", "max_resources_per_user", "pairs", "NAME=AMOUNT", "per-user resource cap (repeatable)"),
    Option("--strict-order", "strict_order", "switch", None, "a job that waits for resources blocks those behind it"),
    Option("--pending-timeout", "pending_timeout_s", "value", "DURATION", "fail jobs pending longer than this"),
    Option("--max-attempts", "max_attempts", "value", "N", "submissions Ray may refuse before a job fails"),
    Option("--max-requeues", "max_requeues", "value", "N",
           "requeues for infrastructure faults (lost, supervisor failed, node died or busy) before a job fails"),
    Option("--start-timeout", "start_timeout_s", "value", "DURATION",
           "requeue a job Ray has not started this long for lack of free resources on its node (default 5m)"),
    Option("--use-head-node", "use_head_node", "switch", None, "place jobs on the Ray head node too"),
    Option("--allow-runtime-env-key", "allowed_runtime_env_keys", "list", "KEY",
           "a runtime_env key its jobs may use beyond the known ones, unchecked (repeatable; replaces the list; '' clears it)"),
    Option("--allow-env-var", "allowed_env_vars", "list", "NAME",
           "a variable Ray reads for control (RAY_*, ...) its jobs may set in runtime_env.env_vars "
           "(repeatable; replaces the list; '' clears it)"),
    Option("--priority-class", "priority_classes", "list", "NAME=VALUE[:non-preemptible]",
           "a priority class; the highest value goes first (repeatable; replaces the list)", parse_class),
    Option("--default-class", "default_class", "value", "NAME", "the class of jobs submitted without --class"),
    Option("--preemption", "preemption", "value", None,
           listed(tuple(f"{name} ({rule.help})" if rule.preempts else name for name, rule in PREEMPTIONS.items()))),
    Option("--min-runtime", "min_runtime_s", "value", "DURATION", "never stop a job before it ran this long (default 10m)"),
    Option("--max-preemptions", "max_preemptions", "value", "N", "at most N jobs stopped per tick (default 10)"),
    Option("--reserve-after", "reserve_after_s", "value", "DURATION",
           "the job first in line that waited this long for resources reserves the node where it fits soonest (default 5m)"),
    Option("--max-reservations", "max_reservations", "value", "N",
           "at most N jobs first in line hold a reservation at a time; 0 turns them off (default 1)"),
    Option("--autoscale", "autoscale", "value", "on|off",
           "tell Ray's autoscaler what the queue needs, so that the cluster grows and shrinks with it (default off)", _on_off),
    Option("--node-type", "node_types", "list", "NAME=CPU:8,GPU:1,memory:32GiB[@LABEL=VALUE...]:max=N",
           "a kind of node an http:// group's cluster can add (repeatable; replaces the list; "
           "a raycluster:// group's are read from its RayCluster)", parse_node_type),
    Option("--overuse", "overuse", "value", "allow|stop",
           "a job Ray shows using more than it declared: charged its use (allow), or also stopped past the grace (stop)"),
    Option("--overuse-grace", "overuse_grace_s", "value", "DURATION",
           "how long a job may use more than it declared under --overuse stop (default 1m)"),
]
_BY_FIELD = {option.field: option for option in OPTIONS}


def add_options(parser: argparse.ArgumentParser, options: list[Option], required: tuple[str, ...] = ()) -> None:
    """The options as command-line flags (`python -m job simulate` takes the planner's)."""
    for option in options:
        if option.kind == "switch":
            parser.add_argument(option.flag, dest=option.field, action=argparse.BooleanOptionalAction, default=None,
                                help=option.help)
        else:
            parser.add_argument(option.flag, dest=option.field, action="store" if option.kind == "value" else "append",
                                metavar=option.metavar, help=option.help, required=option.field in required)


def option_fields(args: argparse.Namespace, options: list[Option]) -> dict:
    """The options given (the others are left out), as texts; `read_fields` makes them GroupSpec's."""
    fields = {}
    for option in options:
        value = getattr(args, option.field)
        if value is not None:
            fields[option.field] = pairs(value, option.flag) if option.kind == "pairs" else value
    return fields


def read_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Option texts by GroupSpec field read into the fields' values; BadInput naming the field of
    a text that is not what its option takes."""
    read = {}
    for field, value in fields.items():
        option = _BY_FIELD.get(field)
        try:
            if option is None or option.read is None:
                read[field] = value
            elif option.kind == "list":
                read[field] = [option.read(text) for text in value]
            else:
                read[field] = option.read(value)
        except ValueError as exc:
            raise BadInput(f"{field}: {exc}") from None
    return read
