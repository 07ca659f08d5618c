"""ruff over the repository with pyproject.toml's rules ([tool.ruff]): part of the suite, so that a
name used but never defined, or an import shadowed by another, fails the run that brought it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


_CITED = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md)\b")


def _citations(root: Path) -> dict[str, set[str]]:
    """Every Markdown file the code and docs name, with where: README.md, docs/planner.md, or,
    inside docs/, a file of docs/ or of the citing page's folder by its own name."""
    found: dict[str, set[str]] = {}
    for folder in ("job", "docs", "tests", "bench", "k8s", "sql"):
        for path in (root / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".sql", ".yaml", ".json") and "__pycache__" not in path.parts:
                for name in _CITED.findall(path.read_text(errors="replace")):
                    found.setdefault(name, set()).add(str(path.relative_to(root)))
    for name in _CITED.findall((root / "README.md").read_text()):
        found.setdefault(name, set()).add("README.md")
    return found


def _missing(root: Path) -> list[str]:
    def found_from(name: str, w: str) -> bool:
        """From the root, from the citing file's own folder, or, inside docs/, from docs/."""
        return any((folder / name).is_file() for folder in
                   (root, (root / w).parent, *((root / "docs",) if w.startswith("docs/") else ())))

    def exists(name: str, where: set[str]) -> bool:
        return all(found_from(name, w) for w in where)
    return sorted(f"{name} (cited in {', '.join(sorted(where))})" for name, where in _citations(root).items()
                  if not exists(name, where) and name != "docs/a/b.md")


def test_the_code_and_docs_cite_only_files_of_the_repository():
    assert _missing(ROOT) == []


def test_a_citation_of_a_file_not_in_the_repository_is_found(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "README.md").write_text("see docs/planner.md\n")
    absent = "DESIGN" + ".md"  # spelled apart, or this file would cite it
    (tmp_path / "job" / "a.py").write_text(f'"""As {absent} says."""\n')
    assert _missing(tmp_path) == [f"{absent} (cited in job/a.py)", "docs/planner.md (cited in README.md)"]


MAX_FUNCTION_LINES = 60


def _long_functions(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_of_the_package_is_over_60_lines():
    """A function that long does several things; the package's are split into named steps."""
    assert _long_functions(ROOT / "job") == []


def test_a_long_function_is_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "pkg" / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    assert _long_functions(tmp_path / "pkg") == [f"pkg/m.py:5 long ({MAX_FUNCTION_LINES + 1} lines)"]


def _imported_test_modules(tests: Path) -> list[str]:
    """Each import, in a module of `tests`, of one of its test modules (`test_*.py`): pytest would
    collect the imported one twice over, and its tests then depend on one another. Shared helpers
    live in `*_helpers.py` or a conftest."""
    test_modules = {path.stem for path in tests.rglob("test_*.py")}
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module or ''}.{alias.name}" for alias in node.names]
            else:
                continue
            if any(part in test_modules for name in names for part in name.split(".")):
                found.append(f"{path.relative_to(tests.parent)}:{node.lineno}")
    return found


def test_no_test_module_imports_another():
    assert _imported_test_modules(ROOT / "tests") == []


@pytest.mark.parametrize("line", ["import test_a", "from test_a import helper", "from tests.core.test_a import helper",
                                  "from tests.core import test_a", "from . import test_a"])
def test_an_import_of_a_test_module_is_found(tmp_path, line):
    (tmp_path / "tests" / "core").mkdir(parents=True)
    (tmp_path / "tests" / "core" / "test_a.py").write_text("def helper():\n    pass\n")
    (tmp_path / "tests" / "core" / "a_helpers.py").write_text("def other():\n    pass\n")
    (tmp_path / "tests" / "core" / "test_b.py").write_text(f"from a_helpers import other\n{line}\n")
    assert _imported_test_modules(tmp_path / "tests") == ["tests/core/test_b.py:2"]
