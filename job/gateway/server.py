"""`python -m job gateway`: Ray's Job Submission REST API in front of the queue, under
/groups/GROUP, so that `ray job submit --address http://queue:8265/groups/gpu` and
`JobSubmissionClient` submit to the queue unchanged.

    GET  /api/version                   POST /api/jobs/ (submit)      GET /api/jobs/ (list)
    GET  /api/jobs/ID                   POST /api/jobs/ID/stop        DELETE /api/jobs/ID
    GET  /api/jobs/ID/logs              GET  /api/jobs/ID/logs/tail (WebSocket)
    GET, PUT /api/packages/PROTOCOL/NAME (forwarded to the group's Ray cluster)
    GET  /healthz (no token: 200 when PostgreSQL answers)

aiohttp, not the standard library's server of `serve`: `ray job submit` follows a waiting job's log
over a WebSocket, for as long as the job waits and runs, and aiohttp (Ray's own dashboard server,
installed with ray[default]) serves those without a thread each. A submission is a row, written
by job.api.submit on a pooled connection in a worker thread.

Every request but /healthz names a bearer token (`python -m job token create`), checked from its
headers before a byte of its body is read (no token or a bad one: 401 and nothing else, the
connection closed if a body was coming); the statements run under the token's user's role
(store/tokens.py act_as), whose row-level security shows it only its own jobs. What a caller sends
and what the gateway holds for it are bounded: a body by its route (413), a submission's JSON by its
depth and size, packages and lists by how many are held at once (docs/guides/gateway.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import psycopg
from aiohttp import WSCloseCode, web

from job import api, log
from job.adapters.ray_cluster import cluster_of
from job.adapters.ray_stream import RayStream
from job.core.errors import BadInput, Conflict, JobError, NotFound, PermissionDenied
from job.gateway import translate
from job.store import DictConnection, tokens
from job.store import gateway as rows
from job.store.connection import connect
from job.store.migrations import ensure_current

T = TypeVar("T")
# A package is held in memory while it is forwarded, one at a time: k8s/gateway.yaml's memory limit
# leaves room for it (Ray's GCS takes up to 512 MiB; its client warns of a file from 10 MiB on).
MAX_PACKAGE_BYTES = 100 * 1024 * 1024
PACKAGES_AT_ONCE = 1
# A submission's JSON: well above what a job may hold (job/core/specs.py: entrypoint and runtime_env
# 64 KiB each, metadata 16 KiB, a character up to 6 bytes as a JSON escape), far below a package.
MAX_SUBMIT_BYTES = 1024 * 1024
# Submissions whose bodies did not come whole with their headers, received and parsed at once.
RECEIVING_AT_ONCE = 4
# A list answer's bytes (the newest jobs first, up to this), and how many are built and sent at once.
MAX_LIST_BYTES = 8 * 1024 * 1024
LISTS_AT_ONCE = 2
# What the gateway holds at once, at most, whatever arrives (docs/guides/gateway.md): about
# 70 MiB at rest, a package (100 MiB, in a buffer grown an eighth over), the submissions being
# received (1 MiB each and what it parses to) and parsed, two lists (8 MiB each, their rows a batch
# at a time); beside it aiohttp's buffer of each open connection.
MEMORY_BOUND_MIB = 256
# How long a package or a list waits for its turn before it is told to try again (503).
WAIT_FOR_TURN_S = 30.0
# How long a list's answer may take to send: a client that reads slower gives its turn up.
LIST_SEND_S = 60.0
# How often a log tail looks at a waiting job: Ray's own tail waits 1 s for its driver.
TAIL_POLL_S = 1.0
# The Job Submission API's version that Ray's client checks (ray/dashboard/modules/version.py).
API_VERSION = "4"
_BEARER = "bearer "


class Unauthorized(Exception):
    """No token, or one that is unknown, revoked or expired."""


class TooLarge(Exception):
    """A body over its route's limit."""


class Busy(Exception):
    """What the request needs is held by others for longer than it may wait."""


# Control characters (C0, DEL, C1) in a path part: never a name of ours, and PostgreSQL refuses NUL.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# A path part under the name a refusal gives it.
_PATH_PARTS = {"id": "submission_id", "name": "package"}


