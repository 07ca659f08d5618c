"""The pending rows a loop keeps from one tick to the next (job/scheduler/pending.py), on the real
PostgreSQL: after any write by anyone, committed in any order, what it gives is what reading every
row gives (`tick_jobs.pending_jobs`), and a row nobody wrote is the object read before."""

from __future__ import annotations

import psycopg
import pytest

from job.scheduler import tick
from job.scheduler.config import TickConfig
from job.scheduler.pending import PendingRows
from job.store import tick_jobs
from job.store.connection import connect

GROUP = "g"


@pytest.fixture
def queue(conn):
    conn.execute("INSERT INTO resource_groups (name, clusters) "
                 "VALUES ('g', '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:9\"}]'), "
                 "('h', '[{\"name\": \"c\", \"address\": \"http://127.0.0.1:9\"}]')")
    conn.execute("INSERT INTO users (name) VALUES ('alice'), ('bob')")
    return conn


@pytest.fixture
def reader(database_url):
    """The tick's kind of connection: not autocommit, each read committed as a tick's steps are."""
    with connect(database_url) as connection:
        yield connection


def add(conn: psycopg.Connection, count: int = 1, group: str = GROUP, user: str = "alice") -> list[int]:
    return [row["id"] for row in conn.execute(
        """INSERT INTO jobs (user_name, group_name, entrypoint, resources)
           SELECT %s, %s, 'true', '{"CPU": 1}' FROM generate_series(1, %s) RETURNING id""",
        (user, group, count)).fetchall()]


def read(kept: PendingRows, reader: psycopg.Connection) -> list:
    rows = kept.read(reader, GROUP)
    reader.commit()
    full = tick_jobs.pending_jobs(reader, GROUP)
    reader.commit()
    assert rows == full
    assert kept.carrying(GROUP) == [row for row in full if row.reserved_node is not None
                                    or row.queue_position is not None or row.estimate_basis is not None]
    return rows


# Each: what another session writes between two reads, given the ids of five pending jobs of g;
# and whether the rows are all read again then (a pending row gone to another group or deleted is
# not among the rows written to g's jobs: the count differs).
WRITES = {
    "a job submitted": (lambda c, ids: add(c), False),
    "a job of another group submitted": (lambda c, ids: add(c, group="h"), False),
    "a job cancelled": (lambda c, ids: c.execute(
        "UPDATE jobs SET state = 'CANCELLED', finished_at = now() WHERE id = %s", (ids[1],)), False),
    "a job placed and ended": (lambda c, ids: [
        c.execute("UPDATE jobs SET state = 'SUBMITTING', node = 'n', attempt = 1, submission_id = 's3' WHERE id = %s",
                  (ids[1],)),
        c.execute("UPDATE jobs SET state = 'SUCCEEDED', finished_at = now() WHERE id = %s", (ids[1],))], False),
    "a job placed": (lambda c, ids: c.execute(
        "UPDATE jobs SET state = 'SUBMITTING', node = 'n', attempt = 1, submission_id = 's1' WHERE id = %s",
        (ids[0],)), False),
    "its priority and reason changed": (lambda c, ids: c.execute(
        "UPDATE jobs SET priority = 5, reason = 'Resources', message = 'needs CPU 1' WHERE id = %s", (ids[2],)), False),
    "a job placed, then requeued": (lambda c, ids: [
        c.execute("UPDATE jobs SET state = 'SUBMITTING', node = 'n', attempt = 1, submission_id = 's2' WHERE id = %s",
                  (ids[0],)),
        c.execute("UPDATE jobs SET state = 'PENDING', node = NULL WHERE id = %s", (ids[0],))], False),
    "nothing": (lambda c, ids: None, False),
    "an estimate stored": (lambda c, ids: c.execute(
        "UPDATE jobs SET queue_position = 1, estimate_basis = 'from the plan' WHERE id = %s", (ids[2],)), False),
    "a reservation held": (lambda c, ids: c.execute(
        "UPDATE jobs SET reserved_node = 'n', reserved_at = now() WHERE id = %s", (ids[4],)), False),
    "an estimate cleared": (lambda c, ids: c.execute(
        "UPDATE jobs SET queue_position = NULL, estimate_basis = NULL WHERE id = %s", (ids[2],)), False),
    "a job holding a reservation placed": (lambda c, ids: c.execute(
        "UPDATE jobs SET reserved_node = 'n', reserved_at = now(), state = 'SUBMITTING', node = 'n', attempt = 1,"
        " submission_id = 's4' WHERE id = %s", (ids[4],)), False),
    "a job moved to another group": (lambda c, ids: c.execute(
        "UPDATE jobs SET group_name = 'h' WHERE id = %s", (ids[3],)), True),
    "a pending job deleted by hand": (lambda c, ids: c.execute("DELETE FROM jobs WHERE id = %s", (ids[4],)), True),
}


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
def test_after_a_write_the_kept_rows_are_what_a_full_read_gives(queue, reader, write, request):
    ids = add(queue, 5)
    kept = PendingRows()
    before = {row.id: row for row in read(kept, reader)}
    write_it, whole = WRITES[write]
    write_it(queue, ids)
    # Counted from here: the first read was whole, and `read` reads whole to compare.
    whole_reads = request.getfixturevalue("whole_reads")
    after = kept.read(reader, GROUP)
    assert whole_reads == ([GROUP] if whole else [])
    assert after == tick_jobs.pending_jobs(reader, GROUP)
    if not whole:
        # Each write touches one job of g at most: every other row is the very object read before.
        assert sum(row is not before.get(row.id) for row in after) <= (write != "nothing")


