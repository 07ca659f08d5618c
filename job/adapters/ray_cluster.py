"""The one module that talks to Ray: its dashboard's HTTP API, with plain requests.

Ray's own client library (ray.job_submission) is not used: importing it costs seconds in a process
that lives a minute, and before it submits it builds a `RuntimeEnv` that reads local files named in
the job's runtime_env (a requirements file, a conda YAML) from the scheduler's disk. Here a
submission is the job's validated fields posted as JSON, and nothing of the job is read locally.

The calls, each one request: the alive nodes (state API `/api/v0/nodes`), what is free on each
(`/api/cluster_status`), one job by its submission id (`/api/jobs/ID`), submit, stop, delete, logs;
and the cluster's work (`work`: its alive actors, running tasks and placement groups, one list
each). The tick never lists Ray's whole job history, which only grows.

Errors, as the tick sees them:
- `Unavailable`: Ray did not answer ("unreachable") or answered a 5xx of its own, after a few
  seconds of retries. Nothing is known about the request; for submit, the next tick asks Ray for
  the submission_id.
- `RaySubmitRefused`: Ray rejected this submission as invalid: a 4xx, or a 500 carrying a 4xx of
  its job agent or of its web server (`HTTPRequestEntityTooLarge`); sending the same request
  again gives the same answer, so the job goes back to PENDING with Ray's reason (and fails after
  the group's max_attempts). tests/adapters/ray_answers.json holds Ray's real answers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from operator import attrgetter
from typing import Any, Generic, TypedDict, TypeVar
from urllib.parse import quote

import msgspec
import requests
from requests.adapters import HTTPAdapter
from requests.utils import get_environ_proxies, get_netrc_auth
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from job import log
from job.core.errors import JobError, NotFound, Unavailable
from job.core.observed import Bundle, ClusterWork, PlacementGroup, Work
from job.core.redact import redact_url
from job.core.resources import Resources
from job.core.runtime_env import runtime_env_problem

T = TypeVar("T")

NODE_ID_LABEL = "ray.io/node-id"
# Ray's built-in resources have their own fields in a submission; everything else goes to
# entrypoint_resources (Ray refuses these names there).
_BUILTIN = {"CPU": "entrypoint_num_cpus", "GPU": "entrypoint_num_gpus", "memory": "entrypoint_memory"}
# The head wraps the refusal of its job agent (a ValueError/TypeError there: duplicate id, invalid
# label selector, bad runtime_env) in its own 500; the agent's 4xx status survives in the text.
_AGENT_REFUSED = re.compile(r"Request failed with status code 4\d\d")
# The head's own web server (aiohttp) refusing the request before Ray reads it, e.g. a body over
# its size limit, also comes as a 500 with the client error's class named in the traceback (those
# that say "later" are left out: a retry may pass).
_HEAD_REFUSED = re.compile(r"aiohttp\.web_exceptions\.HTTP(?!RequestTimeout|TooManyRequests)(BadRequest|Unauthorized|"
                           r"Forbidden|NotFound|MethodNotAllowed|NotAcceptable|Conflict|Gone|LengthRequired|"
                           r"PreconditionFailed|RequestEntityTooLarge|RequestURITooLong|UnsupportedMediaType|"
                           r"RequestRangeNotSatisfiable|ExpectationFailed|UnprocessableEntity|"
                           r"RequestHeaderFieldsTooLarge)\b")
_RAISED = re.compile(r"^\w*(?:Error|Exception): (?!Request failed with status code)(.+)$", re.MULTILINE)
# The state API's most records per list.
LIST_LIMIT = 10_000
# What holds resources, filtered by Ray: alive actors; running plain tasks (an actor's tasks hold
# nothing beyond its actor, its creation task is the actor itself); placement groups not removed,
# whose placed bundles are reserved whether used or not.
_WORK_LISTS = {
    "actors": [("state", "=", "ALIVE")],
    "tasks": [("state", "=", "RUNNING"), ("type", "=", "NORMAL_TASK")],
    "placement_groups": [("state", "!=", "REMOVED")],
}
# What the loop polls between its ticks (`supervisors`): Ray's job supervisor actors, one per job
# from its start to its end, whoever submitted it.
_SUPERVISORS = {"limit": LIST_LIMIT, "filter_keys": ["class_name", "state"], "filter_predicates": ["=", "="],
                "filter_values": ["JobSupervisor", "ALIVE"]}
# A poll is one try, answered within this or given up: the next tick is the one that retries.
POLL_TIMEOUT_S = 2.0
# Lookups of our active jobs in flight at once: one request each, so tens to thousands of active
# jobs cost a few round trips of wall time, whatever Ray's history holds.
LOOKUP_CONCURRENCY = 16


# How long a call is retried when Ray does not answer (0: tried once).
RETRY_S = 4.0


class RaySubmitRefused(JobError):
    """Ray refused this submission as invalid; retrying the same request cannot help."""


class RayNode(msgspec.Struct, frozen=True):
    """An alive node. A Struct: a tick makes one per node of every cluster, thousands, in a fraction
    of a frozen dataclass's time (bench/clusters.py)."""

    id: str
    resources: dict[str, float]
    labels: dict[str, str]
    is_head: bool
    # What Ray counts as free on the node now (Ray's names and units), or None where Ray did not
    # say: then nothing is known of outside load there.
    free: dict[str, float] | None = None


