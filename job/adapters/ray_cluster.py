"""The one module that talks to Ray: nodes from the state API, jobs through the Job Submission API.

A `RayCluster` per dashboard address, made once per process (`cluster_for`): importing
ray.job_submission costs seconds, so it happens lazily, on the first call that needs Ray.

Errors, as the tick sees them:
- `Unavailable`: Ray could not be reached or answered 5xx, after a few seconds of retries. Nothing
  is known about the request; for submit, the next tick asks Ray for the submission_id.
- `RaySubmitRefused`: Ray (or its client library) rejected this submission as invalid; sending
  the same request again gives the same answer, so the job goes back to PENDING with the reason.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Callable, TypeVar

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from job import log
from job.core.errors import JobError, NotFound, Unavailable
from job.core.redact import redact_url
from job.core.specs import local_runtime_env_fields

T = TypeVar("T")

NODE_ID_LABEL = "ray.io/node-id"
# Ray's built-in resources, passed as their own submit_job arguments; everything else goes to
# entrypoint_resources (Ray refuses these names there).
_BUILTIN = {"CPU": "entrypoint_num_cpus", "GPU": "entrypoint_num_gpus", "memory": "entrypoint_memory"}
# The head wraps the refusal of its job agent (a ValueError/TypeError there: duplicate id, invalid
# label selector) in its own 500; the agent's 4xx status survives in the text.
_AGENT_REFUSED = re.compile(r"Request failed with status code 4\d\d")
_RAISED = re.compile(r"^\w*(?:Error|Exception): (?!Request failed with status code)(.+)$", re.MULTILINE)


class RaySubmitRefused(JobError):
    """Ray refused this submission as invalid; retrying the same request cannot help."""


@dataclass(frozen=True)
class RayNode:
    id: str
    resources: dict[str, float]
    labels: dict[str, str]
    is_head: bool


@dataclass(frozen=True)
class RayJob:
    submission_id: str
    status: str
    driver_node_id: str | None
    start_time: datetime | None
    end_time: datetime | None
    message: str | None
    exit_code: int | None


class _HttpError(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(f"HTTP {status}: {text.strip()[-500:]}")
        self.status = status
        self.text = text


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _HttpError):
        return exc.status >= 500 and "already exists" not in exc.text and not _AGENT_REFUSED.search(exc.text)
    if isinstance(exc, requests.HTTPError):  # from the client library's own version check
        return exc.response is not None and exc.response.status_code >= 500
    # requests' ConnectionError covers refused connections and connect timeouts; the client
    # library turns them into the builtin ConnectionError during its version check.
    return isinstance(exc, (requests.ConnectionError, requests.Timeout, ConnectionError))


def _utc(ms: int | None) -> datetime | None:
    return None if not ms else datetime.fromtimestamp(ms / 1000, timezone.utc)


class RayCluster:
    """One Ray cluster, addressed by its dashboard URL (http://host:8265)."""

    def __init__(self, address: str, timeout_s: float, retry_s: float = 4.0):
        self.address = address.rstrip("/")
        # For messages and logs: a dashboard behind basic auth carries a password in its URL.
        self.shown_address = redact_url(self.address)
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self._client_instance = None
        # The tick submits from a few threads at once; one client (and one version check) for all.
        self._client_lock = threading.Lock()

    # --- calls -------------------------------------------------------------------------------

    def nodes(self, label_selector: dict[str, str], use_head_node: bool) -> list[RayNode]:
        """Alive nodes carrying every label of the selector, with their total resources."""
        params = {"limit": 10000, "detail": "true", "filter_keys": "state", "filter_predicates": "=",
                  "filter_values": "ALIVE"}
        body = self._call("list nodes", lambda c: c.get_json("/api/v0/nodes", params))
        if not body.get("result"):
            raise Unavailable(f"ray at {self.shown_address}: state API error: {body.get('msg')}")
        listing = body["data"]["result"]
        # A partial answer would make live nodes look gone and their jobs look lost.
        if listing.get("partial_failure_warning") or listing["total"] != listing["num_after_truncation"]:
            raise Unavailable(f"ray at {self.shown_address}: incomplete node list: {listing.get('partial_failure_warning')}")
        found = []
        for node in listing["result"]:
            labels = dict(node.get("labels") or {})
            if node["is_head_node"] and not use_head_node:
                continue
            if any(labels.get(k) != v for k, v in label_selector.items()):
                continue
            resources = {name: float(amount) for name, amount in (node.get("resources_total") or {}).items()
                         if not name.startswith("node:") and name != "object_store_memory"}
            found.append(RayNode(id=node["node_id"], resources=resources, labels=labels, is_head=node["is_head_node"]))
        return sorted(found, key=lambda n: n.id)

    def submit(self, *, submission_id: str, entrypoint: str, node_id: str, resources: dict[str, float],
               runtime_env: dict[str, Any], metadata: dict[str, str]) -> bool:
        """Submit pinned to `node_id`. True: this call created the job; False: Ray already had this
        submission_id (an earlier call of ours got through). Raises RaySubmitRefused or Unavailable."""
        local = local_runtime_env_fields(runtime_env)
        if local:
            raise RaySubmitRefused(f"runtime_env {', '.join(local)}: only remote URIs are allowed, not local paths")
        kwargs: dict[str, Any] = {"entrypoint_resources": {}}
        for name, amount in resources.items():
            if name in _BUILTIN:
                kwargs[_BUILTIN[name]] = int(amount) if name == "memory" else amount
            else:
                kwargs["entrypoint_resources"][name] = amount

        def call(client):
            try:
                client.submit_job(submission_id=submission_id, entrypoint=entrypoint, runtime_env=runtime_env,
                                  metadata=metadata, entrypoint_label_selector={NODE_ID_LABEL: node_id}, **kwargs)
            except (ValueError, TypeError) as exc:
                # The client library validates runtime_env and the request before sending it.
                raise RaySubmitRefused(f"ray refused submission {submission_id}: {exc}") from None
            return True

        def refused(exc: _HttpError) -> bool:
            if "already exists" in exc.text:
                log.event("ray_submit_exists", address=self.shown_address, submission_id=submission_id)
                return False
            raise RaySubmitRefused(f"ray refused submission {submission_id}: {_reason(exc.text)}")

        return self._call("submit", call, handle=refused, submission_id=submission_id)

    def jobs(self) -> dict[str, RayJob]:
        """Every submitted job Ray knows (finished ones too), by submission_id, in one request."""
        details = self._call("list jobs", lambda c: c.list_jobs())
        return {d.submission_id: _job(d) for d in details if d.submission_id}

    def job(self, submission_id: str) -> RayJob | None:
        """The job, or None when Ray has no job of that submission_id."""
        details = self._call("get job", lambda c: c.get_job_info(submission_id),
                             handle=_on_404(None), submission_id=submission_id)
        return None if details is None else _job(details)

    def stop(self, submission_id: str) -> bool:
        """Ask Ray to stop the job (SIGTERM, then SIGKILL after Ray's grace period). True if it was
        still running; False if it had ended already or Ray does not know it."""
        return self._call("stop job", lambda c: c.stop_job(submission_id),
                          handle=_on_404(False), submission_id=submission_id)

    def logs(self, submission_id: str) -> str:
        """The driver's output so far. NotFound when Ray has no such job."""

        def not_found() -> str:
            raise NotFound(f"ray at {self.shown_address} has no job {submission_id}")

        return self._call("job logs", lambda c: c.get_job_logs(submission_id),
                          handle=_on_404(not_found), submission_id=submission_id)

    # --- plumbing ----------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[Any], T], handle: Callable[[_HttpError], T] | None = None,
              **fields: object) -> T:
        """fn(client), retried on connection errors and 5xx for up to retry_s. An HTTP error that
        is not retried goes to `handle` when given; every other failure becomes Unavailable."""

        def log_retry(state: RetryCallState) -> None:
            log.warning("ray_retry", address=self.shown_address, call=what, attempt=state.attempt_number,
                        error=_short(state.outcome.exception()), **fields)

        retrying = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(5) | stop_after_delay(self.retry_s),
            wait=wait_exponential(multiplier=0.25, max=2),
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(lambda: fn(self._client()))
        except _HttpError as exc:
            if handle is not None and not _retryable(exc):
                try:
                    return handle(exc)
                except _HttpError:
                    pass
            raise self._failed(what, exc) from None
        except (requests.RequestException, ConnectionError) as exc:
            raise self._failed(what, exc) from None

    def _failed(self, what: str, exc: BaseException) -> Unavailable:
        if _retryable(exc):
            return Unavailable(f"ray at {self.shown_address} unreachable: {_short(exc)}")
        return Unavailable(f"ray at {self.shown_address} failed {what}: {_short(exc)}")

    def _client(self):
        with self._client_lock:
            if self._client_instance is None:
                try:
                    self._client_instance = _make_client(self.address, self.timeout_s)
                except RuntimeError as exc:
                    # Something answers HTTP there, but not a Ray dashboard of a usable version.
                    raise Unavailable(f"ray at {self.shown_address} not usable: {exc}") from None
            return self._client_instance


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
    if isinstance(exc, (requests.ConnectionError, ConnectionError)):
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


