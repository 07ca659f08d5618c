"""Fair share's memory: a user's decayed usage U, in dominant-share-seconds.

Usage halves every half life H. Holding a dominant share D over an interval of Δ seconds adds the
integral of D·2^(-(Δ-t)/H) over the interval, so charging once per tick or once per second gives
the same U."""

from __future__ import annotations

import math
from collections.abc import Mapping

from job.core.resources import dominant_share

_LN2 = math.log(2)


def charge_usage(usage: float, dominant_share: float, elapsed_s: float, half_life_s: float) -> float:
    """U at t1, given U at t0, the dominant share D held over [t0, t1] and the half life H:
    U·2^(-Δ/H) + D·(H/ln 2)·(1 - 2^(-Δ/H)). A half life of 0 keeps no memory: usage stays 0.
    A negative Δ (clocks that went back) charges nothing rather than inventing usage."""
    if half_life_s <= 0:
        return 0.0
    elapsed_s = max(elapsed_s, 0.0)
    # 1 - 2^(-x) through expm1: exact for the short ticks where 2^(-x) is nearly 1.
    charged = -math.expm1(-elapsed_s * _LN2 / half_life_s)
    return usage * (1.0 - charged) + dominant_share * (half_life_s / _LN2) * charged


def charge_ticks(usage: float, dominant_share: float, ticks: int, tick_s: float, half_life_s: float) -> float:
    """`charge_usage` applied once per tick of `tick_s` over `ticks` ticks, to the bit: a single
    charge over the whole span gives the same U only up to rounding, and two users whose usage is
    equal when charged per tick, as the scheduler does, would no longer tie."""
    if half_life_s <= 0:
        return 0.0
    charged = -math.expm1(-tick_s * _LN2 / half_life_s)
    kept, added = 1.0 - charged, dominant_share * (half_life_s / _LN2) * charged
    for _ in range(ticks):
        usage = usage * kept + added
    return usage


def usage_share(usage: float, half_life_s: float) -> float:
    """The dominant share that, held for ever, gives usage U: U·ln 2 / H (0 when H is 0)."""
    return usage * _LN2 / half_life_s if half_life_s > 0 else 0.0


def charge_users(usage: Mapping[str, float], held: Mapping[str, Mapping[str, int]], totals: Mapping[str, int],
                 elapsed_s: float, half_life_s: float) -> dict[str, float]:
    """Every user's usage after `elapsed_s` seconds in which each user held `held[user]` (units)
    of a group whose totals are `totals`; only the users whose usage changed. Usage accrues the
    plain dominant share: the user's shares divide the fair-share score, not the usage, so
    dividing here too would count them twice."""
    changed = {}
    for user in usage.keys() | held.keys():
        before = usage.get(user, 0.0)
        after = charge_usage(before, dominant_share(held.get(user, {}), totals), elapsed_s, half_life_s)
        if after != before:
            changed[user] = after
    return changed
