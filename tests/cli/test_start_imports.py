"""A command's start imports what the command needs: the modules that made every command pay a
second to start (issue 24) stay out of `--help` and of reading the queue. What they cost is
measured in bench/start.py; here, only which modules a real process loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Run the command as `python -m job` does, then list the loaded modules of interest.
CODE = """
import json, sys
from job.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'psycopg', 'ray', 'requests',
      'structlog') or m.startswith(('job.core.specs', 'job.core.planner', 'job.core.runtime_env', 'job.api')))))
"""


def loaded(*argv: str) -> set[str]:
    completed = subprocess.run([sys.executable, "-c", CODE, *argv], capture_output=True, text=True, timeout=60,
                               env={**os.environ}, check=True)
    return set(json.loads(completed.stdout.strip().splitlines()[-1]))


def test_help_imports_no_command_family():
    modules = loaded("--help")
    assert not {m.split(".")[0] for m in modules} & {"pydantic", "psycopg", "ray", "requests", "structlog"}, modules


@pytest.mark.usefixtures("database_url")
def test_jobs_on_an_empty_queue_imports_no_model_of_a_job_or_the_planner():
    modules = loaded("jobs")
    assert "psycopg" in modules  # it did read the queue
    assert not {m for m in modules if m.startswith(("job.core.specs", "job.core.planner", "job.core.runtime_env",
                                                    "job.api"))}, modules
