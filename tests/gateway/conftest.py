"""The gateway as its users meet it: a real `python -m job gateway` process, logged in to the test
database as a login of job_gateway (not the owner: the token's user's role must be what confines
it), and Ray's own CLI and JobSubmissionClient, unmodified, pointed at it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import requests
from psycopg import sql

from job.store import tokens

GATEWAY_LOGIN = "jobgw_gateway"
ALICE, BOB = "jobgw_alice", "jobgw_bob"
RAY = str(Path(sys.executable).parent / "ray")
GROUP = "gpu"


def as_role(url: str, role: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Ran:
    status: int
    out: str
    err: str


@dataclass
class Gateway:
    url: str
    process: subprocess.Popen
    log_path: Path

    def address(self, group: str = GROUP) -> str:
        return f"{self.url}/groups/{group}"

    def log(self) -> str:
        return self.log_path.read_text()


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def ray_cli(gateway: Gateway, token: str | None, *argv: str, group: str = GROUP, timeout: float = 120,
            cwd: Path | None = None) -> Ran:
    """`ray job ARGV --address ... --headers ...`, Ray's own CLI as a real process."""
    command, *rest = argv
    extra = ["--headers", json.dumps(headers(token))] if token else []
    completed = subprocess.run([RAY, "job", command, "--address", gateway.address(group), *extra, *rest],
                               capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return Ran(completed.returncode, completed.stdout, completed.stderr)


@pytest.fixture(scope="session")
def gateway_login(pg_server_url, pg_template):
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(sql.SQL(
            """DO $$ BEGIN CREATE ROLE {login} LOGIN IN ROLE job_gateway;
               EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$""").format(
            login=sql.Identifier(GATEWAY_LOGIN)))
    return GATEWAY_LOGIN


@pytest.fixture
def users(conn):
    """alice and bob, each with a token (the owner's connection makes them, as `token create` does)."""
    for name in (ALICE, BOB):
        conn.execute("INSERT INTO users (name) VALUES (%s)", (name,))
    return {name: tokens.create_token(conn, name, None)[1] for name in (ALICE, BOB)}


@pytest.fixture
def launch(database_url, conn, gateway_login, tmp_path):
    """`launch(*options)`: a gateway process with these options, ready; stopped at the end."""
    dbname = urlsplit(database_url).path.lstrip("/")
    conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(dbname), sql.Identifier(gateway_login)))
    started = []

    def start(*options: str) -> Gateway:
        port = free_port()
        log_path = tmp_path / f"gateway-{port}.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "job", "gateway", "--host", "127.0.0.1", "--port", str(port), *options],
                stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "JOB_DATABASE_URL": as_role(database_url, gateway_login)})
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                    return Gateway(url, process, log_path)
            except requests.ConnectionError:
                pass
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)

    yield start
    for process in started:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def gateway(launch):
    return launch()
