"""What the gateway forwards to a group's Ray dashboard as it comes, with aiohttp: the WebSocket
that follows a job's log (`/api/jobs/ID/logs/tail`) and `--working-dir` packages
(`/api/packages/PROTOCOL/NAME`, content-addressed by Ray's client, kept in Ray's GCS).

Beside ray_cluster.py, which makes the tick's short requests with `requests`: these live as long as
a driver runs, or carry a package's bytes, inside the gateway's event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import aiohttp
from yarl import URL

from job.core.errors import NotFound, Unavailable
from job.core.redact import redact_url

_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10)


class RayStream:
    """One session to one dashboard (http://host:8265)."""

    def __init__(self, address: str):
        self.address = address.rstrip("/")
        self.shown_address = redact_url(self.address)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=_TIMEOUT)
        return self._session

    async def tail(self, submission_id: str) -> AsyncIterator[str]:
        """The job's log as Ray sends it, until Ray closes the stream (the job ended). NotFound
        when Ray has no such job."""
        url = f"{self.address}/api/jobs/{quote(submission_id, safe='')}/logs/tail"
        try:
            ws = await self._client().ws_connect(url)
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status == 404:
                raise NotFound(f"ray at {self.shown_address} has no job {submission_id}") from None
            raise Unavailable(f"ray at {self.shown_address} refused the log tail of {submission_id}: HTTP {exc.status}") from None
        except aiohttp.ClientError as exc:
            raise Unavailable(f"ray at {self.shown_address} unreachable: {type(exc).__name__}") from None
        async with ws:
            async for message in ws:
                if message.type == aiohttp.WSMsgType.TEXT:
                    yield message.data
                elif message.type == aiohttp.WSMsgType.ERROR:
                    raise Unavailable(f"ray at {self.shown_address}: log tail of {submission_id} broke off")

    async def package(self, method: str, protocol: str, name: str, data: bytes | bytearray | None = None) -> tuple[int, str]:
        """Ray's answer (status, text) to GET (exists?) or PUT (upload) of a package."""
        # Encoded already: yarl would otherwise resolve a `..` of a name as a path's step up.
        url = URL(f"{self.address}/api/packages/{quote(protocol, safe='')}/{quote(name, safe='')}", encoded=True)
        try:
            async with self._client().request(method, url, data=data) as response:
                return response.status, await response.text()
        except aiohttp.ClientError as exc:
            raise Unavailable(f"ray at {self.shown_address} unreachable: {type(exc).__name__}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
