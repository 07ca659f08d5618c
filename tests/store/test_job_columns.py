"""The job declared once (job/core/job.py): Job holds every column of `jobs`, and the field table
a row for each, so that a column a migration adds is read, shown or left out on purpose."""

from __future__ import annotations

from job.core.job import COLUMNS, FIELDS, SUBMITTED
from job.store import jobs


def test_job_has_every_column_of_jobs_and_the_table_a_row_for_each(conn):
    found = conn.execute("""SELECT column_name FROM information_schema.columns
                            WHERE table_name = 'jobs' ORDER BY ordinal_position""").fetchall()
    assert tuple(row["column_name"] for row in found) == COLUMNS
    assert sorted(field.column for field in FIELDS) == sorted(COLUMNS)


def test_a_submit_writes_the_columns_of_the_fields_it_takes():
    assert jobs.submit_columns()[:len(SUBMITTED)] == tuple(field.column for field in SUBMITTED)
    assert all(field.option and field.shown for field in SUBMITTED)