@dataclass(frozen=True)
class RayJob:
    submission_id: str
    status: str
    driver_node_id: str | None
    start_time: datetime | None
    end_time: datetime | None
    message: str | None
    exit_code: int | None
    # Why Ray failed it, where Ray says: JOB_SUPERVISOR_ACTOR_* are Ray's own faults, not the job's.
    error_type: str | None = None
    # The driver's own job id, which its actors, tasks and placement groups carry: Ray sets it once
    # the entrypoint calls `ray.init()`.
    driver_job_id: str | None = None


class _HttpError(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(f"HTTP {status}: {text.strip()[-500:]}")
        self.status = status
        self.text = text


def _refusal(exc: _HttpError) -> bool:
    """Ray's answer says the request itself is wrong: the same request gets the same answer."""
    return exc.status < 500 or bool(_AGENT_REFUSED.search(exc.text) or _HEAD_REFUSED.search(exc.text))


def _no_answer(exc: BaseException) -> bool:
    # requests' ConnectionError covers refused connections and connect timeouts.
    return isinstance(exc, (requests.ConnectionError, requests.Timeout))


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _HttpError):
        return "already exists" not in exc.text and not _refusal(exc)
    return _no_answer(exc)


def _utc(ms: int | None) -> datetime | None:
    return None if not ms else datetime.fromtimestamp(ms / 1000, UTC)


