"""PostgreSQL for the tests: JOB_TEST_DATABASE_URL's server when set, else an embedded server
started once per run. Each test gets its own database, copied from a migrated template."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import psycopg
import pytest

from job.devtools.local_postgres import start_embedded, with_database
from job.store.migrations import migrate

_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server_url():
    url = os.environ.get("JOB_TEST_DATABASE_URL")
    if url:
        yield url
        return
    directory = Path(tempfile.mkdtemp(prefix="jobpg")) / "data"
    url, server = start_embedded(directory)
    yield url
    server.cleanup()


def _admin(server_url: str) -> psycopg.Connection:
    return psycopg.connect(server_url, autocommit=True)


@pytest.fixture(scope="session")
def pg_template(pg_server_url):
    name = f"jobtest_{os.getpid()}_template"
    with _admin(pg_server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(with_database(pg_server_url, name), autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        migrate(conn)
    yield name
    with _admin(pg_server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(pg_server_url, pg_template, monkeypatch):
    """A fresh migrated database for this test, also set as JOB_DATABASE_URL."""
    name = f"jobtest_{os.getpid()}_{next(_counter)}"
    with _admin(pg_server_url) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    url = with_database(pg_server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        # Copies of one template share its installation id; Ray would see their submission ids collide.
        conn.execute("UPDATE installation SET id = substr(md5(random()::text || %s), 1, 8)", (name,))
    monkeypatch.setenv("JOB_DATABASE_URL", url)
    from job.settings import settings

    settings.cache_clear()
    yield url
    settings.cache_clear()
    with _admin(pg_server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def conn(database_url):
    with psycopg.connect(database_url, row_factory=psycopg.rows.dict_row, autocommit=True) as connection:
        yield connection
