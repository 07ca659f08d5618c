"""Parsing of the quantities people type: durations, memory sizes, times, resource amounts."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

# Ray keeps resource amounts in fixed point with four decimals; finer requests cannot be honoured.
RAY_RESOLUTION = 10_000

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGTP]i?B?|B)?", re.IGNORECASE)
_MEMORY_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "ki": 2**10, "kib": 2**10,
    "m": 10**6, "mb": 10**6, "mi": 2**20, "mib": 2**20,
    "g": 10**9, "gb": 10**9, "gi": 2**30, "gib": 2**30,
    "t": 10**12, "tb": 10**12, "ti": 2**40, "tib": 2**40,
    "p": 10**15, "pb": 10**15, "pi": 2**50, "pib": 2**50,
}


def parse_duration(text: str | float | int) -> float:
    """Seconds from '90', '90s', '5m', '1h30m', '2d' or a number of seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        text = str(text).strip().lower()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            seconds = float(text)
        else:
            parts = _DURATION_PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 5m, 1h30m, 2d)")
            seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"a duration must be finite and not negative, got {text!r}")
    return seconds


def parse_memory(text: str | float | int) -> int:
    """Bytes from '512MiB', '4GiB', '2G', '1.5Gi' or a number of bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        amount = float(text)
    else:
        match = _MEMORY.fullmatch(str(text).strip())
        if not match:
            raise ValueError(f"not a memory size: {text!r} (use e.g. 512MiB, 4GiB or a number of bytes)")
        amount = float(match.group(1)) * _MEMORY_UNITS[(match.group(2) or "").lower()]
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"memory must be finite and not negative, got {text!r}")
    if amount != int(amount):
        raise ValueError(f"memory must be a whole number of bytes, got {text!r}")
    return int(amount)


def parse_amount(text: str | float | int) -> float:
    """A resource amount: finite, not negative, no finer than Ray's 1/10000."""
    try:
        amount = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"not a number: {text!r}") from None
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"must be finite and not negative, got {text!r}")
    scaled = amount * RAY_RESOLUTION
    if abs(scaled - round(scaled)) > 1e-6:
        raise ValueError(f"Ray counts resources in steps of 0.0001; {text!r} is finer")
    return round(scaled) / RAY_RESOLUTION


def parse_time(text: str | datetime) -> datetime:
    """An aware UTC time from ISO 8601 ('2026-11-29T08:00:00Z', '2026-11-29 08:00'); naive means UTC."""
    if isinstance(text, datetime):
        moment = text
    else:
        try:
            moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not a time: {text!r} (use ISO 8601, e.g. 2026-11-29T08:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def format_memory(amount: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if amount >= size:
            return f"{amount / size:.4g}{unit}"
    return f"{amount:.0f}B"


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{int(count)}{unit}")
    return "".join(parts)
