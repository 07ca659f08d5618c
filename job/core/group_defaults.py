"""A resource group's defaults, declared once. GroupSpec (core/specs.py, what `group add` stores)
and the planner's Group (core/planner/snapshot.py, what a snapshot may leave out) both take them
from here; the columns of `resource_groups` default to the same, and docs/planner.md states them.
tests/store/test_group_defaults.py holds the four together. A module of its own, with no imports,
because the planner's snapshot may import nothing of specs.py, which imports it."""

from __future__ import annotations

# Scarcest first: nodes are compared on GPUs before CPUs, so CPU jobs keep off GPU nodes.
RESOURCE_PRIORITY = ("GPU", "CPU", "memory")
# Fair share's memory of past usage halves every hour.
HALF_LIFE_S = 3600.0
# A group that names no classes has this one.
DEFAULT_CLASS = {"name": "default", "value": 0, "preemptible": True}
# Preemption never stops a job that has run less than this, nor more than this many per plan.
MIN_RUNTIME_S = 600.0
MAX_PREEMPTIONS = 10
# The first in line that waited this long for resources reserves; at most this many at a time.
RESERVE_AFTER_S = 300.0
MAX_RESERVATIONS = 1
# A cluster that does not answer this long is lost: its running jobs are requeued elsewhere.
CLUSTER_LOST_AFTER_S = 120.0
# What a Ray head spends per job supervisor (ray#60159: about 85 MB), rounded up: a cluster runs at
# most its head node's memory over this many drivers unless the group says otherwise.
DRIVER_MEMORY_BYTES = 100 * 1000 * 1000
