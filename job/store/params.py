"""How Python values go into statements."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

_JSON_COLUMNS = {"node_labels", "node_types", "max_resources_per_user", "max_resources", "runtime_env", "metadata",
                 "resources", "priority_classes", "bundles", "after", "clusters"}


def json_param(column: str, value: Any) -> Any:
    """The value of a column as a parameter: the jsonb columns' values wrapped as JSON."""
    return Jsonb(value) if column in _JSON_COLUMNS and value is not None else value
