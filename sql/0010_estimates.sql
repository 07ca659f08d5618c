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

-- The head of each group's line in plan order, for the status page (job/store/reports.py
-- queue_head): pending jobs only, those past the first 1,000 (no position) last, by id.
CREATE INDEX jobs_pending_position ON jobs (group_name, queue_position, id) WHERE state = 'PENDING';
