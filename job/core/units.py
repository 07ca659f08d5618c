"""Parsing of the quantities people type: durations, memory sizes, times, resource amounts; and
durations and times written back for people."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from job.core.errors import quoted
from job.core.resources import UNIT

# A bound no run reaches, so that times still hold when one is added to now (a datetime ends at
# year 9999): every duration is at most this.
MAX_DURATION_S = 100 * 365 * 86400.0
# Times are before this: a later start is no plan, and the times a forecast adds run times to
# still hold.
LATEST_TIME = datetime(3000, 1, 1, tzinfo=UTC)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# A number and a unit, whole: the units are pydantic ByteSize's (B, K/KB, KiB, ... P/PB, PiB) plus
# Kubernetes' Ki, Mi, Gi, Ti, Pi. ByteSize itself is not used: its validator reads a valid prefix
# and ignores the rest ('5.GiB' is 5 bytes, '4 G B' is 4 GB to it) and truncates a float product
# ('2.01KB' is 2009 bytes to it, '1.5B' is 1), and importing pydantic would cost every command's
# start a tenth of a second.
_BYTES = {"b": 1} | {
    unit: base**power
    for power, prefix in enumerate("kmgtp", start=1)
    for unit, base in ((prefix, 1000), (prefix + "b", 1000), (prefix + "ib", 1024))
}
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGTP]i?B?|B)?", re.IGNORECASE)


def parse_duration(text: str | float | int) -> float:
    """Seconds from '90', '90s', '5m', '1h30m', '2d' or a number of seconds, at most MAX_DURATION_S."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = _float(text)
    else:
        text = str(text).strip().lower()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            seconds = float(text)
        else:
            parts = _DURATION_PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ValueError(f"not a duration: {quoted(text)} (use e.g. 90s, 5m, 1h30m, 2d)")
            seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if _negative_or_nan(seconds):
        raise ValueError(f"a duration must be a number and not negative, got {quoted(text)}")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"a duration must be at most 100 years ({MAX_DURATION_S:.0f} s), got {quoted(text)}")
    return seconds


def _float(number: str | float) -> float:
    """`float(number)`, but an integer too large for a float is infinite (then refused as too large)."""
    try:
        return float(number)
    except OverflowError:
        return math.inf


def _negative_or_nan(number: float) -> bool:
    """Below zero, negative zero (a sign no amount or duration has) or not a number."""
    return math.isnan(number) or math.copysign(1.0, number) < 0


def parse_memory(text: str | float | int) -> int:
    """Bytes from '512MiB', '4GiB', '4 GiB', '2G', '1.5Gi' (Kubernetes' suffixes) or a number of bytes."""
    number: str | float
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        number, unit = text, "b"
    else:
        match = _MEMORY.fullmatch(str(text).strip())
        if not match:
            raise ValueError(f"not a memory size: {quoted(text)} (use e.g. 512MiB, 4GiB or a number of bytes)")
        number, unit = match.group(1), (match.group(2) or "b").lower()
        if unit.endswith("i"):
            unit += "b"  # Kubernetes' Ki, Mi, Gi...: KiB, MiB, GiB...
    try:
        amount = Fraction(number) * _BYTES[unit]  # exact: '2.01KB' is 2010 bytes
    except (ValueError, OverflowError):  # nan, inf, more digits than Python reads as a number
        amount = None
    if amount is None or amount < 0 or amount > sys.float_info.max:
        raise ValueError(f"memory must be finite and not negative, got {quoted(text)}")
    if amount.denominator != 1:
        raise ValueError(f"memory must be a whole number of bytes, got {quoted(text)}")
    return int(amount)


# Ray keeps every amount as a signed 64-bit count of 1/10000: no amount can be larger.
MAX_AMOUNT = (2**63 - 1) // UNIT


def check_ray_range(amount: float) -> None:
    if amount > MAX_AMOUNT:
        raise ValueError(f"at most {MAX_AMOUNT} (the most Ray can count), got {amount:g}")


def parse_amount(text: str | float | int) -> float:
    """A resource amount: finite, not negative, no finer than Ray's 1/10000."""
    if isinstance(text, bool):
        raise ValueError(f"not a number: {text!r}")
    try:
        amount = _float(text)
    except (TypeError, ValueError):
        raise ValueError(f"not a number: {quoted(text)}") from None
    if _negative_or_nan(amount):
        raise ValueError(f"must be finite and not negative, got {quoted(text)}")
    check_ray_range(amount)
    scaled = amount * UNIT
    if abs(scaled - round(scaled)) > 1e-6:
        raise ValueError(f"Ray counts resources in steps of 0.0001; {quoted(text)} is finer")
    return round(scaled) / UNIT


def parse_time(text: str | datetime) -> datetime:
    """An aware UTC time before LATEST_TIME from ISO 8601 ('2026-11-29T08:00:00Z', '2026-11-29 08:00');
    naive means UTC."""
    if isinstance(text, datetime):
        moment = text
    else:
        written = str(text).strip()
        try:
            # Printable ASCII only: Python's fromisoformat reads a NUL as the end of the text.
            if not (written.isascii() and written.isprintable()):
                raise ValueError
            moment = datetime.fromisoformat(written.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not a time: {quoted(text)} (use ISO 8601, e.g. 2026-11-29T08:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
        in_range = moment < LATEST_TIME
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is in year 10000 in UTC
        in_range = False
    if not in_range:
        raise ValueError(f"{quoted(text)} is out of range: give a time in year 1 to {LATEST_TIME.year - 1} in UTC")
    return moment


def format_duration(seconds: float, parts: int = 4) -> str:
    """`45s`, `4m5s`, `1d2h`, as parse_duration reads them back: the one way durations are shown.
    At most `parts` units, the largest first: a message that says `in 1h30m` rather than down to
    the second is rewritten less often."""
    if seconds < 60:
        return f"{seconds:g}s"
    written = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            written.append(f"{int(count)}{unit}")
    return "".join(written[:parts])


def time_of_day(moment: datetime, now: datetime) -> str:
    """A time to come, as people read one: 14:20 UTC within the next day from `now`, else with its date."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%H:%M UTC" if moment - now < timedelta(days=1) else "%Y-%m-%d %H:%M UTC")


def parse_pairs(items: Iterable[str], separator: str, form: str) -> dict[str, str]:
    """Items written KEY<separator>VALUE as a map; ValueError naming the item that is not."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition(separator)
        if not sep or not key.strip():
            raise ValueError(f"expected {form}, got {quoted(item)}")
        if key.strip() in result:
            raise ValueError(f"{quoted(key.strip())} given twice")
        result[key.strip()] = value.strip()
    return result