def _job(details) -> RayJob:
    return RayJob(
        submission_id=details.submission_id,
        status=details.status.value,
        driver_node_id=details.driver_node_id or None,
        start_time=_utc(details.start_time),
        end_time=_utc(details.end_time),
        message=details.message or None,
        exit_code=details.driver_exit_code,
    )


def _make_client(address: str, timeout_s: float):
    from ray.job_submission import JobSubmissionClient

    class Client(JobSubmissionClient):
        # The Ray client library sends its requests without a timeout (a silent peer would hang
        # the tick) and reports HTTP errors only as text; these two hooks fix both.
        def _do_request(self, method, endpoint, **kwargs):
            kwargs.setdefault("timeout", timeout_s)
            return super()._do_request(method, endpoint, **kwargs)

        def _raise_error(self, r):
            raise _HttpError(r.status_code, r.text)

        def get_json(self, endpoint: str, params: dict) -> dict:
            r = self._do_request("GET", endpoint, params=params)
            if r.status_code != 200:
                self._raise_error(r)
            return r.json()

    return Client(address)


def cluster_of(ray_address: str, timeout_s: float) -> RayCluster:
    """The cluster of a group's `ray_address`: a dashboard URL as it is, a `raycluster://` address
    resolved through the Kubernetes API on every call (its head service can move between ticks)."""
    if ray_address.startswith("raycluster://"):
        from job.adapters.kuberay import resolve_dashboard_url

        ray_address = resolve_dashboard_url(ray_address)
    return cluster_for(ray_address, timeout_s)


@lru_cache(maxsize=None)
def cluster_for(address: str, timeout_s: float) -> RayCluster:
    """The process-wide RayCluster of a dashboard address: one client, one version check."""
    return RayCluster(address, timeout_s)
