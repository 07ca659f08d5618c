"""Charging users' decayed usage between two ticks (the pure part the tick calls)."""

from __future__ import annotations

import math

import pytest

from job.core.resources import to_units
from job.core.usage import charge_users

TOTALS = {"CPU": to_units(8), "memory": to_units(32 * 2**30)}
HALF_LIFE = 3600.0


def held(cpus: float) -> dict[str, int]:
    return {"CPU": to_units(cpus)}


def test_usage_accrues_the_plain_dominant_share_whatever_the_shares():
    # alice (2 shares) and bob (1 share) held half the CPUs for one half life: the same usage.
    # Shares weigh the score later; usage is what was held.
    charged = charge_users({"alice": 0.0, "bob": 0.0}, {"alice": held(4), "bob": held(4)}, TOTALS, HALF_LIFE, HALF_LIFE)
    expected = 0.5 * (HALF_LIFE / math.log(2)) * 0.5
    assert charged["alice"] == pytest.approx(expected) and charged["bob"] == pytest.approx(expected)


def test_idle_usage_halves_every_half_life_and_unchanged_users_are_left_out():
    charged = charge_users({"alice": 100.0, "carol": 0.0}, {}, TOTALS, HALF_LIFE, HALF_LIFE)
    assert charged == {"alice": pytest.approx(50.0)}


def test_a_new_user_with_running_jobs_is_charged():
    charged = charge_users({}, {"dave": held(8)}, TOTALS, 60.0, HALF_LIFE)
    assert charged["dave"] == pytest.approx(HALF_LIFE / math.log(2) * -math.expm1(-60 * math.log(2) / HALF_LIFE))


def test_half_life_zero_keeps_no_memory():
    assert charge_users({"alice": 5.0}, {"alice": held(8)}, TOTALS, 60.0, 0.0) == {"alice": 0.0}
