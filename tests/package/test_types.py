"""mypy over job/ with pyproject.toml's settings ([tool.mypy]): part of the suite, so that a row
read as the wrong shape, a field misspelt or a None passed where a value is due fails the run that
brought it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    # --no-incremental: no cache written into the tree; the answer is the code's, not a cache's.
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False)


def test_the_package_type_checks():
    result = _mypy()
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_checker_catches_a_row_read_as_the_wrong_type(tmp_path):
    """The store's rows are dicts (job.store.DictConnection): indexing one as a tuple, or passing
    its value where an int is due, is an error the settings report."""
    (tmp_path / "bad.py").write_text(
        "from job.store import DictConnection\n\n\n"
        "def first(conn: DictConnection) -> int:\n"
        "    row = conn.execute('SELECT 1 AS one').fetchone()\n"
        "    assert row is not None\n"
        "    return row[0] + len(row['one'])\n\n\n"
        "def count(name: str) -> int:\n"
        "    return name\n")
    result = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(tmp_path / "bad.py"), cwd=ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'bad.py:7: error' in result.stdout and 'bad.py:11: error: Incompatible return value' in result.stdout, result.stdout
