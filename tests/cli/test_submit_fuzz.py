"""Hostile and random input to `submit`, through the Python API and the CLI, on the real database:
every input is either stored exactly as given or refused with exit 2 and one line naming
the field, and then nothing is written. Never a traceback, never a half-written job."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job.api import submit
from job.core.errors import JobError

FIELDS = ("user", "group", "entrypoint", "resources", "node_labels", "runtime_env", "priority", "not_before",
          "max_runtime", "max_runtime_s", "metadata")
NASTY = ["", " ", "\x00", "a\x00b", "\ud800", "'; DROP TABLE jobs; --", "$(cat /etc/passwd)", "`id`", "%s%s%n",
         "\\", "\"", "{}", "null", "é" * 3, "🙂", "x" * 70_000, "CPU", "memory", "1e309", "NaN", "-1", "0", "-0",
         "9" * 4000, "9999-12-31T23:59:59-14:00", "2026-11-29T08:00:00\x00"]
any_text = st.one_of(st.sampled_from(NASTY), st.text(alphabet=st.characters(), max_size=40))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), any_text),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(any_text, inner, max_size=4)),
    max_leaves=12,
)
amounts = st.one_of(st.integers(min_value=-3, max_value=2**70), st.just(10**3999), st.floats(), any_text, st.none(),
                    st.booleans())
submissions = st.fixed_dictionaries(
    {"user": st.one_of(st.just("alice"), any_text), "group": st.one_of(st.just("gpu"), any_text),
     "entrypoint": st.one_of(st.just("python train.py"), any_text)},
    optional={
        "resources": st.one_of(st.dictionaries(st.one_of(st.sampled_from(["CPU", "GPU", "memory", "special"]), any_text),
                                               amounts, max_size=3), json_values),
        "node_labels": st.one_of(st.dictionaries(any_text, any_text, max_size=3), json_values),
        "runtime_env": st.one_of(st.fixed_dictionaries({}, optional={"pip": json_values, "env_vars": json_values,
                                                                     "working_dir": json_values}), json_values),
        "priority": st.one_of(st.integers(min_value=-2**40, max_value=2**40), any_text),
        "not_before": st.one_of(any_text, st.just("2026-11-29T08:00:00Z")),
        "max_runtime": st.one_of(any_text, st.floats(), st.just("2h"), st.just(10**3999)),
        "metadata": st.one_of(st.dictionaries(any_text, any_text, max_size=3), json_values),
    },
)
TRIED = {"api": 0, "cli": 0}


def count_jobs(conn) -> int:
    return conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"]


def stored(conn, job_id) -> dict:
    return conn.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()


@pytest.fixture
def group(conn):
    conn.execute("INSERT INTO resource_groups (name, clusters) VALUES ('gpu', '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:8265\"}]')")
    conn.execute("INSERT INTO users (name) VALUES ('alice')")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=submissions)
def test_the_api_stores_exactly_or_refuses_naming_the_field(conn, group, fields):
    TRIED["api"] += 1
    before = count_jobs(conn)
    try:
        job_id = submit(conn=conn, **fields)
    except JobError as exc:
        message = str(exc)
        assert exc.exit_status == 2, message
        assert "\n" not in message and message.split(".")[0].split(":")[0].split("[")[0] in FIELDS, message
        assert count_jobs(conn) == before
        return
    row = stored(conn, job_id)
    assert (row["user_name"], row["group_name"], row["entrypoint"]) == (fields["user"], fields["group"], fields["entrypoint"])
    for name in ("runtime_env", "metadata", "node_labels"):
        # None is "not given", as for every optional argument of submit.
        assert row[name] == (fields[name] if fields.get(name) is not None else {}), name
    assert row["state"] == "PENDING" and count_jobs(conn) == before + 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=submissions)
def test_the_cli_stores_exactly_or_exits_2_with_one_line(conn, group, capsys, fields):
    TRIED["cli"] += 1
    # --option=VALUE, as a shell user types a value that starts with '-'.
    argv = ["submit", f"--user={fields['user']}", f"--group={fields['group']}", f"--entrypoint={fields['entrypoint']}"]
    if "runtime_env" in fields:
        argv.append(f"--runtime-env={json.dumps(fields['runtime_env'])}")
    for name, value in (fields.get("metadata") or {}).items() if isinstance(fields.get("metadata"), dict) else ():
        argv.append(f"--metadata={name}={value}")
    if "priority" in fields:
        argv.append(f"--priority={fields['priority']}")
    before = count_jobs(conn)
    result = run_cli(capsys, *argv)
    if result.status == 0:
        row = stored(conn, int(result.out))
        assert row["entrypoint"] == fields["entrypoint"] and count_jobs(conn) == before + 1
    else:
        assert result.status == 2, result.err
        assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err
        assert "Traceback" not in result.err and count_jobs(conn) == before


def test_report_how_many_inputs_were_tried():
    # Runs after the two above (file order): says in the test log how many inputs they tried.
    print(f"submit fuzz: {TRIED['api']} inputs through the API, {TRIED['cli']} through the CLI")
