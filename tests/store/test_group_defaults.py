"""A group's defaults, one set everywhere (job/core/group_defaults.py): what a plain `group add`
stores, what the columns of `resource_groups` default to, what the planner takes for a field a
snapshot leaves out, and what docs/planner.md says."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_helpers import run_cli

from job.core.planner.snapshot import Group
from job.core.specs import GroupSpec

DOCS = Path(__file__).resolve().parents[2] / "docs/planner.md"
REQUIRED = {"name": "g", "clusters": ["http://127.0.0.1:8265"]}


def _spec_defaults() -> dict:
    return GroupSpec(**REQUIRED).model_dump(exclude=set(REQUIRED))


def _column_defaults(conn) -> dict:
    """Each column's default as PostgreSQL evaluates it; None for a column without one."""
    columns = conn.execute("SELECT column_name, column_default FROM information_schema.columns "
                           "WHERE table_name = 'resource_groups'").fetchall()
    return {c["column_name"]: c["column_default"] and conn.execute(f"SELECT {c['column_default']} AS value").fetchone()["value"]
            for c in columns}


def _documented_group() -> dict:
    """The snapshot's `group` in docs/planner.md, whose fields other than policy and selector it gives as
    the defaults."""
    example = re.search(r"## Snapshot\n\n```json\n(.*?)\n```", DOCS.read_text(), re.S)
    return json.loads(example.group(1))["group"]


def test_a_plain_group_add_stores_what_the_docs_say(database_url, capsys):
    assert run_cli(capsys, "group", "add", "g", "--ray-address", REQUIRED["clusters"][0]).status == 0
    stored = json.loads(run_cli(capsys, "group", "show", "g", "--json").out)
    assert stored["resource_priority"] == ["GPU", "CPU", "memory"]
    assert "default `GPU,CPU,memory`" in DOCS.read_text()
    assert {name: stored[name] for name in _spec_defaults()} == _spec_defaults()


def test_the_columns_default_to_the_groups_defaults(conn):
    columns = _column_defaults(conn)
    assert {name: columns[name] for name in _spec_defaults()} == _spec_defaults()


def test_the_planner_and_the_docs_take_the_groups_defaults():
    spec = _spec_defaults()
    planner = Group(policy="drf", selector="dispersed").model_dump(exclude={"name", "policy", "selector"})
    assert planner == {name: spec[name] for name in planner}
    documented = {name: value for name, value in _documented_group().items() if name not in ("policy", "selector")}
    assert documented == {"name": "default", **{name: spec[name] for name in documented if name != "name"}}
