"""A group's pending rows, kept from one tick to the next by a process that ticks again (the loop):
read whole once, then only the rows written since the last read. At 100,000 pending, reading every
row took longer than the plan itself, while a steady tick changes a few of them.

Every write to a job marks its row with its transaction (sql/0020_job_versions.sql), and the rows
read again are those written by the transactions that the snapshot taken before the last read did
not see: a row committed meanwhile in any order is read, one read twice does no harm. A pending row
deleted (by hand: nothing of ours deletes one) or moved to another group shows as a pending count
(the triggers' job_counts) that differs, and all are read again."""

from __future__ import annotations

from dataclasses import dataclass

from job.core.group_snapshot import MadeJobs
from job.core.job import PendingRow
from job.core.waiting import Compared
from job.store import DictConnection, tick_jobs


@dataclass
class _Kept:
    # The snapshot taken before the last read, and the rows as they stood at that read.
    since: str
    rows: dict[int, PendingRow]
    ordered: list[PendingRow]
    # Of those, the few that carry a stored estimate or a reservation, by id (`carrying`).
    carrying: dict[int, PendingRow]
    # The planner's jobs made of them by the last tick, and what its comparison of the waiting
    # reasons found.
    made: MadeJobs
    compared: Compared


class PendingRows:
    """The pending rows of each group this process ticks, in id order, as `tick_jobs.pending_jobs`
    reads them."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}

    def read(self, conn: DictConnection, group: str) -> list[PendingRow]:
        # Taken out while it is brought up to date: a read that fails midway leaves nothing kept.
        kept = self._kept.pop(group, None)
        since = tick_jobs.current_snapshot(conn)
        if kept is not None:
            total, written, left = tick_jobs.pending_changes(conn, group, kept.since)
            rows = kept.rows
            # Most of the rows written that are not pending were never among them (running jobs).
            gone = [job_id for job_id in left if rows.pop(job_id, None) is not None]
            carrying = kept.carrying
            for job_id in gone:
                carrying.pop(job_id, None)
            for row in written:
                rows[row.id] = row
                if _carries(row):
                    carrying[row.id] = row
                else:
                    carrying.pop(row.id, None)
            if len(rows) == total:
                ordered = [rows[job_id] for job_id in sorted(rows)] if written or gone else kept.ordered
                kept.compared.read_again.update(str(row.id) for row in written)
                self._kept[group] = _Kept(since, rows, ordered, carrying, kept.made, kept.compared)
                return ordered
        ordered = tick_jobs.pending_jobs(conn, group)
        self._kept[group] = _Kept(since, {row.id: row for row in ordered}, ordered,
                                  {row.id: row for row in ordered if _carries(row)}, MadeJobs(), Compared())
        return ordered

    def made(self, group: str) -> MadeJobs:
        """The planner's jobs made of the group's rows by its last tick, for build_snapshot."""
        kept = self._kept.get(group)
        return MadeJobs() if kept is None else kept.made

    def by_id(self, group: str) -> dict[int, PendingRow]:
        """The rows the last read gave, by id."""
        kept = self._kept.get(group)
        return {} if kept is None else kept.rows

    def carrying(self, group: str) -> list[PendingRow]:
        """The rows the last read gave that carry a stored estimate or a reservation, in id order:
        what the estimates and the reservations compare with (a handful, where a pass over 100,000
        rows to find them cost 10-20 ms each)."""
        kept = self._kept.get(group)
        return [] if kept is None else [kept.carrying[job_id] for job_id in sorted(kept.carrying)]

    def compared(self, group: str) -> Compared:
        """What the last tick's comparison of the group's waiting reasons found, for waiting_changes."""
        kept = self._kept.get(group)
        return Compared() if kept is None else kept.compared

    def forget(self, group: str) -> None:
        """After a group's tick failed: its next tick reads every row again."""
        self._kept.pop(group, None)


def _carries(row: PendingRow) -> bool:
    return row.reserved_node is not None or row.queue_position is not None or row.estimate_basis is not None
