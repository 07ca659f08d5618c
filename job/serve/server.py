"""`python -m job serve`: a small long-running, read-only HTTP server.

    /metrics   Prometheus' text format (serve/metrics.py)
    /healthz   200 "ok" when PostgreSQL answers, else 503 with the cause
    /          the status page (serve/page.py)

Every answer is made from one report read from PostgreSQL with a few aggregate statements, kept
`max_age_s` seconds: scrapes and page loads in between cost no statement. One connection, read
only (store/connection.py read_only), opened again after a failure. The standard library's
threading HTTP server is enough for a handful of scrapers and people: no framework to keep."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

from job import log
from job.core.errors import JobError
from job.serve import metrics, page
from job.serve.report import Report, read_report
from job.store.connection import CountingConnection, connect, read_only
from job.store.migrations import ensure_current

# Pending jobs per group shown on the status page.
QUEUE_SHOWN = 50


class Source:
    """The report, read at most once per `max_age_s` seconds, on one read-only connection."""

    def __init__(self, database_url: str, max_age_s: float):
        self.database_url, self.max_age_s = database_url, max_age_s
        self._lock = threading.Lock()
        self._conn: CountingConnection | None = None
        self._report: tuple[float, Report, datetime] | None = None
        # Statements the last read sent (bench/serve.py).
        self.statements = 0
        self.role: str | None = None

    def report(self) -> tuple[Report, datetime]:
        with self._lock:
            if self._report is not None and time.monotonic() - self._report[0] < self.max_age_s:
                return self._report[1], self._report[2]
            conn = self._connection()
            before = conn.statements
            try:
                report = read_report(conn, totals=True, queue=QUEUE_SHOWN)
                conn.rollback()
            except psycopg.Error:
                self._close()
                raise
            self.statements = conn.statements - before
            now = report.groups[0]["now"] if report.groups else datetime.now(UTC)
            self._report = (time.monotonic(), report, now)
            return report, now

    def ping(self) -> None:
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("SELECT 1")
                conn.rollback()
            except psycopg.Error:
                self._close()
                raise

    def _connection(self) -> CountingConnection:
        if self._conn is None or self._conn.closed:
            conn = connect(self.database_url, counting=True)
            try:
                ensure_current(conn)
                self.role = read_only(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            log.event("serve_connected", role=self.role)
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._lock:
            self._close()


def handler_for(source: Source) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "job-serve"

        def do_GET(self) -> None:  # the standard library's name
            path = self.path.split("?", 1)[0]
            try:
                if path == "/metrics":
                    report, _ = source.report()
                    self._send(200, metrics.CONTENT_TYPE, metrics.exposition(report))
                elif path == "/healthz":
                    source.ping()
                    self._send(200, "text/plain; charset=utf-8", b"ok\n")
                elif path == "/":
                    report, now = source.report()
                    self._send(200, "text/html; charset=utf-8", page.render(report, now).encode())
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found: /, /metrics and /healthz are served\n")
            except (JobError, psycopg.Error) as exc:
                cause = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                log.warning("serve_unavailable", path=path, cause=cause)
                self._send(503, "text/plain; charset=utf-8", f"unavailable: {cause}\n".encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # the standard library's names
            # One line per request would drown the log at a scrape every few seconds: errors only.
            pass

    return Handler


def make_server(source: Source, host: str, port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), handler_for(source))
    server.daemon_threads = True
    return server
