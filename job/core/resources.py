"""Ray resource amounts in Ray's own fixed point, so that what fits here fits in Ray.

Ray keeps every resource amount as an integer count of 1/10000 units (`FixedPoint` in the raylet),
rounding half up when it converts from a float. Comparing raw floats instead would let 0.1 + 0.2
jobs "fit" in 0.3 of a node here and not in Ray, or the other way round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar, overload

UNIT = 10_000
_T = TypeVar("_T")

# Resources Ray counts in bytes: shown as KiB, MiB, GiB... in messages.
BYTE_RESOURCES = frozenset({"memory", "object_store_memory"})
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def to_units(amount: float) -> int:
    """A Ray amount (e.g. 0.5 CPU, 4294967296 bytes of memory) as an integer count of 1/10000."""
    return int(amount * UNIT + 0.5)


class Resources(Mapping[str, int]):
    """An immutable map from Ray resource name to amount in units of 1/10000; zero amounts are
    dropped, so two equal requests compare and hash equal however they were written.

    Amounts may be negative (a node over-committed by someone else has negative free resources,
    which simply fits nothing)."""

    __slots__ = ("_hash", "_units")

    def __init__(self, units: Mapping[str, int] | Iterable[tuple[str, int]] = ()):
        self._units = {name: amount for name, amount in dict(units).items() if amount}
        self._hash: int | None = None

    @classmethod
    def of(cls, amounts: Mapping[str, float]) -> Resources:
        """From Ray amounts, as in a job's request or a node's totals."""
        return cls((name, to_units(amount)) for name, amount in amounts.items())

    def amounts(self) -> dict[str, float | int]:
        """Back to Ray amounts, whole numbers as ints."""
        return {name: _from_units(units) for name, units in self._units.items()}

    def __getitem__(self, name: str) -> int:
        return self._units[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)

    def items(self):
        return self._units.items()

    # An absent resource is none of it: get(name) is 0, not Mapping's None (an int is still a
    # valid answer where Mapping promises int | None).
    @overload
    def get(self, name: str, /) -> int: ...
    @overload
    def get(self, name: str, default: _T, /) -> int | _T: ...
    def get(self, name: str, default: Any = 0) -> Any:
        return self._units.get(name, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._units == other._units
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._units.items()))
        return self._hash

    def fits_in(self, available: Mapping[str, int]) -> bool:
        return fits(self._units.items(), available)

    def within(self, limits: Mapping[str, int], held: Mapping[str, int]) -> bool:
        """Whether `held` plus this request stays within `limits` on every resource this asks for:
        a resource `limits` does not name is not limited, and one limited to 0 is (so `limits` is a
        plain dict, not a Resources)."""
        return all(held.get(name, 0) + amount <= limits[name] for name, amount in self._units.items() if name in limits)

    def __add__(self, other: Mapping[str, int]) -> Resources:
        return self._plus(other, 1)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        return self._plus(other, -1)

    def _plus(self, other: Mapping[str, int], sign: int) -> Resources:
        units = dict(self._units)
        accumulate(units, other, sign)
        return Resources(units)

    @classmethod
    def total(cls, parts: Iterable[Mapping[str, int]]) -> Resources:
        """The sum of many, added up in one map rather than one Resources per step."""
        units: dict[str, int] = {}
        for part in parts:
            accumulate(units, part)
        return cls(units)

    def dominant_share(self, totals: Mapping[str, int]) -> float:
        return dominant_share(self, totals)

    def __repr__(self) -> str:
        return f"Resources.of({self.amounts()!r})"

    def __str__(self) -> str:
        return describe(self._units.items())


def footprint(job: Mapping[str, Any]) -> Resources:
    """A job's whole footprint: its driver's request (`resources`) and each of its `bundles`, each
    rounded to units on its own, as Ray does. Whoever counts what a job holds counts this."""
    return footprint_of(job["resources"], job.get("bundles"))


def footprint_of(resources: Mapping[str, float], bundles: Iterable[Mapping[str, float]] | None) -> Resources:
    """The footprint of a job's request and bundles (`footprint`), given apart: the planner's jobs
    are Structs."""
    return Resources.total(Resources.of(part) for part in (resources, *(bundles or ())))


def accumulate(into: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    """`into` plus `amounts` times `sign`, in place: the running sums of the fast paths (a node's
    free resources as jobs are packed, a user's held ones), where a new Resources per job costs."""
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + sign * amount


def fits(need: Iterable[tuple[str, int]], available: Mapping[str, int]) -> bool:
    """Whether every (name, amount) of `need` is covered by `available` (a plain dict is fine)."""
    for name, amount in need:  # noqa: SIM110 - a loop: all() over a generator is slower on the planner's hot path
        if available.get(name, 0) < amount:
            return False
    return True


def dominant_share(used: Mapping[str, int], totals: Mapping[str, int]) -> float:
    """max over resources r of used[r] / totals[r], both in units: DRF's dominant share, not yet
    divided by the user's shares. A resource the group has none of (a job still running on a node
    that left) cannot be shared out, so it does not count."""
    share = 0.0
    for name, amount in used.items():
        total = totals.get(name, 0)
        if total > 0 and amount / total > share:
            share = amount / total
    return share


def _from_units(units: int) -> float | int:
    whole, rest = divmod(units, UNIT)
    return whole if rest == 0 else units / UNIT


def format_amount(name: str, units: int) -> str:
    """One amount for people: `4`, `0.5`, or for byte resources `8 GiB`, `1.5 MiB`."""
    if name not in BYTE_RESOURCES:
        value = _from_units(units)
        return str(value) if isinstance(value, int) else f"{value:.4f}".rstrip("0")
    size = units / UNIT
    exponent = min(int(math.log(size, 1024)) if size >= 1 else 0, len(_BYTE_UNITS) - 1)
    scaled = size / 1024**exponent
    text = f"{scaled:.2f}".rstrip("0").rstrip(".")
    return f"{text} {_BYTE_UNITS[exponent]}"


def describe(amounts: Iterable[tuple[str, int]]) -> str:
    """`CPU 4, memory 8 GiB`, in the order given; `nothing` for an empty request."""
    text = ", ".join(f"{name} {format_amount(name, units)}" for name, units in amounts)
    return text or "nothing"
