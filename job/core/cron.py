"""A schedule's slots: a standard 5-field cron expression (`M H DOM MON DOW`) in a time zone, or a
fixed period (`--every`), as pure functions of instants.

Cron's fields take `*`, numbers, ranges `a-b`, lists `a,b`, steps `*/n`, `a-b/n` and `a/n`, month and
day names (`jan`, `mon`), 7 for Sunday, and the macros @hourly, @daily, @weekly, @monthly and
@yearly. As in Vixie cron, when both day fields are restricted (neither starts with `*`), a day
matching either runs.

Daylight saving time: a cron expression is read in its zone's wall clock, each local time once.
A local time that a change skips (02:30 on a spring-forward night) runs at the instant it names
with the offset before the change (03:30 after it); a local time that occurs twice (a fall-back
hour) runs once, at its first occurrence. `--every` counts real time and knows no zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

# Each field's name (in a refusal), bounds and names (numbered from its low bound).
_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()), ("month", 1, 12, _MONTHS),
           ("day of week", 0, 7, _DAYS))
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_TERM = re.compile(r"(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/([0-9]+))?")
# How far back `latest` looks for a due slot, smallest window first: the first window holding one
# is scanned slot by slot, so a minutely schedule down for a week costs an hour's slots. Nine years
# hold every expression's slot (Feb 29 on a given weekday is the rarest).
_WINDOWS = (timedelta(hours=1), timedelta(days=1), timedelta(days=32), timedelta(days=367), timedelta(days=9 * 366))
# A DST change moves the wall clock by at most this much: local order and real order of slots
# differ only within it.
_SHIFT = timedelta(hours=3)


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the values each field allows, and whether the day fields were `*`-led."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 Sunday .. 6 Saturday
    any_day: bool
    any_weekday: bool
    zone: ZoneInfo

    def _day_matches(self, moment: datetime) -> bool:
        day = moment.day in self.days
        weekday = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day and weekday
        return day or weekday

    def _next_local(self, local: datetime) -> datetime | None:
        """The first matching wall-clock minute at or after `local` (naive), within nine years."""
        moment = local.replace(second=0, microsecond=0)
        if moment < local:
            moment += timedelta(minutes=1)
        limit = local + _WINDOWS[-1]
        while moment <= limit:
            if moment.month not in self.months:
                moment = (moment.replace(day=1) + timedelta(days=32)).replace(day=1, hour=0, minute=0)
            elif not self._day_matches(moment):
                moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
            elif moment.hour not in self.hours:
                moment = moment.replace(minute=0) + timedelta(hours=1)
            elif moment.minute not in self.minutes:
                moment += timedelta(minutes=1)
            else:
                return moment
        return None

    def _instant(self, local: datetime) -> datetime:
        # fold=0: a repeated local time's first occurrence, a skipped one's offset before the change.
        return local.replace(tzinfo=self.zone, fold=0).astimezone(UTC)

    def next_after(self, after: datetime) -> datetime | None:
        """The first slot strictly after `after` (aware), in UTC; None if none in nine years."""
        local = after.astimezone(self.zone).replace(tzinfo=None)
        offsets = {(after + shift).astimezone(self.zone).utcoffset() for shift in (-_SHIFT, 2 * _SHIFT)}
        if len(offsets) == 1:
            # No change of offset near: wall clock and real time keep one order here.
            found = self._next_local(local + timedelta(microseconds=1))
            if found is None or found <= local + 2 * _SHIFT:
                return None if found is None else self._instant(found)
        # Near a change, the slots of the wall clock around it, the earliest real one after `after`.
        first, local = None, local - _SHIFT
        while (found := self._next_local(local)) is not None:
            instant = self._instant(found)
            if instant > after and (first is None or instant < first):
                first = instant
            if first is not None and self._instant(found - _SHIFT) > first:
                break
            local = found + timedelta(minutes=1)
        return first


def parse_cron(text: str, zone: str = "UTC") -> Cron:
    """A cron expression in a time zone (an IANA name); ValueError names what is wrong."""
    tz = parse_timezone(zone)
    expression = _MACROS.get(text.strip().lower(), text.strip().lower())
    parts = expression.split()
    if len(parts) != 5:
        raise ValueError(f"{text!r} is not a cron expression: give 5 fields, minute hour day-of-month month "
                         f"day-of-week (e.g. '30 2 * * mon-fri'), got {len(parts)}")
    sets = [_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(day % 7 for day in sets[4])
    cron = Cron(text, sets[0], sets[1], sets[2], sets[3], weekdays, parts[2].startswith("*"),
                parts[4].startswith("*"), tz)
    # When only the days of month choose, one of them must fall in one of the months.
    if cron.any_weekday and not any(day <= _MONTH_DAYS[month - 1] for month in cron.months for day in cron.days):
        raise ValueError(f"{text!r} never runs: no month chosen has the days of month chosen")
    return cron


def _field(part: str, name: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    values: set[int] = set()
    for term in part.split(","):
        match = _TERM.fullmatch(term)
        if not match:
            raise ValueError(f"{name}: {term!r} is not a value, a range a-b, a step */n or a list")
        span, step = match.groups()
        if span == "*":
            first, last = low, high
        else:
            start, _, end = span.partition("-")
            first = _value(start, name, low, high, names)
            # `a/n` runs from a to the field's end.
            last = _value(end, name, low, high, names) if end else (high if step else first)
            if last < first:
                raise ValueError(f"{name}: {span!r} is a range that ends before it starts")
        every = int(step) if step else 1
        if every < 1 or every > high - low + 1:
            raise ValueError(f"{name}: a step must be 1 to {high - low + 1}, got {step}")
        values.update(range(first, last + 1, every))
    return frozenset(values)


def _value(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text in names:
        return names.index(text) + (1 if name == "month" else 0)
    if not text.isascii() or not text.isdigit() or not low <= int(text) <= high:
        spelled = f" or {names[0]}..{names[-1]}" if names else ""
        raise ValueError(f"{name}: {text!r} is not {low}..{high}{spelled}")
    return int(text)


def parse_timezone(name: str) -> ZoneInfo:
    """An IANA time zone (`Europe/Paris`, `UTC`); ValueError otherwise. Files of the zone data that
    name no zone are refused: `localtime` is whatever zone the machine reading it is in, which the
    command's and the tick's machines need not share."""
    if name not in _zones():
        raise ValueError(f"{name!r} is not a time zone (an IANA name such as 'Europe/Paris' or 'UTC')")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"{name!r} is not a time zone (an IANA name such as 'Europe/Paris' or 'UTC')") from None


@dataclass(frozen=True)
class Every:
    """Slots every `seconds` from `start` on (the schedule's creation), the first one period after it."""

    seconds: float
    start: datetime

    def next_after(self, after: datetime) -> datetime:
        period = timedelta(seconds=self.seconds)
        count = max(0, (after - self.start) // period) + 1
        return self.start + count * period


def latest(when: Cron | Every, after: datetime, now: datetime) -> datetime | None:
    """The last slot in (after, now], if any: the one slot a tick considers, however many a downtime
    missed."""
    if isinstance(when, Every):
        if now - when.start < timedelta(seconds=when.seconds):
            return None
        last_slot = when.start + ((now - when.start) // timedelta(seconds=when.seconds)) * timedelta(seconds=when.seconds)
        return last_slot if last_slot > after else None
    for window in _WINDOWS:
        since = max(after, now - window)
        slot = when.next_after(since)
        if slot is not None and slot <= now:
            while (following := when.next_after(slot)) is not None and following <= now:
                slot = following
            return slot
        if since == after:
            return None
    return None


@cache
def _zones() -> frozenset[str]:
    # Read once per process: the zone data's directory is walked. It may hold `localtime`.
    return frozenset(available_timezones()) - {"localtime"}