def test_every_write_one_after_the_other_keeps_them_equal(queue, reader):
    ids = add(queue, 5)
    kept = PendingRows()
    read(kept, reader)
    for write, _ in WRITES.values():
        write(queue, ids)
        read(kept, reader)


def test_a_write_committed_after_a_later_one_is_read_all_the_same(queue, reader, database_url):
    """The transaction that wrote first but commits last: its rows are read once it commits,
    although a later transaction's were read before."""
    first, second = add(queue, 2)
    kept = PendingRows()
    read(kept, reader)
    with psycopg.connect(database_url) as slow:
        slow.execute("UPDATE jobs SET priority = 7 WHERE id = %s", (first,))  # begun, not committed
        queue.execute("UPDATE jobs SET priority = 8 WHERE id = %s", (second,))
        rows = {row.id: row.priority for row in read(kept, reader)}
        assert rows == {first: 0, second: 8}
        slow.commit()
    assert {row.id: row.priority for row in read(kept, reader)} == {first: 7, second: 8}


def test_a_group_whose_tick_failed_is_read_whole_at_its_next_tick(queue, database_url, monkeypatch, whole_reads):
    add(queue, 3)
    kept = PendingRows()
    config = TickConfig(database_url=database_url, submit_concurrency=1, ray_timeout_s=1.0)
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: _NoRay())
    group = tick.groups.get_group(queue, GROUP)
    with connect(database_url) as reader:
        kept.read(reader, GROUP)
    assert whole_reads == [GROUP]

    def broken(snapshot):
        raise RuntimeError("a plan that fails")

    monkeypatch.setattr(tick, "plan", broken)
    with pytest.raises(RuntimeError):
        tick.tick_group(config, group, "inst", pending=kept)
    # The failed tick read the kept rows (no full read), then dropped them.
    assert whole_reads == [GROUP]
    with connect(database_url) as reader:
        kept.read(reader, GROUP)
    assert whole_reads == [GROUP, GROUP]


class _NoRay:
    """A Ray with no node and no job: enough for a tick to reach its plan."""

    def alive_nodes(self, labels=None):
        return []

    def jobs(self, submission_ids):
        return {}


def test_a_reason_written_behind_the_loops_back_is_written_again(queue, database_url, monkeypatch, whole_reads):
    """The kept comparison of the waiting reasons (core/waiting.py's Compared) reads again the rows
    written since: after each write, the kept tick leaves no reason that a tick reading every row
    would write."""
    ids = add(queue, 4)
    kept = PendingRows()
    config = TickConfig(database_url=database_url, submit_concurrency=1, ray_timeout_s=1.0)
    monkeypatch.setattr("job.scheduler.clusters.cluster_of", lambda address, timeout_s, *_: _NoRay())
    group = tick.groups.get_group(queue, GROUP)
    assert tick.tick_group(config, group, "inst", pending=kept).reasons_written == 4
    # Each on a job of its own: from the second on, one whose row was last found up to date.
    for index, write in enumerate(("UPDATE jobs SET reason = NULL, message = NULL WHERE id = %s",
                                   "UPDATE jobs SET reason = 'Resources', message = 'needs CPU 1' WHERE id = %s",
                                   "UPDATE jobs SET message = 'old words' WHERE id = %s",
                                   "UPDATE jobs SET priority = 3 WHERE id = %s")):
        queue.execute(write, (ids[index],))
        add(queue)
        written = tick.tick_group(config, group, "inst", pending=kept).reasons_written
        assert written == (1 if "priority" in write else 2)
        # The kept ticks never read every row; a tick that does finds nothing more to write.
        assert whole_reads == [GROUP] * (index + 1)
        assert tick.tick_group(config, group, "inst", pending=PendingRows()).reasons_written == 0
