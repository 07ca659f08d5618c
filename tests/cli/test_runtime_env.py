"""What a job's runtime_env may hold: every accepted and refused shape, with its message."""

from __future__ import annotations

import pytest

from job.core.runtime_env import runtime_env_problem

ACCEPTED = [
    {},
    {"pip": ["numpy==2.1", "torch>=2"]},
    {"pip": {"packages": ["numpy"], "pip_check": False, "pip_version": "==24.0"}},
    {"uv": ["polars"]},
    {"uv": {"packages": ["polars"], "uv_check": True, "uv_version": "0.5", "uv_pip_install_options": ["--no-cache"]}},
    {"conda": "pytorch-env"},
    {"conda": {"dependencies": ["python=3.11", {"pip": ["numpy"]}]}},
    {"env_vars": {"OMP_NUM_THREADS": "4", "EMPTY": ""}},
    {"working_dir": "s3://bucket/code.zip"},
    {"working_dir": "https://example.com/code.zip"},
    {"py_modules": ["gs://bucket/m.zip", "s3://bucket/n.whl"]},
    {"image_uri": "docker.io/library/python:3.11"},
    {"config": {"setup_timeout_seconds": 600, "eager_install": False, "log_files": ["/tmp/x.log"]}},
    {"excludes": ["*.log", "data/"]},
]

REFUSED = [
    ("not an object", ["pip"], "must be a JSON object"),
    ("pip as a file", {"pip": "/proc/self/environ"},
     'pip: give a list of requirements, e.g. ["numpy==2.1"]; a string names a file, which is not read'),
    ("pip packages as a file", {"pip": {"packages": "requirements.txt"}},
     'pip.packages: give a list of requirements, e.g. ["numpy==2.1"]; a string names a file, which is not read'),
    ("pip with a number", {"pip": ["numpy", 3]}, "pip[1]: Input should be a valid string"),
    ("pip with an unknown field", {"pip": {"packages": [], "index": "x"}}, "pip.index: not a field of pip"),
    ("uv as a file", {"uv": "requirements.txt"},
     'uv: give a list of requirements, e.g. ["numpy==2.1"]; a string names a file, which is not read'),
    ("uv check not a bool", {"uv": {"packages": ["a"], "uv_check": "yes"}}, "uv.uv_check: Input should be a valid boolean"),
    ("conda as a YAML file", {"conda": "environment.yml"},
     "conda: 'environment.yml' names a file; give an environment name or an inline spec (a JSON object)"),
    ("conda as a path", {"conda": "/opt/envs/x"},
     "conda: '/opt/envs/x' names a file; give an environment name or an inline spec (a JSON object)"),
    ("env var not a string", {"env_vars": {"N": 1}}, "env_vars.N: Input should be a valid string"),
    ("local working_dir", {"working_dir": "."},
     "working_dir: '.' is not a remote URI (e.g. s3://bucket/code.zip); local paths are not sent"),
    ("local py_module", {"py_modules": ["s3://b/m.zip", "/home/me/mod"]},
     "py_modules[1]: '/home/me/mod' is not a remote URI (e.g. s3://bucket/code.zip); local paths are not sent"),
    ("py_modules not a list", {"py_modules": "s3://b/m.zip"}, "py_modules: Input should be a valid list"),
    ("empty image", {"image_uri": ""}, "image_uri: String should have at least 1 character"),
    ("config field unknown", {"config": {"retries": 3}}, "config.retries: not a field of config"),
    ("unknown key", {"java_jars": ["s3://b/x.jar"]},
     "java_jars: not a runtime_env key the scheduler accepts (known: conda, config, env_vars, excludes, image_uri, "
     "pip, py_modules, uv, working_dir; an operator may allow more per group)"),
]


@pytest.mark.parametrize("runtime_env", ACCEPTED, ids=[str(i) for i in range(len(ACCEPTED))])
def test_accepted(runtime_env):
    assert runtime_env_problem(runtime_env) is None


@pytest.mark.parametrize("name, runtime_env, message", REFUSED, ids=[case[0] for case in REFUSED])
def test_refused_with_its_path(name, runtime_env, message):
    assert runtime_env_problem(runtime_env) == message


def test_a_key_allowed_beyond_the_known_ones_is_taken_as_it_is():
    assert runtime_env_problem({"nsight": "default"}, allowed_keys=frozenset({"nsight"})) is None
    # Allowing a key does not loosen the known ones.
    assert runtime_env_problem({"pip": "x.txt"}, allowed_keys=frozenset({"pip"})) is not None


def test_a_group_may_allow_a_key_beyond_the_known_ones(database_url, conn, capsys):
    from cli_helpers import run_cli

    assert run_cli(capsys, "group", "add", "gpu", "--ray-address", "http://127.0.0.1:8265").status == 0
    assert run_cli(capsys, "user", "set", "alice").status == 0
    submit = ["submit", "--user", "alice", "--group", "gpu", "--entrypoint", "true", "--runtime-env", '{"nsight": "default"}']
    refused = run_cli(capsys, *submit)
    assert (refused.status, refused.err) == (2, "error: runtime_env: nsight: not a runtime_env key the scheduler accepts "
                                                "(known: conda, config, env_vars, excludes, image_uri, pip, py_modules, uv, "
                                                "working_dir; an operator may allow more per group)\n")
    assert conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0

    assert run_cli(capsys, "group", "set", "gpu", "--allow-runtime-env-key", "nsight").status == 0
    accepted = run_cli(capsys, *submit)
    assert accepted.status == 0, accepted.err
    assert conn.execute("SELECT runtime_env FROM jobs").fetchone()["runtime_env"] == {"nsight": "default"}
    # The known keys are still checked, allowance or not.
    assert run_cli(capsys, "group", "set", "gpu", "--allow-runtime-env-key", "pip").err == (
        "error: allowed_runtime_env_keys: 'pip' is a runtime_env key the scheduler knows and checks already\n")
    assert run_cli(capsys, *submit[:-1], '{"nsight": "default", "pip": "x.txt"}').status == 2