class RayCluster:
    """One Ray cluster, addressed by its dashboard URL (http://host:8265)."""

    def __init__(self, address: str, timeout_s: float, retry_s: float = RETRY_S):
        self.address = address.rstrip("/")
        # For messages and logs: a dashboard behind basic auth carries a password in its URL.
        self.shown_address = redact_url(self.address)
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        # One session, shared by the tick's submit and lookup threads: its pool keeps connections open.
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=64)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        # What the environment says of this address (its proxy, a CA bundle, ~/.netrc), read once:
        # requests reads it again at every request otherwise, scanning the whole environment, a
        # third of a request's CPU. The same settings, as requests would merge them.
        self._session.proxies = get_environ_proxies(self.address)
        self._session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
        self._session.auth = get_netrc_auth(self.address)
        self._session.trust_env = False
        # The threads of the lookups and the work lists, kept from call to call: a group's tick
        # starts them for each of its clusters, where starting threads is CPU the clusters share.
        self._pool = ThreadPoolExecutor(max_workers=LOOKUP_CONCURRENCY, thread_name_prefix="ray")

    # --- calls -------------------------------------------------------------------------------

    def nodes(self, label_selector: dict[str, str], use_head_node: bool) -> list[RayNode]:
        """Alive nodes carrying every label of the selector, with their total and free resources."""
        return selected(self.alive_nodes(), label_selector, use_head_node)

    def alive_nodes(self, labels: dict[str, str] | None = None) -> list[RayNode]:
        """Every alive node, the head's included, with its total and free resources, by id; each
        with `labels` added to its own (a group's cluster name)."""
        params = {"limit": 10000, "detail": "true", "filter_keys": "state", "filter_predicates": "=",
                  "filter_values": "ALIVE"}
        body = self._call("list nodes", "GET", "/api/v0/nodes", params=params, decoder=_NODES)
        if not body.get("result"):
            raise Unavailable(f"ray at {self.shown_address}: state API error: {body.get('msg')}")
        listing = body["data"]["result"]
        # A partial answer would make live nodes look gone and their jobs look lost.
        # (`total` also counts the dead nodes the filter left out: compare what passed the filter.)
        if listing.get("partial_failure_warning") or listing["num_filtered"] != len(listing["result"]):
            raise Unavailable(f"ray at {self.shown_address}: incomplete node list: {listing.get('partial_failure_warning')}")
        usage = self.usage()
        added = labels or {}
        found = []
        for node in listing["result"]:
            resources = _schedulable(node.resources_total or {})
            used = usage.get(node.node_id)
            found.append(RayNode(node.node_id, resources, {**(node.labels or {}), **added}, node.is_head_node,
                                 None if used is None else _free(resources, used)))
        found.sort(key=_BY_ID)
        return found

    def head_node_id(self) -> str:
        """The id of the alive head node."""
        params = {"detail": "true", "filter_keys": "is_head_node", "filter_predicates": "=", "filter_values": "true",
                  "limit": 10}
        body = self._call("head node", "GET", "/api/v0/nodes", params=params)
        heads = [node["node_id"] for node in ((body.get("data") or {}).get("result") or {}).get("result") or []
                 if node.get("is_head_node") and node.get("state") == "ALIVE"]
        if not heads:
            raise Unavailable(f"ray at {self.shown_address}: no alive head node")
        return heads[0]

    def usage(self) -> dict[str, dict[str, tuple[float, float]]]:
        """What is used of each node's resources, as (used, total), by node id: the GCS's view of
        every node's resources, which the raylets refresh as work starts and ends (within about a
        second); one request, a few milliseconds. Resource names come camelCased in this answer:
        see `_free` for Ray's own."""
        body = self._call("cluster status", "GET", "/api/cluster_status", decoder=_STATUS)
        report = ((body.get("data") or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
        return report.get("usageByNode") or {}

    def supervisors(self) -> frozenset[str]:
        """The ids of the alive job supervisors: which jobs run in Ray, for the loop that waits for
        one to start or end between its ticks. One state API list of one actor per running job,
        filtered by Ray, a few milliseconds; it changes within about 0.1 s of a job's start or end,
        where the free resources of `usage` are Ray's status report, refreshed every 5 s. One try."""
        body = self._call("list supervisors", "GET", "/api/v0/actors", params=_SUPERVISORS, once=True)
        try:
            return frozenset(actor["actor_id"] for actor in body["data"]["result"]["result"])
        except (KeyError, TypeError) as exc:
            raise Unavailable(f"ray at {self.shown_address}: state API answer listing supervisors lacks {exc}") from None

    def work(self) -> ClusterWork:
        """The cluster's alive actors, running tasks and placement groups: three lists, read at once,
        whatever the number of jobs. A list Ray cut short (more than LIST_LIMIT records, a node
        that did not answer) is named in `truncated`: what it misses cannot be told from nothing."""
        listed = dict(zip(_WORK_LISTS, self._each(self._listing, list(_WORK_LISTS)), strict=True))
        truncated = tuple(kind for kind, (_, complete) in listed.items() if not complete)
        # Thousands of records ask for a handful of distinct amounts: each made once (Resources is immutable).
        shapes: dict[tuple, Resources] = {}

        def resources(amounts: dict[str, float] | None) -> Resources:
            key = tuple((amounts or {}).items())
            found = shapes.get(key)
            if found is None:
                found = shapes[key] = Resources.of(amounts or {})
            return found

        return ClusterWork(actors=tuple(_work(record, resources) for record in listed["actors"][0]),
                           tasks=tuple(_work(record, resources) for record in listed["tasks"][0]),
                           placement_groups=tuple(_placement_group(record, resources)
                                                  for record in listed["placement_groups"][0]),
                           truncated=truncated)

    def _listing(self, kind: str) -> tuple[list[dict[str, Any]], bool]:
        """One state API list with its filters (of each record, the fields `_LISTS` keeps), and
        whether it is complete."""
        filters = _WORK_LISTS[kind]
        params = {"limit": LIST_LIMIT, "detail": "true", "filter_keys": [key for key, _, _ in filters],
                  "filter_predicates": [predicate for _, predicate, _ in filters],
                  "filter_values": [value for _, _, value in filters]}
        body = self._call(f"list {kind}", "GET", f"/api/v0/{kind}", params=params, decoder=_LISTS[kind])
        if not body.get("result"):
            raise Unavailable(f"ray at {self.shown_address}: state API error listing {kind}: {body.get('msg')}")
        try:
            listing = body["data"]["result"]
            # Cut short at the source: `total` is what Ray had (dead actors too, task events it
            # dropped), `num_after_truncation` what it kept of that. Then the dashboard filters
            # what was kept (`num_filtered` passed) and cuts that to `limit` without saying so.
            complete = (listing["total"] <= listing["num_after_truncation"]
                        and listing["num_filtered"] <= len(listing["result"]) and not listing.get("partial_failure_warning"))
        except (KeyError, TypeError) as exc:
            raise Unavailable(f"ray at {self.shown_address}: state API answer listing {kind} lacks {exc}") from None
        return listing["result"], complete

    def submit(self, *, submission_id: str, entrypoint: str, node_id: str, resources: dict[str, float],
               runtime_env: dict[str, Any], metadata: dict[str, str],
               allowed_runtime_env_keys: frozenset[str] = frozenset(), allowed_env_vars: frozenset[str] = frozenset()
               ) -> bool:
        """Submit pinned to `node_id`. True: this call created the job; False: Ray already had this
        submission_id (an earlier call of ours got through). Raises RaySubmitRefused or Unavailable.
        `allowed_runtime_env_keys`, `allowed_env_vars`: the group's allowance (runtime_env_problem)."""
        # Checked at submit; a row written around `submit` is refused here, as its own fault.
        problem = runtime_env_problem(runtime_env, allowed_runtime_env_keys, allowed_env_vars)
        if problem:
            raise RaySubmitRefused(f"runtime_env.{problem}")
        request: dict[str, Any] = {"entrypoint": entrypoint, "submission_id": submission_id,
                                   "runtime_env": runtime_env, "metadata": metadata,
                                   "entrypoint_label_selector": {NODE_ID_LABEL: node_id}}
        custom = {}
        for name, amount in resources.items():
            if name in _BUILTIN:
                request[_BUILTIN[name]] = int(amount) if name == "memory" else amount
            else:
                custom[name] = amount
        if custom:
            request["entrypoint_resources"] = custom

        def refused(exc: _HttpError) -> bool:
            if "already exists" in exc.text:
                log.event("ray_submit_exists", address=self.shown_address, submission_id=submission_id)
                return False
            raise RaySubmitRefused(f"ray refused submission {submission_id}: {_reason(exc.text)}")

        answer = self._call("submit", "POST", "/api/jobs/", json=request, handle=refused, submission_id=submission_id)
        return answer is not False

    def job(self, submission_id: str) -> RayJob | None:
        """The job, or None when Ray has no job of that submission_id."""
        details = self._call("get job", "GET", f"/api/jobs/{quote(submission_id, safe='')}",
                             handle=_on_404(None), submission_id=submission_id)
        return None if details is None else _job(details)

    def jobs(self, submission_ids: list[str]) -> dict[str, RayJob]:
        """The jobs Ray has of these submission ids (absent ones are left out), a few at a time."""
        if not submission_ids:
            return {}
        return {job.submission_id: job for job in self._each(self.job, submission_ids) if job is not None}

    def stop(self, submission_id: str) -> bool:
        """Ask Ray to stop the job (SIGTERM, then SIGKILL after Ray's grace period). True if it was
        still running; False if it had ended already or Ray does not know it."""
        body = self._call("stop job", "POST", f"/api/jobs/{quote(submission_id, safe='')}/stop",
                          handle=_on_404({"stopped": False}), submission_id=submission_id)
        return bool(body.get("stopped"))

    def delete(self, submission_id: str) -> bool:
        """Drop an ended job from Ray's job history. True if Ray had it."""
        body = self._call("delete job", "DELETE", f"/api/jobs/{quote(submission_id, safe='')}",
                          handle=_on_404({"deleted": False}), submission_id=submission_id)
        return bool(body.get("deleted"))

    def logs(self, submission_id: str) -> str:
        """The driver's output so far. NotFound when Ray has no such job."""

        def not_found() -> str:
            raise NotFound(f"ray at {self.shown_address} has no job {submission_id}")

        body = self._call("job logs", "GET", f"/api/jobs/{quote(submission_id, safe='')}/logs",
                          handle=_on_404(not_found), submission_id=submission_id)
        return body if isinstance(body, str) else body.get("logs", "")

    # --- plumbing ----------------------------------------------------------------------------

    def _each(self, call: Callable[[str], T], items: list[str]) -> list[T]:
        """`call` of each item, at once in the pool's threads, in order. When one raises, those not
        started are dropped and those started are waited for, as a pool of the call's own would."""
        futures = [self._pool.submit(call, item) for item in items]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()
            wait(futures)

    def _call(self, what: str, method: str, path: str, *, handle: Callable[[_HttpError], T] | None = None,
              params: dict | None = None, json: Any = None, decoder: msgspec.json.Decoder | None = None,
              once: bool = False, **fields: object) -> Any:
        """One request's JSON answer (what `decoder` keeps of it, when given), retried on connection
        errors and 5xx for up to retry_s (`once`: one try, within POLL_TIMEOUT_S). An HTTP error that
        is not retried goes to `handle` when given; every other failure becomes Unavailable."""

        def log_retry(state: RetryCallState) -> None:
            assert state.outcome is not None  # tenacity calls it after an attempt, with its outcome
            log.warning("ray_retry", address=self.shown_address, call=what, attempt=state.attempt_number,
                        error=_short(state.outcome.exception()), **fields)

        def send() -> Any:
            # A decoded answer is read as it comes, in pieces as large as they arrive: the state
            # API's lists of 10,000 records are tens of MiB, which requests' `content` reads 10 KiB
            # at a time, in 5 to 10 times the CPU (bench/observe.py).
            with self._session.request(method, self.address + path, params=params, json=json,
                                       timeout=min(self.timeout_s, POLL_TIMEOUT_S) if once else self.timeout_s,
                                       stream=decoder is not None) as response:
                if response.status_code != 200:
                    raise _HttpError(response.status_code, response.text)
                try:
                    return (response.json() if decoder is None
                            else decoder.decode(b"".join(response.iter_content(chunk_size=None))))
                except ValueError:
                    # Something answers HTTP there, but not a Ray dashboard (msgspec's errors are
                    # ValueErrors too: JSON, but not in the shape of Ray's answer).
                    raise Unavailable(f"ray at {self.shown_address} not usable: {what} did not answer JSON"
                                      f"{'' if decoder in (None, _JSON) else ' in the shape of the state API'}") from None

        retrying = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(1 if once else 5) | stop_after_delay(self.retry_s),
            wait=wait_exponential(multiplier=0.25, max=2),
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(send)
        except _HttpError as exc:
            if handle is not None and not _retryable(exc):
                try:
                    return handle(exc)
                except _HttpError:
                    pass
            raise self._failed(what, exc) from None
        except requests.RequestException as exc:
            raise self._failed(what, exc) from None

    def _failed(self, what: str, exc: BaseException) -> Unavailable:
        if _no_answer(exc):
            return Unavailable(f"ray at {self.shown_address} unreachable: {_short(exc)}")
        return Unavailable(f"ray at {self.shown_address} failed {what}: {_short(exc)}")


def selected(nodes: list[RayNode], label_selector: dict[str, str], use_head_node: bool) -> list[RayNode]:
    """The nodes a group places on: those carrying every label of its selector, the head only if it may."""
    wanted = label_selector.items()
    # A subset of items, compared in C: a group's thousands of nodes are looked at each tick.
    return [node for node in nodes if (use_head_node or not node.is_head) and wanted <= node.labels.items()]


def _schedulable(resources: dict[str, float]) -> dict[str, float]:
    """A node's resources without those no job asks for: its `node:<ip>` marker (nodes on one
    machine share it) and the object store."""
    return {name: amount for name, amount in resources.items()
            if not name.startswith("node:") and name != "object_store_memory"}


def _free(resources: dict[str, float], used: dict[str, tuple[float, float]]) -> dict[str, float]:
    """What is free of a node's `resources` by its `usage` (a resource the usage does not name: all of it)."""
    free = {}
    for name, amount in resources.items():
        pair = used.get(_camel(name))
        free[name] = amount if pair is None else pair[1] - pair[0]
    return free


_BY_ID = attrgetter("id")


@cache
def _camel(name: str) -> str:
    """A resource name as the dashboard's cluster status writes it (its `to_camel_case`): the
    parts after each '_' title-cased, e.g. `object_store_memory` -> `objectStoreMemory`."""
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _on_404(result: Any) -> Callable[[_HttpError], Any]:
    """A handler for _call: Ray's "no such job" becomes `result` (or its call, if callable)."""

    def handle(exc: _HttpError):
        if exc.status != 404:
            raise exc
        return result() if callable(result) else result

    return handle


def _short(exc: BaseException | None) -> str:
    if isinstance(exc, _HttpError):
        return f"HTTP {exc.status}: {_reason(exc.text)}"
    if isinstance(exc, requests.Timeout):
        return "timed out"
    if isinstance(exc, requests.ConnectionError):
        return "connection failed"
    if isinstance(exc, requests.RequestException):
        return type(exc).__name__  # its text holds the URL, and so any password in it
    return f"{type(exc).__name__}: {exc}"


def _reason(text: str) -> str:
    """The innermost exception of a server traceback (Ray sends whole stacks), not the stack."""
    raised = _RAISED.findall(text)
    if raised:
        return raised[-1].strip()[:500]
    lines = [line.strip() for line in text.splitlines() if line.strip(" .")]
    return lines[-1][:500] if lines else "(no message)"


def _job(details: dict[str, Any]) -> RayJob:
    return RayJob(
        submission_id=details["submission_id"],
        status=details["status"],
        driver_node_id=details.get("driver_node_id") or None,
        start_time=_utc(details.get("start_time")),
        end_time=_utc(details.get("end_time")),
        message=details.get("message") or None,
        exit_code=details.get("driver_exit_code"),
        error_type=details.get("error_type") or None,
        driver_job_id=details.get("job_id") or None,
    )


class _Work(TypedDict, total=False):
    """What the tick reads of an actor or a running task. The state API's record has dozens of
    fields more (a task's events and profiling data): msgspec skips them without making objects
    of them, which was most of the time of lists of 10,000 (bench/observe.py)."""

    job_id: str | None
    node_id: str | None
    required_resources: dict[str, float] | None
    placement_group_id: str | None
    name: str | None


class _Bundle(TypedDict, total=False):
    node_id: str | None
    unit_resources: dict[str, float] | None


class _PlacementGroup(TypedDict, total=False):
    placement_group_id: str
    creator_job_id: str | None
    state: str
    bundles: list[_Bundle] | None


R = TypeVar("R")


class _Listing(TypedDict, Generic[R], total=False):
    total: int
    num_after_truncation: int
    num_filtered: int
    partial_failure_warning: Any
    result: list[R]


class _Data(TypedDict, Generic[R], total=False):
    result: _Listing[R]


class _Answer(TypedDict, Generic[R], total=False):
    """A state API list's answer: `result` false (and `msg`) when Ray failed to list."""

    result: Any
    msg: Any
    data: _Data[R]


class _StateNode(msgspec.Struct):
    """What the tick reads of a node in the state API's list: of a thousand nodes' answer, msgspec
    makes no objects of the rest (bench/clusters.py)."""

    node_id: str
    is_head_node: bool
    resources_total: dict[str, float] | None = None
    labels: dict[str, Any] | None = None


class _Report(TypedDict, total=False):
    usageByNode: dict[str, dict[str, tuple[float, float]]] | None


class _ClusterStatus(TypedDict, total=False):
    loadMetricsReport: _Report | None


class _StatusData(TypedDict, total=False):
    clusterStatus: _ClusterStatus | None


class _Status(TypedDict, total=False):
    """What the tick reads of the cluster status: each node's usage, without the autoscaler's
    report beside it (its list of every node again, its text)."""

    data: _StatusData | None


# Any JSON, as dicts and lists: msgspec reads a thousand nodes' answer in a third of json's time,
# which a group of ten clusters pays ten times a tick (bench/clusters.py).
_JSON = msgspec.json.Decoder()
_NODES = msgspec.json.Decoder(_Answer[_StateNode])
_STATUS = msgspec.json.Decoder(_Status)
_LISTS: dict[str, msgspec.json.Decoder[Any]] = {
    "actors": msgspec.json.Decoder(_Answer[_Work]), "tasks": msgspec.json.Decoder(_Answer[_Work]),
    "placement_groups": msgspec.json.Decoder(_Answer[_PlacementGroup])}


def _work(record: dict[str, Any], resources: Callable[[dict | None], Resources]) -> Work:
    return Work(job_id=record.get("job_id") or "", node=record.get("node_id") or None,
                resources=resources(record.get("required_resources")),
                placement_group=record.get("placement_group_id") or None, name=record.get("name") or "")


def _placement_group(record: dict[str, Any], resources: Callable[[dict | None], Resources]) -> PlacementGroup:
    return PlacementGroup(id=record["placement_group_id"], creator_job_id=record.get("creator_job_id") or "",
                          state=record["state"],
                          bundles=tuple(Bundle(node=bundle.get("node_id") or None,
                                               resources=resources(bundle.get("unit_resources")))
                                        for bundle in record.get("bundles") or ()))


def cluster_of(ray_address: str, timeout_s: float, retry_s: float = RETRY_S) -> RayCluster:
    """The cluster of a group's `ray_address`: a dashboard URL as it is, a `raycluster://` address
    resolved through the Kubernetes API on every call (its head service can move between ticks)."""
    if ray_address.startswith("raycluster://"):
        from job.adapters.kuberay import resolve_dashboard_url

        ray_address = resolve_dashboard_url(ray_address)
    return cluster_for(ray_address, timeout_s, retry_s)


@cache
def cluster_for(address: str, timeout_s: float, retry_s: float = RETRY_S) -> RayCluster:
    """The process-wide RayCluster of a dashboard address: one session, its connections kept open."""
    return RayCluster(address, timeout_s, retry_s)
