"""Ray's Job Submission API in the queue's words and back, without I/O: a `JobSubmitRequest` (Ray's
dashboard/modules/job/common.py) becomes the keywords of `job.api.submit`, a queue job becomes
Ray's `JobDetails` (pydantic_models.py), the fields Ray's unmodified client parses.

The queue's own options travel in metadata keys (docs/guides/gateway.md), taken out of the
job's metadata: each field of core/job.py FIELDS that has a `gateway` key (`queue.class`,
`queue.priority`, ...; a list, `queue.bundles`, as JSON)."""

from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass
from datetime import datetime
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from job.core import arrays
from job.core.errors import BadInput, key_named, quoted
from job.core.job import GATEWAY_PREFIX, SUBMITTED
from job.core.specs import GATEWAY_KEYS

if TYPE_CHECKING:
    from job.store.gateway import GatewayJob

# Metadata key (past the prefix) -> the field it gives.
QUEUE_FIELDS = {field.gateway.removeprefix(GATEWAY_PREFIX): field for field in SUBMITTED if field.gateway}
# And the one that gives no field but makes an array of the job (core/arrays.py).
_ARRAY_KEY = arrays.GATEWAY_KEY.removeprefix(GATEWAY_PREFIX)
_QUEUE_KEYS = ", ".join(GATEWAY_KEYS)
# Ray's built-in entrypoint resources, under the queue's names.
_BUILTIN = {"entrypoint_num_cpus": "CPU", "entrypoint_num_gpus": "GPU", "entrypoint_memory": "memory"}
_FIELD_OF = {name: field for field, name in _BUILTIN.items()}
_REQUEST_FIELDS = frozenset({"entrypoint", "submission_id", "job_id", "runtime_env", "metadata",
                             "entrypoint_resources", "entrypoint_label_selector", *_BUILTIN})
RAY_COMMIT_KEY = "_ray_commit"
# Not dots alone: `.` and `..` are a URL path's own segments, which Ray's client's requests to
# /api/jobs/ID never reach the job by (sql/0023_submission_ids.sql holds the same).
SUBMISSION_ID = re.compile(r"(?!\.+\Z)[A-Za-z0-9_.-]{1,128}")
_ALPHABET = string.ascii_letters + string.digits
# A JobSpec field in a refusal, under the name the caller gave it.
_CALLER_NAMES = [(f"resources.{name}", field) for field, name in _BUILTIN.items()] + [
    ("resources", "entrypoint_resources"), ("node_labels", "entrypoint_label_selector"),
    # Every field of SUBMITTED has a JobSpec name, which JobField's type, the table's, cannot say.
    *((field.spec, f"metadata.{field.gateway}") for field in QUEUE_FIELDS.values() if field.spec is not None),
    (arrays.KEYWORD, f"metadata.{arrays.GATEWAY_KEY}")]


@dataclass(frozen=True)
class Submission:
    submission_id: str
    # The keywords of job.api.submit but user and group, which are the caller's and the URL's.
    options: dict[str, Any]


# A submission's JSON: nested at most this deep (Python's parser would recurse past its limit), and
# at most this many values, so that what it parses to stays within a few times its size.
MAX_JSON_DEPTH = 32
MAX_JSON_VALUES = 16384
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_STRUCTURE = bytes(set(range(256)) - set(b"[]{},"))
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1, ord(","): 0}
# The packages Ray's client uploads to a dashboard (ray/_private/runtime_env/packaging.py
# get_uri_for_package and get_uri_for_directory): gcs://_ray_pkg_<hex>.zip (.tar.gz, .tar.xz), or a wheel.
_PACKAGE_NAME = re.compile(r"_ray_pkg_[0-9a-f]{1,64}\.(?:zip|tar\.gz|tar\.xz)|[A-Za-z0-9][A-Za-z0-9_.+!-]{0,200}\.whl")


