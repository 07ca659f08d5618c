-- Failure classes. A job fails only for a fault of its own; an infrastructure fault (Ray lost the
-- submission, Ray's job supervisor failed, the node died under the job, or Ray held the driver past
-- the group's start timeout on a busy node) sends it back to PENDING, keeping its submitted_at, and
-- is counted here instead of against max_attempts.
--
-- jobs.attempt still counts submissions (each has its own submission_id, never reused); of those,
-- `requeues` ended in an infrastructure fault, so attempt - requeues is what max_attempts bounds.
ALTER TABLE jobs
    ADD COLUMN requeues integer NOT NULL DEFAULT 0 CHECK (requeues >= 0),
    -- When Ray accepted the current attempt (it became SUBMITTED), as we saw it, not Ray's time:
    -- from it, how long Ray has held the driver without starting it.
    ADD COLUMN accepted_at timestamptz,
    -- When it last went back to PENDING for an infrastructure fault: its pending timeout counts
    -- from then, its place in the queue still from submitted_at.
    ADD COLUMN requeued_at timestamptz;

ALTER TABLE resource_groups
    -- Requeues for infrastructure faults before a job ends FAILED with the last one.
    ADD COLUMN max_requeues integer NOT NULL DEFAULT 5 CHECK (max_requeues >= 0),
    -- How long Ray may hold a driver PENDING on a node without the free resources for it before
    -- the job is stopped in Ray and requeued (NodeBusy).
    ADD COLUMN start_timeout_s double precision NOT NULL DEFAULT 300 CHECK (start_timeout_s > 0);
