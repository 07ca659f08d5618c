"""The planner, pure code: `plan(snapshot) -> Plan` (docs/planner.md: the rules and the JSON). Imports nothing that does
I/O (no psycopg, ray or kubernetes), so the tick and `python -m job plan` share it."""

from job.core.planner.snapshot import Plan, Snapshot

__all__ = ["Plan", "Snapshot", "plan"]


def __getattr__(name: str):
    # The planner's code is imported by what plans, not by every reader of the snapshot's shapes
    # (core/specs.py, so every command that validates a job or a group).
    if name == "plan":
        from job.core.planner.planner import plan

        return plan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
