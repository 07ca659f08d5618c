"""A command's start imports what the command needs: the modules that made every command pay a
second to start (issue 24) stay out of `--help` and of reading the queue. What they cost is
measured in bench/start.py; here, only which modules a real process loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# The models of a submit or a group (pydantic's) and the planner: none of
# them is for printing rows as they are stored.
NOT_FOR_A_LISTING = ("job.core.specs", "job.core.planner", "job.core.runtime_env", "job.api")
LIBRARIES = ("pydantic", "psycopg", "ray", "requests", "structlog")

# Run the command as `python -m job` does (or import the modules given), then list the loaded
# modules of interest.
CODE = f"""
import importlib, json, sys
if sys.argv[1] == "import":
    for module in sys.argv[2:]:
        importlib.import_module(module)
else:
    from job.cli import main
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {LIBRARIES!r} or m.startswith({NOT_FOR_A_LISTING!r}))))
"""


def loaded(*argv: str) -> set[str]:
    completed = subprocess.run([sys.executable, "-c", CODE, *argv], capture_output=True, text=True, timeout=60,
                               env={**os.environ}, check=True)
    return set(json.loads(completed.stdout.strip().splitlines()[-1]))


def test_help_imports_no_command_family():
    modules = loaded("--help")
    assert not {m.split(".")[0] for m in modules} & set(LIBRARIES), modules


def test_the_jobs_family_imports_no_pydantic():
    # The family's own modules, the checks of a stored row included (core/job_row.py), build none
    # of pydantic's models until a row is read.
    modules = loaded("import", "job.cli.jobs")
    assert "psycopg" in modules  # it did import the family's store
    assert not {m for m in modules if m.split(".")[0] == "pydantic" or m.startswith(NOT_FOR_A_LISTING)}, modules


@pytest.mark.parametrize("argv", [("jobs",), ("user", "list"), ("account", "list")])
def test_a_listing_imports_no_model_of_a_job_or_the_planner(argv, conn):
    # A user and an account to list; the queue stays empty (a job row is checked by pydantic's shapes).
    conn.execute("INSERT INTO accounts (name) VALUES ('team')")
    conn.execute("INSERT INTO users (name, account) VALUES ('ann', 'team')")
    modules = loaded(*argv)
    assert "psycopg" in modules  # it did read the database
    # Nor pydantic: the settings are read without it (job/settings.py), and no row was checked.
    assert not {m for m in modules if m.split(".")[0] == "pydantic" or m.startswith(NOT_FOR_A_LISTING)}, modules
