"""How commands print data: aligned tables for people, JSON for programs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, overload

from job.core.resources import format_amount, to_units


@overload
def iso(moment: datetime) -> str: ...


@overload
def iso(moment: datetime | None) -> str | None: ...


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False, default=lambda o: iso(o) if isinstance(o, datetime) else str(o)))


def print_table(rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max([len(column)] + [len(line[i]) for line in cells]) for i, column in enumerate(columns)]
    print("  ".join(column.upper().ljust(width) for column, width in zip(columns, widths, strict=True)).rstrip())
    for line in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


def print_fields(fields: dict[str, Any]) -> None:
    width = max(len(key) for key in fields)
    for key, value in fields.items():
        print(f"{key + ':':<{width + 1}} {_cell(value)}")


# What a tenant's text may hold (an entrypoint, metadata, Ray's message of its driver) and a
# terminal obeys: control characters, and the marks that reorder a line. Shown escaped, so that a
# listing cannot move the cursor, clear or recolour the screen of whoever reads it, or break a row.
_ESCAPED = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)]} | {
    ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t",
    **{code: f"\\u{code:04x}" for code in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}}


# A driver's log keeps its line breaks, tabs, carriage returns (progress bars) and colours (SGR:
# ESC [ numbers m); shown on a terminal, any other escape is shown escaped: another user's job could
# otherwise move the cursor, retitle the window or set the clipboard (OSC 52) of whoever reads it.
_LOG_ESCAPED = {code: shown for code, shown in _ESCAPED.items() if chr(code) not in "\n\t\r"}
_SGR = re.compile(r"(\x1b\[[0-9;]*m)")


def terminal_log(text: str) -> str:
    """A log's text as a terminal may be given it: its colours kept, other control characters escaped."""
    return "".join(part if index % 2 else part.translate(_LOG_ESCAPED) for index, part in enumerate(_SGR.split(text)))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        text = ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    elif isinstance(value, list):
        text = ",".join(str(v) for v in value) or "-"
    else:
        text = str(value)
    return text.translate(_ESCAPED)


def format_resources(resources: dict[str, float] | None) -> str:
    if not resources:
        return "-"
    return ",".join(f"{name}={format_amount(name, to_units(amount))}" for name, amount in resources.items())


def format_footprint(resources: dict[str, float], bundles: list[dict[str, float]] | None, strategy: str | None) -> str:
    """A job's driver request and its bundles, equal ones in a row counted as `--bundle` takes them:
    `CPU=1 + 2x{CPU=2} STRICT_SPREAD`."""
    if not bundles:
        return format_resources(resources)
    runs: list[list] = []
    for bundle in bundles:
        if runs and runs[-1][0] == bundle:
            runs[-1][1] += 1
        else:
            runs.append([bundle, 1])
    said = " + ".join(f"{count}x{{{format_resources(bundle)}}}" for bundle, count in runs)
    return f"{format_resources(resources)} + {said} {strategy}"
