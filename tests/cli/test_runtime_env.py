"""What a job's runtime_env may hold: every accepted and refused shape, with its message."""

from __future__ import annotations

import json

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
    # Ordinary variables of a job's processes, which Ray does not read for control (RAY_CONTROL).
    {"env_vars": {"PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "0", "LD_PRELOAD": "libjemalloc.so",
                  "PYTHONPATH": "/opt/lib", "RAYON_NUM_THREADS": "2", "MY_RAY_": "x", "_": "x"}},
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
    ("stop wait of Ray's supervisor", {"env_vars": {"A": "1", "RAY_JOB_STOP_WAIT_TIME_S": "600"}},
     "env_vars.RAY_JOB_STOP_WAIT_TIME_S: Ray reads it to run and stop the job, so a job may not set it "
     "(an operator may allow it per group)"),
    ("stop signal in lower case", {"env_vars": {"ray_job_stop_signal": "SIGINT"}},
     "env_vars.ray_job_stop_signal: Ray reads it to run and stop the job, so a job may not set it "
     "(an operator may allow it per group)"),
    ("a core worker setting", {"env_vars": {"RAY_worker_niceness": "19"}},
     "env_vars.RAY_worker_niceness: Ray reads it to run and stop the job, so a job may not set it "
     "(an operator may allow it per group)"),
    ("bash's start-up file", {"env_vars": {"BASH_ENV": "/tmp/x.sh"}},
     "env_vars.BASH_ENV: Ray reads it to run and stop the job, so a job may not set it (an operator may allow it per group)"),
    ("a bash function", {"env_vars": {"BASH_FUNC_exec%%": "() { sleep 600; }"}},
     "env_vars: 'BASH_FUNC_exec%%' is not a variable name (letters, digits and '_', not first a digit)"),
    ("a name with a newline", {"env_vars": {"RAY_\nX": "1"}},
     "env_vars: 'RAY_\\nX' is not a variable name (letters, digits and '_', not first a digit)"),
    ("a name starting with a digit", {"env_vars": {"1X": "1"}},
     "env_vars: '1X' is not a variable name (letters, digits and '_', not first a digit)"),
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


def test_a_variable_allowed_by_name_is_taken_and_no_other():
    allowed = frozenset({"RAY_JOB_STOP_WAIT_TIME_S"})
    assert runtime_env_problem({"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "30"}}, allowed_env_vars=allowed) is None
    assert runtime_env_problem({"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "30", "RAY_JOB_STOP_SIGNAL": "SIGINT"}},
                               allowed_env_vars=allowed).startswith("env_vars.RAY_JOB_STOP_SIGNAL: ")
    # By its exact name: Ray reads RAY_JOB_STOP_WAIT_TIME_S, and another spelling is not allowed by it.
    assert runtime_env_problem({"env_vars": {"ray_job_stop_wait_time_s": "30"}}, allowed_env_vars=allowed) is not None


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


def test_a_variable_ray_reads_is_refused_at_submit_unless_the_group_allows_it(database_url, conn, capsys):
    from cli_helpers import database_contents, run_cli

    from job import api
    from job.core.errors import BadInput

    assert run_cli(capsys, "group", "add", "gpu", "--ray-address", "http://127.0.0.1:8265").status == 0
    assert run_cli(capsys, "user", "set", "alice").status == 0
    unstoppable = {"env_vars": {"OMP_NUM_THREADS": "2", "RAY_JOB_STOP_WAIT_TIME_S": "600"}}
    submit = ["submit", "--user", "alice", "--group", "gpu", "--entrypoint", "true", "--runtime-env", json.dumps(unstoppable)]
    before = database_contents(conn)
    refusal = ("runtime_env: env_vars.RAY_JOB_STOP_WAIT_TIME_S: Ray reads it to run and stop the job, so a job may not "
               "set it (an operator may allow it per group)")
    refused = run_cli(capsys, *submit)
    assert (refused.status, refused.err) == (2, f"error: {refusal}\n")
    with pytest.raises(BadInput) as raised:
        api.submit(user="alice", group="gpu", entrypoint="true", runtime_env=unstoppable)
    assert str(raised.value) == refusal
    assert database_contents(conn) == before

    # Names only, each a variable Ray reads for control; `''` clears the list.
    for name, problem in [("OMP_NUM_THREADS", "'OMP_NUM_THREADS': jobs may set it already; only names Ray reads for "
                                              "control need allowing"),
                          ("BASH_FUNC_exec%%", "'BASH_FUNC_exec%%' is not a variable name (letters, digits and '_', "
                                               "not first a digit)")]:
        answer = run_cli(capsys, "group", "set", "gpu", "--allow-env-var", name)
        assert (answer.status, answer.err) == (2, f"error: allowed_env_vars: {problem}\n")
    assert database_contents(conn) == before
    assert run_cli(capsys, "group", "set", "gpu", "--allow-env-var", "RAY_JOB_STOP_WAIT_TIME_S").status == 0
    assert "allowed_env_vars:" in (shown := run_cli(capsys, "group", "show", "gpu").out) and "RAY_JOB_STOP_WAIT_TIME_S" in shown
    accepted = run_cli(capsys, *submit)
    assert accepted.status == 0, accepted.err
    assert api.submit(user="alice", group="gpu", entrypoint="true", runtime_env=unstoppable, conn=conn) > 0
    # The allowance is of that name alone.
    assert run_cli(capsys, *submit[:-1], '{"env_vars": {"RAY_JOB_STOP_SIGNAL": "SIGINT"}}').status == 2

    assert run_cli(capsys, "group", "set", "gpu", "--allow-env-var", "").status == 0
    assert json.loads(run_cli(capsys, "group", "show", "gpu", "--json").out)["allowed_env_vars"] == []
    assert run_cli(capsys, *submit).status == 2
