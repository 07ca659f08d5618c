"""The rules' registry (job/core/planner/rules.py) against the schema: the CHECK on each rule's
column, as the migrations leave it, allows exactly the names the registry declares."""

import re
from pathlib import Path

import pytest

from job.core.planner.rules import POLICIES, PREEMPTIONS, SELECTORS

SQL = Path(__file__).resolve().parents[2] / "sql"


def allowed(column: str) -> tuple[str, ...]:
    """The names in the last `CHECK (column IN (...))` of the migrations, in the order applied."""
    check = re.compile(rf"CHECK\s*\(\s*{column}\s+IN\s*\(([^)]*)\)\s*\)", re.IGNORECASE)
    found = None
    for path in sorted(SQL.glob("*.sql")):
        for match in check.finditer(path.read_text()):
            found = tuple(re.findall(r"'([^']*)'", match.group(1)))
    assert found is not None, f"no CHECK on {column} in {SQL}"
    return found


@pytest.mark.parametrize(("column", "registry"), [("policy", POLICIES), ("selector", SELECTORS),
                                                  ("preemption", PREEMPTIONS)])
def test_the_schema_allows_exactly_the_registered_rules(column, registry):
    assert sorted(allowed(column)) == sorted(registry)


def test_the_registry_is_what_the_snapshot_and_the_group_spec_accept():
    from typing import get_args

    from job.core.planner.snapshot import Group
    from job.core.specs import GroupSpec

    for model in (Group, GroupSpec):
        assert get_args(model.model_fields["policy"].annotation) == tuple(POLICIES)
        assert get_args(model.model_fields["selector"].annotation) == tuple(SELECTORS)
        assert get_args(model.model_fields["preemption"].annotation) == tuple(PREEMPTIONS)
