"""Memory sizes as people type them, and the one way amounts and durations are shown."""

from __future__ import annotations

import re

import pytest

from job.cli.output import format_resources
from job.core.units import format_duration, parse_duration, parse_memory

KIB, MIB, GIB, TIB, PIB = 2**10, 2**20, 2**30, 2**40, 2**50


@pytest.mark.parametrize("text, size", [
    ("512MiB", 512 * MIB),
    ("4GiB", 4 * GIB),
    ("4 GiB", 4 * GIB),
    ("  4GiB ", 4 * GIB),
    ("4gib", 4 * GIB),
    ("4GIB", 4 * GIB),
    ("2G", 2 * 10**9),
    ("2GB", 2 * 10**9),
    ("2gb", 2 * 10**9),
    ("3k", 3000),
    ("1.5Gi", 3 * GIB // 2),  # Kubernetes' suffixes
    ("1Ki", KIB),
    ("1Mi", MIB),
    ("2Ti", 2 * TIB),
    ("1Pi", PIB),
    ("1PB", 10**15),
    ("2.01KB", 2010),  # exact: not 2009, as a truncated float product would give
    ("1.1MB", 1_100_000),
    ("0.5KiB", 512),
    ("100B", 100),
    ("100 b", 100),
    ("1024", 1024),
    ("0", 0),
    (1024, 1024),
    (0, 0),
    (2.0, 2),
    (1e12, 10**12),
    (4 * GIB, 4 * GIB),
])
def test_accepted_sizes(text, size):
    parsed = parse_memory(text)
    assert parsed == size and type(parsed) is int


@pytest.mark.parametrize("text, message", [
    ("4 gigs", "not a memory size: '4 gigs'"),
    ("", "not a memory size"),
    ("GiB", "not a memory size"),
    ("-1", "not a memory size"),
    ("-1GiB", "not a memory size"),
    ("5.GiB", "not a memory size"),
    (".5GiB", "not a memory size"),
    ("4 G B", "not a memory size"),
    ("1e3", "not a memory size"),
    ("inf", "not a memory size"),
    ("2EiB", "not a memory size"),
    ("1Gbit", "not a memory size"),
    ("4GiB extra", "not a memory size"),
    (True, "not a memory size"),
    (None, "not a memory size"),
    (-1, "memory must be finite and not negative, got -1"),
    (-0.5, "memory must be finite and not negative"),
    (float("inf"), "memory must be finite and not negative, got inf"),
    (float("nan"), "memory must be finite and not negative"),
    (10**400, "memory must be finite and not negative"),
    ("9" * 400 + "PiB", "memory must be finite and not negative"),
    ("1.5B", "memory must be a whole number of bytes, got '1.5B'"),
    ("1.5", "memory must be a whole number of bytes"),
    ("0.1KiB", "memory must be a whole number of bytes"),
    ("1.0000001KiB", "memory must be a whole number of bytes"),
    (1.5, "memory must be a whole number of bytes, got 1.5"),
])
def test_refused_sizes(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_memory(text)


@pytest.mark.parametrize("resources, text", [
    (None, "-"),
    ({}, "-"),
    ({"CPU": 2, "memory": 4 * GIB, "special": 0.5}, "CPU=2,memory=4 GiB,special=0.5"),
    ({"CPU": 2.0, "GPU": 0.0001, "memory": 1.5 * GIB}, "CPU=2,GPU=0.0001,memory=1.5 GiB"),
    ({"memory": 512}, "memory=512 B"),
    ({"tokens": 1_000_000}, "tokens=1000000"),
])
def test_format_resources_shows_amounts_as_messages_do(resources, text):
    assert format_resources(resources) == text


@pytest.mark.parametrize("seconds, parts, text", [
    (0, 4, "0s"),
    (45, 4, "45s"),
    (0.5, 4, "0.5s"),
    (245, 4, "4m5s"),
    (600, 4, "10m"),
    (3600 + 5, 4, "1h5s"),
    (86400 + 3 * 3600 + 25 * 60 + 7, 4, "1d3h25m7s"),
    (5400 + 45, 2, "1h30m"),
    (3900, 2, "1h5m"),
    (86400 + 7, 2, "1d7s"),
])
def test_format_duration(seconds, parts, text):
    assert format_duration(seconds, parts) == text


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 61, 3599, 3600, 86399, 86400, 10 * 86400 + 1])
def test_a_duration_shown_reads_back(seconds):
    assert parse_duration(format_duration(seconds)) == seconds