class Database:
    """Connections to PostgreSQL, one per worker thread at most, kept open between requests."""

    def __init__(self, url: str, size: int):
        self.url, self.size = url, size
        self._idle: queue.SimpleQueue[DictConnection] = queue.SimpleQueue()
        self.executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="gateway-db")

    def _take(self) -> DictConnection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            conn = connect(self.url)
            try:
                ensure_current(conn)
            except BaseException:
                conn.close()
                raise
            return conn

    def user_of(self, token: str) -> str | None:
        """The token's user, or None: one statement outside a transaction, so that the request's
        own work after it takes no more round trips than with the lookup inside it."""
        conn = self._take()
        try:
            conn.autocommit = True
            try:
                return tokens.user_of(conn, token)
            finally:
                conn.autocommit = False
        finally:
            if not conn.broken and not conn.closed:
                self._idle.put(conn)
            else:
                conn.close()

    def own(self, work: Callable[[DictConnection], T]) -> T:
        """`work(conn)` in one transaction as the gateway's own login, committed."""
        conn = self._take()
        try:
            result = work(conn)
            conn.commit()
            return result
        finally:
            if not conn.broken and not conn.closed:
                conn.rollback()
                self._idle.put(conn)
            else:
                conn.close()

    def ping(self) -> None:
        self.own(lambda conn: conn.execute("SELECT 1"))

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        while not self._idle.empty():
            self._idle.get_nowait().close()


def _token(request: web.Request) -> str | None:
    for header in ("Authorization", "X-Ray-Authorization"):
        value = request.headers.get(header, "")
        if value.lower().startswith(_BEARER):
            return value[len(_BEARER):].strip() or None
    return None


def _text(status: int, text: str) -> web.Response:
    # Ray's job server answers errors as plain text, which its client puts in its RuntimeError.
    return web.Response(status=status, text=text)


async def read_body(request: web.Request, limit: int) -> bytearray:
    """The request's body, read as it streams in, TooLarge past `limit` (a Content-Length over it
    before any of it is read)."""
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge(limit)
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > limit:
            raise TooLarge(limit)
    return body


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    try:
        return await handler(request)
    except Unauthorized:
        log.warning("gateway_unauthorized", method=request.method, path=request.path, remote=request.remote)
        answer = web.Response(status=401)
    except tokens.RoleRefused as exc:
        log.warning("gateway_token_refused", method=request.method, path=request.path, why=str(exc))
        answer = _text(403, str(exc))
    except TooLarge as exc:
        log.warning("gateway_too_large", method=request.method, path=request.path, limit=exc.args[0])
        answer = _text(413, f"request: the body is over this route's limit of {exc.args[0]} bytes")
    except Busy as exc:
        log.warning("gateway_busy", method=request.method, path=request.path, cause=str(exc))
        answer = _text(503, f"busy: {exc}; try again")
    except NotFound as exc:
        answer = _text(404, str(exc))
    except (BadInput, Conflict, PermissionDenied) as exc:
        answer = _text(400, str(exc))
    except (JobError, psycopg.Error) as exc:
        cause = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        log.warning("gateway_unavailable", method=request.method, path=request.path, cause=cause)
        answer = _text(503, f"unavailable: {cause}")
    return answer


class _ClientGone(Exception):
    """The WebSocket's client closed it or went away."""


async def _drain(ws: web.WebSocketResponse) -> None:
    async for _ in ws:
        pass


async def _unless(gone: asyncio.Future, work: Awaitable[T]) -> T:
    """`work`'s result, unless the client leaves first: then `work` is cancelled."""
    task = asyncio.ensure_future(work)
    await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    if not task.done():
        task.cancel()
        raise _ClientGone
    return task.result()


@contextlib.asynccontextmanager
async def _turn(slots: asyncio.Semaphore, what: str) -> AsyncIterator[None]:
    """One of `slots` while the block runs; Busy if none comes free within WAIT_FOR_TURN_S."""
    try:
        async with asyncio.timeout(WAIT_FOR_TURN_S):
            await slots.acquire()
    except TimeoutError:
        raise Busy(what) from None
    try:
        yield
    finally:
        slots.release()


def _listed(conn: DictConnection, group: str) -> list[bytes]:
    """The group's jobs as Ray's JobDetails, newest first, as many as MAX_LIST_BYTES hold."""
    parts, size = [], 2
    for row in rows.named_jobs(conn, group):
        part = json.dumps(translate.details(row)).encode()
        size += len(part) + 1
        if size > MAX_LIST_BYTES:
            break
        parts.append(part)
    return parts


def _check_path(request: web.Request) -> None:
    for part, value in request.match_info.items():
        if _CONTROL.search(value):
            raise BadInput(f"{_PATH_PARTS.get(part, part)}: must not contain control characters")


