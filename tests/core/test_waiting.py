"""Which waiting reasons a tick writes (core/waiting.py), from the plan's waiting records."""

from datetime import datetime, timezone

from job.core import waiting
from job.core.group_snapshot import PendingRow
from job.core.waiting import waiting_changes

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def row(ident: int, reason: str | None, message: str | None) -> PendingRow:
    return PendingRow(ident, "u", '{"CPU": 1}', "{}", 0, NOW, None, reason, message)


def record(ident: int, reason: str, message: str) -> dict:
    return {"job": str(ident), "reason": reason, "message": message}


def test_only_what_changed_is_written_new_reasons_first():
    pending = [row(1, "Resources", "needs CPU 1"), row(2, None, None), row(3, "Resources", "needs CPU 1"),
               row(4, "Limit", "at max_running")]
    plan = [record(3, "Resources", "needs CPU 2"), record(1, "Resources", "needs CPU 1"), record(2, "Limit", "at max_running"),
            record(4, "Resources", "needs CPU 1"), record(5, "Resources", "needs CPU 1")]
    assert list(waiting_changes(pending, plan).items()) == [
        (2, ("Limit", "at max_running")), (4, ("Resources", "needs CPU 1")), (5, ("Resources", "needs CPU 1")),
        (3, ("Resources", "needs CPU 2"))]


def test_writes_are_bounded(monkeypatch):
    monkeypatch.setattr(waiting, "NEW_REASONS_PER_TICK", 2)
    monkeypatch.setattr(waiting, "MESSAGE_REFRESH_PER_TICK", 1)
    pending = [row(i, "Resources", "old") for i in range(1, 4)] + [row(i, None, None) for i in range(4, 8)]
    plan = [record(i, "Resources", "new") for i in range(1, 8)]
    assert waiting_changes(pending, plan) == {4: ("Resources", "new"), 5: ("Resources", "new"), 1: ("Resources", "new")}
    assert waiting_changes(pending, [record(i, "Resources", "old") for i in range(1, 4)]) == {}
