"""The planner, pure code: `plan(snapshot) -> Plan` (docs/planner.md: the rules and the JSON). Imports nothing that does
I/O (no psycopg, ray or kubernetes), so the tick and `python -m job plan` share it."""

from job.core.planner.planner import plan
from job.core.planner.snapshot import Plan, Snapshot

__all__ = ["Plan", "Snapshot", "plan"]
