"""Running the real CLI from tests: in this process (fast) or as `python -m job` (a real process)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from job.cli import main
from job.settings import settings


@dataclass
class Result:
    status: int
    out: str
    err: str


def run_cli(capsys, *argv: str) -> Result:
    settings.cache_clear()
    status = main(list(argv))
    captured = capsys.readouterr()
    return Result(status, captured.out, captured.err)


def run_process(*argv: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    completed = subprocess.run(
        [sys.executable, "-m", "job", *argv],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )
    return Result(completed.returncode, completed.stdout, completed.stderr)


def database_contents(conn) -> list:
    """Every row of the tables a command may write, to show that a refused one wrote nothing."""
    return [conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("resource_groups", "users", "jobs", "group_state", "user_usage",
                                                                   "schedules", "schedule_slots")]
