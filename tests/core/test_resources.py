"""Resources' arithmetic: what the share report, the autoscale demand and the status page add up."""

from __future__ import annotations

from job.core.resources import Resources, accumulate

A = Resources.of({"CPU": 2, "memory": 1024})
B = Resources.of({"CPU": 0.5, "GPU": 1})


def test_sum_and_difference_drop_what_comes_to_zero():
    assert Resources.of({"CPU": 2.5, "GPU": 1, "memory": 1024}) == A + B
    assert (A + B) - B == A
    assert Resources() == A - A and not (A - A)
    # Negative amounts stay: a node over-committed by someone else fits nothing.
    assert (B - A).amounts() == {"CPU": -1.5, "GPU": 1, "memory": -1024}
    # A plain map of units is added as it is.
    assert Resources.of({"CPU": 3, "memory": 1024}) == A + {"CPU": 10_000}


def test_total_of_many():
    assert Resources.total([A, B, B]) == A + B + B
    assert Resources.total([]) == Resources()


def test_within_limits_counts_only_what_is_asked_and_limited():
    held = Resources.of({"CPU": 3, "GPU": 5})
    limits = {"CPU": 40_000, "GPU": 0}
    assert Resources.of({"CPU": 1}).within(limits, held)
    assert not Resources.of({"CPU": 1.5}).within(limits, held)
    # GPU is over its limit of 0 already, but this request asks for none: only CPU is checked.
    assert Resources.of({"CPU": 1, "memory": 2**40}).within(limits, held)
    assert not B.within(limits, Resources())


def test_accumulate_in_place():
    free = {"CPU": 40_000}
    accumulate(free, Resources.of({"CPU": 1.5, "GPU": 1}), -1)
    assert free == {"CPU": 25_000, "GPU": -10_000}
    accumulate(free, {"GPU": 10_000})
    assert free == {"CPU": 25_000, "GPU": 0}
