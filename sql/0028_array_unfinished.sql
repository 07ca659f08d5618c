-- Whether an array a job waits for (`--after ARRAY_ID`) still has a task not ended, read at every
-- tick while the job waits: through the tasks not ended only, whatever the array's history
-- (store/tick_jobs.py states_of; the finished tasks are read once, when none is left).
CREATE INDEX jobs_array_unfinished ON jobs (array_id)
    WHERE array_id IS NOT NULL AND state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING');
