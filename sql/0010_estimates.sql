-- Position and estimated start of the first pending jobs of each group, written by the tick
-- (job/core/estimates.py) so that `jobs`, `show` and the status page read them without planning.
-- Table-wide grants of 0005 cover the new columns: the scheduler updates jobs, readers read them.
ALTER TABLE jobs
    ADD COLUMN queue_position integer CHECK (queue_position > 0),
    ADD COLUMN estimated_start_at timestamptz,
    -- Where the estimate comes from ("from bob's recent run times"), or why there is none.
    ADD COLUMN estimate_basis text;

-- A group's most recent successful jobs, the run times estimates rest on: read newest first with a
-- LIMIT, so a tick reads that many rows of the history, never more (tests/test_history.py).
CREATE INDEX jobs_succeeded_recent ON jobs (group_name, finished_at DESC) WHERE state = 'SUCCEEDED';
