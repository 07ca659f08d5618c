"""What a job's runtime_env may hold: the keys Ray documents, each in the shapes Ray documents for
it, nothing that names a file on the machine that submits it, and no variable that Ray reads to run
and stop the job (RAY_CONTROL).

The scheduler posts a job's runtime_env to Ray as it is, so nothing here is ever read locally;
still, a string `pip` or `conda` is, to Ray's tools, a requirements file or an environment file,
and a local `working_dir` is a folder to zip: names of files on the scheduler's machine, refused so
that no later change of how jobs are sent could read them. Code and packages come from remote URIs
(s3://, gs://, https://, ...) or inline lists."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

_REMOTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")

ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# env_vars reach a process of Ray's, not only the job's: Ray runs a job's supervisor, the actor that
# stops its entrypoint (the stop signal, then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S), in the job's
# runtime_env, started as `bash -c "exec python ..."` with env_vars set (ray/_private/runtime_env/
# context.py). So refused, unless a group allows them by name: RAY_* (any case), Ray's settings,
# the supervisor's stop signal and wait and every `RAY_<name>` of the core worker's RayConfig;
# BASH_ENV, SHELLOPTS and BASHOPTS, which make that bash run code of the job's first; and any name
# that is not a plain variable name (`BASH_FUNC_exec%%` defines a bash function). Not refused:
# CUDA_VISIBLE_DEVICES and the like, which Ray sets over the job's value in a worker that holds
# accelerators and leaves as the node has them in one that holds none (so a job sees no more GPUs by
# setting them); PYTHONPATH, LD_PRELOAD, LD_LIBRARY_PATH, which have ordinary uses (jemalloc, CUDA
# libraries) and give nothing that the job's own working_dir, first on the supervisor's PYTHONPATH,
# does not.
RAY_CONTROL = re.compile(r"RAY_.*|BASH_ENV|SHELLOPTS|BASHOPTS", re.IGNORECASE | re.DOTALL)
# What the queue tells a driver in its environment (scheduler/submit.py): a job that set them itself
# would have them overwritten, so a submit refuses them (`queue_env_problem`, core/specs.py), and no
# group allows them. Not the submission's check: the runtime_env sent to Ray holds them.
QUEUE_ENV = frozenset({"JOB_ID", "JOB_ATTEMPT", "JOB_CLASS", "JOB_PREEMPTIBLE", "JOB_BUNDLES", "JOB_BUNDLE_STRATEGY",
                       "JOB_ARRAY_ID", "JOB_ARRAY_INDEX"})


def _remote(uri: str) -> str:
    if not _REMOTE_URI.fullmatch(uri):
        raise ValueError(f"{uri!r} is not a remote URI (e.g. s3://bucket/code.zip); local paths are not sent")
    return uri


def _inline_list(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("give a list of requirements, e.g. [\"numpy==2.1\"]; a string names a file, which is not read")
    return value


def _conda_name(name: str) -> str:
    if "/" in name or name.endswith((".yaml", ".yml")):
        raise ValueError(f"{name!r} names a file; give an environment name or an inline spec (a JSON object)")
    return name


RemoteURI = Annotated[StrictStr, AfterValidator(_remote)]
Requirements = Annotated[list[StrictStr], BeforeValidator(_inline_list)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PipSpec(_Strict):
    packages: Requirements
    pip_check: StrictBool | None = None
    pip_version: StrictStr | None = None


class UvSpec(_Strict):
    packages: Requirements
    uv_version: StrictStr | None = None
    uv_check: StrictBool | None = None
    uv_pip_install_options: list[StrictStr] | None = None


class SetupConfig(_Strict):
    setup_timeout_seconds: StrictInt | None = None
    eager_install: StrictBool | None = None
    log_files: list[StrictStr] | None = None


class RuntimeEnvSpec(_Strict):
    pip: Annotated[Requirements | PipSpec, BeforeValidator(_inline_list)] | None = None
    uv: Annotated[Requirements | UvSpec, BeforeValidator(_inline_list)] | None = None
    conda: Annotated[StrictStr, AfterValidator(_conda_name)] | dict[StrictStr, Any] | None = None
    env_vars: dict[StrictStr, StrictStr] | None = None
    working_dir: RemoteURI | None = None
    py_modules: list[RemoteURI] | None = None
    image_uri: StrictStr | None = Field(default=None, min_length=1)
    config: SetupConfig | None = None
    excludes: list[StrictStr] | None = None


KNOWN_KEYS = frozenset(RuntimeEnvSpec.model_fields)


def name_problem(name: str) -> str | None:
    """Why a variable's name is not a plain one, or None."""
    if ENV_VAR_NAME.fullmatch(name):
        return None
    return f"{name[:130]!r} is not a variable name (letters, digits and '_', not first a digit)"


