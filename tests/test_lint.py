"""ruff over the repository with pyproject.toml's rules ([tool.ruff]): part of the suite, so that a
name used but never defined, or an import shadowed by another, fails the run that brought it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_repository_is_clean():
    result = _ruff(".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rules_catch_an_undefined_name_and_a_shadowed_import(tmp_path):
    (tmp_path / "bad.py").write_text("import os\nimport os\n\n\ndef f():\n    return loaded\n")
    result = _ruff("--config", str(ROOT / "pyproject.toml"), "bad.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "F821" in result.stdout and "F811" in result.stdout, result.stdout
