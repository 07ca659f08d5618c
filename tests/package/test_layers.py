"""The layers of job/ as import contracts (.importlinter), checked by import-linter: they hold on
this tree, and they break when a lower layer imports a higher one or two modules import each
other."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    # The tree's own copy of `job` comes first on the path, before the installed one.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(["lint-imports", "--config", str(tree / ".importlinter"), "--no-cache"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the package and its contracts, to break."""
    shutil.copytree(ROOT / "job", tmp_path / "job", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


# (module of the copy, the import added to it, what import-linter must report)
BREACHES = [
    ("core/units.py", "import job.cli", "job.core is not allowed to import job.cli"),
    ("core/specs.py", "import job.store.jobs", "job.core is not allowed to import job.store"),
    ("store/jobs.py", "import job.scheduler.tick", "job.store is not allowed to import job.scheduler"),
    ("store/groups.py", "import job.adapters.ray_cluster", "job.store is not allowed to import job.adapters"),
    ("scheduler/tick.py", "import job.settings", "job.scheduler is not allowed to import job.settings"),
    ("core/planner/planner.py", "import psycopg", "job.core is not allowed to import psycopg"),
    ("scheduler/submit.py", "import ray", "job.scheduler is not allowed to import ray"),
    ("api.py", "import job.devtools.demo", "job.api is not allowed to import job.devtools"),
    ("cli/output.py", "import job.cli.jobs", "No import cycle"),
]


@pytest.mark.parametrize("module, line, report", BREACHES, ids=[b[0] + ": " + b[1] for b in BREACHES])
def test_a_breach_breaks_a_contract(tree, module, line, report):
    path = tree / "job" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402,F401\n")
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout
    assert report in result.stdout.split("Broken contracts")[-1], result.stdout