def controls(runtime_env: Any) -> frozenset[str]:
    """The names in its env_vars that only a group's allowance lets through (RAY_CONTROL)."""
    env_vars = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
    if not isinstance(env_vars, dict):
        return frozenset()
    return frozenset(name for name in env_vars if isinstance(name, str) and RAY_CONTROL.fullmatch(name))


def queue_env_problem(runtime_env: dict[str, Any]) -> str | None:
    """Which of the queue's own variables (QUEUE_ENV) a submitted runtime_env sets, or None."""
    env_vars = runtime_env.get("env_vars")
    for name in sorted(QUEUE_ENV.intersection(env_vars)) if isinstance(env_vars, dict) else ():
        return f"env_vars.{name}: the queue sets it in the job's environment, so a job may not set it"
    return None


def runtime_env_problem(runtime_env: Any, allowed_keys: frozenset[str] = frozenset(),
                        allowed_env_vars: frozenset[str] = frozenset()) -> str | None:
    """What is wrong with a runtime_env, as `pip[0]: ...`, or None. Keys in `allowed_keys` (a
    group's allowance beyond the known ones) are taken as they are; so are the env_vars named in
    `allowed_env_vars` (its allowance of RAY_CONTROL names)."""
    if not isinstance(runtime_env, dict):
        return "must be a JSON object"
    checked = {key: value for key, value in runtime_env.items() if key not in allowed_keys - KNOWN_KEYS}
    try:
        RuntimeEnvSpec.model_validate(checked)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # Of the alternatives of a shape (a list, or an object with `packages`), the one that got
        # past the type of the value says what is wrong with it.
        error = next((e for e in errors if e["type"] not in _TYPE_MISMATCHES), errors[0])
        path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                       for part in error["loc"] if isinstance(part, int) or _is_key(part)).lstrip(".")
        if error["type"] == "extra_forbidden" and "." in path:
            return f"{path}: not a field of {path.rpartition('.')[0]}"
        if error["type"] == "extra_forbidden":
            return (f"{path}: not a runtime_env key the scheduler accepts (known: {', '.join(sorted(KNOWN_KEYS))}; "
                    "an operator may allow more per group)")
        cause = error.get("ctx", {}).get("error")
        message = str(cause) if isinstance(cause, ValueError) else error["msg"]
        return f"{path}: {message}"
    for name in runtime_env.get("env_vars") or {}:
        if problem := name_problem(name):
            return f"env_vars: {problem}"
        if RAY_CONTROL.fullmatch(name) and name not in allowed_env_vars:
            return (f"env_vars.{name}: Ray reads it to run and stop the job, so a job may not set it "
                    "(an operator may allow it per group)")
    return None


_TYPE_MISMATCHES = {"list_type", "dict_type", "model_type", "string_type", "model_attributes_type"}
_ALTERNATIVES = {"str", "PipSpec", "UvSpec", "SetupConfig"}


def _is_key(part: str) -> bool:
    """Whether a part of an error's location is a key of the document, not the name pydantic gives
    an alternative of a union (`list[...]`, `function-after[...]`, `PipSpec`)."""
    return "[" not in part and part not in _ALTERNATIVES