def _job(conn: DictConnection, user: str, group: str, submission_id: str) -> rows.GatewayJob:
    row = rows.job_named(conn, user, group, submission_id)
    if row is None:
        raise NotFound(f"Job {submission_id} does not exist")
    return row


class Gateway:
    def __init__(self, db: Database, ray_timeout_s: float, keep_packages_s: float):
        self.db, self.ray_timeout_s, self.keep_packages_s = db, ray_timeout_s, keep_packages_s
        self._streams: dict[str, RayStream] = {}
        # What is held in memory at once beside what aiohttp buffers of each connection
        # (docs/guides/gateway.md).
        self._receiving = asyncio.Semaphore(RECEIVING_AT_ONCE)
        self._packages = asyncio.Semaphore(PACKAGES_AT_ONCE)
        self._lists = asyncio.Semaphore(LISTS_AT_ONCE)

    @web.middleware
    async def authenticate(self, request: web.Request,
                           handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Every route but /healthz: without a token, 401 at once. With a body still coming, the
        token is looked up before a byte more of it is read. Without one (no body, or all of it
        came with the headers, which aiohttp holds anyway), in the request's own transaction
        (_as_user), before its path or body are looked at: one lookup either way, and no more
        round trips than a request took with it."""
        if request.match_info.http_exception is not None or request.path == "/healthz":
            return await handler(request)
        token = _token(request)
        if token is None:
            raise Unauthorized
        request["token"] = token
        if not request.content.is_eof():
            user = await asyncio.get_running_loop().run_in_executor(self.db.executor, self.db.user_of, token)
            if user is None:
                raise Unauthorized
            _check_path(request)
            request["user"] = user
        return await handler(request)

    async def _as_user(self, request: web.Request, work: Callable[[DictConnection, str], T]) -> T:
        """`work(conn, user)` in one transaction under the caller's role, committed; the token's
        user looked up first in it, unless `authenticate` did."""
        known = request.get("user")

        def acting(conn: DictConnection) -> T:
            user = known or tokens.user_of(conn, request["token"])
            if user is None:
                raise Unauthorized
            if known is None:
                _check_path(request)
            tokens.act_as(conn, user)
            return work(conn, user)

        return await asyncio.get_running_loop().run_in_executor(self.db.executor, self.db.own, acting)

    async def _dashboard(self, ray_address: str) -> str:
        """A group's dashboard URL (a `raycluster://` address resolved through Kubernetes)."""
        cluster = await asyncio.to_thread(cluster_of, ray_address, self.ray_timeout_s)
        return cluster.address

    def _stream(self, dashboard: str) -> RayStream:
        return self._streams.setdefault(dashboard, RayStream(dashboard))

    async def healthz(self, request: web.Request) -> web.Response:
        await asyncio.get_running_loop().run_in_executor(self.db.executor, self.db.ping)
        return _text(200, "ok\n")

    async def version(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        if await self._as_user(request, lambda conn, user: rows.ray_addresses(conn, group)) is None:
            raise NotFound(f"group {group!r} does not exist")
        try:
            ray_version = version("ray")
        except PackageNotFoundError:
            ray_version = "unknown"
        return web.json_response({"version": API_VERSION, "ray_version": ray_version, "ray_commit": "",
                                  "session_name": f"job-gateway/{group}"})

    async def submit(self, request: web.Request) -> web.Response:
        if request.content.is_eof():
            return await self._submit(request)
        async with _turn(self._receiving, "other large submissions are being received"):
            return await self._submit(request)

    async def _submit(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        body = await read_body(request, MAX_SUBMIT_BYTES)

        def enqueue(conn: DictConnection, user: str) -> tuple[translate.Submission, int]:
            # Parsed once the token is known, by a database worker, not in the event loop: a large
            # body delays no other request, and no more are parsed at once than there are workers.
            asked = translate.submission(translate.read_json(body))
            try:
                job_id = api.submit(conn=conn, user=user, group=group, **asked.options)
            except BadInput as exc:
                raise translate.in_callers_words(exc) from None
            rows.name_job(conn, asked.submission_id, job_id)
            return asked, job_id

        asked, job_id = await self._as_user(request, enqueue)
        log.event("gateway_submitted", group=group, job=job_id, submission_id=asked.submission_id)
        return web.json_response({"job_id": asked.submission_id, "submission_id": asked.submission_id})

    async def listing(self, request: web.Request) -> web.StreamResponse:
        group = request.match_info["group"]
        async with _turn(self._lists, "other lists are being answered"):
            parts = await self._as_user(request, lambda conn, user: _listed(conn, group))
            response = web.StreamResponse(headers={"Content-Type": "application/json; charset=utf-8"})
            response.content_length = sum(map(len, parts)) + max(len(parts) - 1, 0) + 2
            # Sent a job at a time, the turn held meanwhile: a slow reader holds no more than this.
            try:
                async with asyncio.timeout(LIST_SEND_S):
                    await response.prepare(request)
                    for i, part in enumerate(parts):
                        await response.write((b"," if i else b"[") + part)
                    await response.write(b"]" if parts else b"[]")
            except ConnectionError:
                log.event("gateway_list_abandoned", group=group, why="client left")
            except TimeoutError:
                log.warning("gateway_list_abandoned", group=group, why=f"not read within {LIST_SEND_S:g} s")
                if request.transport is not None:
                    request.transport.abort()
        return response

    async def show(self, request: web.Request) -> web.Response:
        group, ident = request.match_info["group"], request.match_info["id"]
        row = await self._as_user(request, lambda conn, user: _job(conn, user, group, ident))
        return web.json_response(translate.details(row))

    async def stop(self, request: web.Request) -> web.Response:
        group, ident = request.match_info["group"], request.match_info["id"]

        def cancel(conn: DictConnection, user: str) -> bool:
            row = _job(conn, user, group, ident)
            before, _ = api.cancel([row.id], conn=conn)[row.id]
            return before is not None and not translate.is_final(before)

        stopped = await self._as_user(request, cancel)
        log.event("gateway_stopped", group=group, submission_id=ident, stopped=stopped)
        return web.json_response({"stopped": stopped})

    async def delete(self, request: web.Request) -> web.Response:
        group, ident = request.match_info["group"], request.match_info["id"]

        def forget(conn: DictConnection, user: str) -> rows.GatewayJob:
            row = _job(conn, user, group, ident)
            if not translate.is_final(row.state):
                raise BadInput(f"Job {ident} is not in a terminal state ({translate.status(row.state)}): stop it first")
            rows.forget(conn, row.id)
            return row

        row = await self._as_user(request, forget)
        if row.submission_id:
            cluster = await asyncio.to_thread(cluster_of, row.ray_address, self.ray_timeout_s)
            await asyncio.to_thread(cluster.delete, row.submission_id)
        return web.json_response({"deleted": True})

    async def logs(self, request: web.Request) -> web.Response:
        group, ident = request.match_info["group"], request.match_info["id"]
        row = await self._as_user(request, lambda conn, user: _job(conn, user, group, ident))
        text = ""
        if row.submission_id and row.state != "SUBMITTING":
            cluster = await asyncio.to_thread(cluster_of, row.ray_address, self.ray_timeout_s)
            try:
                text = await asyncio.to_thread(cluster.logs, row.submission_id)
            except NotFound:
                text = ""  # Ray forgot it, or has not got it yet: no output, as Ray says of a job without a driver
        return web.json_response({"logs": text})

    async def tail(self, request: web.Request) -> web.StreamResponse:
        """The job's output as a waiting `ray job submit` follows it: nothing while it waits in the
        queue, then each attempt's log from Ray, until the queue records its end. A client that
        leaves ends it at once, whether the job waits or runs."""
        group, ident = request.match_info["group"], request.match_info["id"]

        async def look() -> rows.GatewayJob:
            # The token looked up again at every look: one revoked meanwhile ends the tail.
            request.pop("user", None)
            return await self._as_user(request, lambda conn, user: _job(conn, user, group, ident))

        row = await look()  # 401 and 404 before the WebSocket opens, as Ray's
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        # The client sends nothing but its close: reading it is how its leaving is seen.
        gone = asyncio.ensure_future(_drain(ws))
        followed: set[str] = set()
        try:
            while True:
                ray_id = row.submission_id
                if (ray_id and ray_id not in followed and row.state != "SUBMITTING"
                        and await _unless(gone, self._follow(ws, row.ray_address, ray_id))):
                    # Ray ended this attempt's stream; the queue may requeue it, or record its end.
                    followed.add(ray_id)
                    row = await look()
                    continue
                if translate.is_final(row.state):
                    break
                await _unless(gone, asyncio.sleep(TAIL_POLL_S))
                row = await look()
        except (_ClientGone, ConnectionResetError):
            log.event("gateway_tail_ended", group=group, submission_id=ident, why="client left")
            return ws
        except (Unauthorized, JobError, psycopg.Error) as exc:
            log.warning("gateway_tail_ended", group=group, submission_id=ident, why=type(exc).__name__)
            await ws.close(code=WSCloseCode.INTERNAL_ERROR)
            return ws
        finally:
            gone.cancel()
        log.event("gateway_tail_ended", group=group, submission_id=ident, why=f"job {row.state}")
        await ws.close()
        return ws

    async def _follow(self, ws: web.WebSocketResponse, address: str, submission_id: str) -> bool:
        """Ray's log of the job's current attempt (its submission to Ray at `address`) sent on,
        until Ray ends it. False: Ray has no such job (yet)."""
        stream = self._stream(await self._dashboard(address))
        try:
            async for text in stream.tail(submission_id):
                await ws.send_str(text)
        except NotFound:
            return False
        return True

    async def package(self, request: web.Request) -> web.Response:
        group, protocol, name = request.match_info["group"], request.match_info["protocol"], request.match_info["name"]
        addresses = await self._as_user(request, lambda conn, user: rows.ray_addresses(conn, group))
        if addresses is None:
            raise NotFound(f"group {group!r} does not exist")
        if not translate.is_package(protocol, name):
            raise NotFound(f"{protocol}://{name} is not a package of Ray's")
        streams = [self._stream(await self._dashboard(address)) for address in addresses]
        if request.method == "GET":
            # Ray's client asks whether the package is there before it uploads it: it is there
            # only if every cluster has it.
            answers = [await stream.package("GET", protocol, name) for stream in streams]
            return _text(*next((answer for answer in answers if answer[0] != 200), answers[0]))
        async with _turn(self._packages, "another package is being forwarded"):
            data = await read_body(request, MAX_PACKAGE_BYTES)
            # Any cluster of the group may run the job: each gets the package.
            answers = [await stream.package("PUT", protocol, name, data) for stream in streams]
            status, text = next((answer for answer in answers if answer[0] != 200), answers[0])
            log.event("gateway_package", group=group, package=name, status=status, size=len(data), clusters=len(answers))
            del data  # before the next package's turn
        return _text(status, text)

    async def keep_packages(self, app: web.Application):
        """While the gateway runs, the packages of waiting jobs are pinned again in their Ray
        clusters every `keep_packages_s` (Ray lets an unused one go after 600 s)."""
        task = asyncio.ensure_future(self._keep_packages())
        yield
        task.cancel()

    async def _keep_packages(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.keep_packages_s)
            try:
                found = await loop.run_in_executor(self.db.executor, self.db.own, rows.waiting_packages)
                answers = [await self._pin(row["ray_address"], row["uri"]) for row in found]
            except (JobError, psycopg.Error) as exc:
                log.warning("gateway_packages_unpinned", cause=(str(exc).strip().splitlines() or [type(exc).__name__])[0])
                continue
            if found:
                log.event("gateway_packages_pinned", pinned=answers.count(200), missing=answers.count(404),
                          failed=len(answers) - answers.count(200) - answers.count(404))

    async def _pin(self, ray_address: str, uri: str) -> int:
        """Ray's GET of a package pins it for another 600 s; its status (404: Ray has it no more)."""
        protocol, _, name = uri.partition("://")
        try:
            status, _ = await self._stream(await self._dashboard(ray_address)).package("GET", protocol, name)
        except JobError:
            return 0
        return status

    async def close(self, app: web.Application) -> None:
        for stream in self._streams.values():
            await stream.close()


def make_app(db: Database, ray_timeout_s: float, keep_packages_s: float) -> web.Application:
    gateway = Gateway(db, ray_timeout_s, keep_packages_s)
    app = web.Application(middlewares=[_errors, gateway.authenticate])
    base = "/groups/{group}/api"
    routes: list[tuple[str, str, Any]] = [
        ("GET", "/healthz", gateway.healthz),
        ("GET", f"{base}/version", gateway.version),
        ("POST", f"{base}/jobs/", gateway.submit),
        ("GET", f"{base}/jobs/", gateway.listing),
        ("GET", f"{base}/jobs/{{id}}", gateway.show),
        ("POST", f"{base}/jobs/{{id}}/stop", gateway.stop),
        ("DELETE", f"{base}/jobs/{{id}}", gateway.delete),
        ("GET", f"{base}/jobs/{{id}}/logs", gateway.logs),
        ("GET", f"{base}/jobs/{{id}}/logs/tail", gateway.tail),
        ("GET", f"{base}/packages/{{protocol}}/{{name}}", gateway.package),
        ("PUT", f"{base}/packages/{{protocol}}/{{name}}", gateway.package),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    app.cleanup_ctx.append(gateway.keep_packages)
    app.on_cleanup.append(gateway.close)
    return app