def read_json(data: bytes | bytearray) -> Any:
    """A request's JSON, or BadInput: too deep, too many values, or not JSON. Strings taken out,
    its structure is counted before it is parsed."""
    skeleton = _STRINGS.sub(b"", data).translate(None, _NOT_STRUCTURE)
    opened = skeleton.count(b"[") + skeleton.count(b"{")
    if opened > MAX_JSON_DEPTH and max(accumulate(map(_DEPTH_STEP.__getitem__, skeleton))) > MAX_JSON_DEPTH:
        raise BadInput(f"request: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    # Each object and list, and each item of one after its first (a comma).
    if opened + skeleton.count(b",") > MAX_JSON_VALUES:
        raise BadInput(f"request: more than {MAX_JSON_VALUES} JSON values")
    try:
        return json.loads(data)
    except ValueError:
        raise BadInput("request: not valid JSON") from None


def is_package(protocol: str, name: str) -> bool:
    return protocol == "gcs" and _PACKAGE_NAME.fullmatch(name) is not None


def submission(body: Any) -> Submission:
    """The submit request read, or BadInput naming the field (Ray's own name for it)."""
    if not isinstance(body, dict):
        raise BadInput(f"request: must be a JSON object, got {type(body).__name__}")
    body = {key: value for key, value in body.items() if value is not None}
    unknown = sorted(set(body) - _REQUEST_FIELDS)
    if unknown:
        known = ", ".join(sorted(_REQUEST_FIELDS))
        raise BadInput(f"{key_named(unknown[0])}: not a field of Ray's job submission (known: {known})")
    if not isinstance(body.get("entrypoint"), str):
        raise BadInput("entrypoint: required, a string")
    options: dict[str, Any] = {"entrypoint": body["entrypoint"]}
    resources = {name: body[field] for field, name in _BUILTIN.items() if field in body}
    custom = _object(body, "entrypoint_resources") or {}
    for name in custom.keys() & _FIELD_OF.keys():
        raise BadInput(f"entrypoint_resources.{name}: give it as {_FIELD_OF[name]}, as Ray requires")
    resources.update(custom)
    if resources:
        options["resources"] = resources
    labels = _object(body, "entrypoint_label_selector")
    if labels is not None:
        options["node_labels"] = labels
    runtime_env = _object(body, "runtime_env")
    if runtime_env is not None:
        # Ray's client stamps a pip or conda env with its own commit; the cluster that runs the job
        # checks its own, so the stamp is not the job's to keep.
        options["runtime_env"] = {key: value for key, value in runtime_env.items() if key != RAY_COMMIT_KEY}
    options.update(_metadata(_object(body, "metadata") or {}))
    return Submission(submission_id=_submission_id(body), options=options)


def _object(body: dict, field: str) -> dict | None:
    value = body.get(field)
    if value is not None and not isinstance(value, dict):
        raise BadInput(f"{field}: must be a JSON object, got {type(value).__name__}")
    return value


def _metadata(metadata: dict) -> dict[str, Any]:
    options: dict[str, Any] = {}
    own = {}
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise BadInput(f"metadata.{key_named(key)}: values must be strings, got {type(value).__name__}")
        if not key.startswith(GATEWAY_PREFIX):
            own[key] = value
            continue
        name = key.removeprefix(GATEWAY_PREFIX)
        if name == _ARRAY_KEY:
            options[arrays.KEYWORD] = value
            continue
        field = QUEUE_FIELDS.get(name)
        if field is None:
            raise BadInput(f"metadata.{key_named(key)}: not one of the queue's keys ({_QUEUE_KEYS})")
        options[field.api_keyword] = _json_list(key, value) if field.structured and field.read != "list" else value
    if own:
        options["metadata"] = own
    return options


def _json_list(key: str, text: str) -> list:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"metadata.{key}: not valid JSON: {exc.msg}") from None
    if not isinstance(value, list):
        raise BadInput(f"metadata.{key}: must be a JSON list of resource maps, e.g. [{{\"GPU\": 1}}]")
    return value


def _submission_id(body: dict) -> str:
    given = body.get("submission_id", body.get("job_id"))
    if given is None:
        # Ray's own form, so that tools that show or parse it find what they expect.
        return "raysubmit_" + "".join(secrets.choice(_ALPHABET) for _ in range(16))
    if not isinstance(given, str) or not SUBMISSION_ID.fullmatch(given):
        raise BadInput(f"submission_id: {quoted(given)} is not a submission id: 1 to 128 letters, digits, '_', '.' "
                       "or '-', not dots alone")
    return given


def in_callers_words(error: BadInput) -> BadInput:
    """A refusal of job.api.submit naming the field as the caller gave it (entrypoint_num_cpus,
    not resources.CPU)."""
    text = str(error)
    # JobSpec names a resource either way: "resources.CPU: ..." or "resources: CPU: ...".
    text = re.sub(r"^resources: ([A-Za-z_][\w.-]*):", r"resources.\1:", text)
    for ours, theirs in _CALLER_NAMES:
        if text.startswith(ours + ".") or text.startswith(ours + ":"):
            return BadInput(theirs + text[len(ours):])
    return BadInput(text)


# --- a queue job as Ray's JobDetails ---------------------------------------------------------

_WAITING = ("PENDING", "SUBMITTING", "SUBMITTED")
_STATUS = {"RUNNING": "RUNNING", "SUCCEEDED": "SUCCEEDED", "FAILED": "FAILED", "STOPPED": "STOPPED",
           "CANCELLED": "STOPPED"}


def status(state: str) -> str:
    return "PENDING" if state in _WAITING else _STATUS[state]


def is_final(state: str) -> bool:
    return status(state) in ("SUCCEEDED", "FAILED", "STOPPED")


def details(job: GatewayJob) -> dict[str, Any]:
    """Ray's JobDetails of a job (store/gateway.py): PENDING while it waits, with the queue's
    reason as the message, then Ray's own words."""
    word = status(job.state)
    if job.state in _WAITING:
        message = f"{job.reason}: {job.message}" if job.reason and job.message else job.reason or job.message
    else:
        message = job.message or job.ray_message
    return {
        "type": "SUBMISSION", "job_id": None, "submission_id": job.gateway_id, "driver_info": None,
        "status": word, "entrypoint": job.entrypoint, "message": message, "error_type": None,
        "start_time": _ms(job.submitted_at), "end_time": _ms(job.finished_at) if is_final(job.state) else None,
        "metadata": job.metadata, "runtime_env": job.runtime_env, "driver_agent_http_address": None,
        "driver_node_id": job.node, "driver_exit_code": job.exit_code,
    }


def _ms(at: datetime | None) -> int | None:
    return None if at is None else int(at.timestamp() * 1000)
