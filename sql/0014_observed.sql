-- What our running jobs really hold in Ray (job/core/observed.py): each job's last observed use,
-- written by the tick when it changed (declared, used and charged totals, its use per node, its
-- placement groups, actors and tasks, and since when it has used more than it declared); kept
-- once the job ended, for `show`. And the group options on over-use: `--overuse allow|stop`,
-- `--overuse-grace`. The table-level grants of 0005_roles cover the new columns: the scheduler
-- updates jobs, only job_admin writes group options.
ALTER TABLE jobs ADD COLUMN observed jsonb CHECK (observed IS NULL OR jsonb_typeof(observed) = 'object');

ALTER TABLE resource_groups
    ADD COLUMN overuse text NOT NULL DEFAULT 'allow' CHECK (overuse IN ('allow', 'stop')),
    ADD COLUMN overuse_grace_s double precision NOT NULL DEFAULT 60 CHECK (overuse_grace_s >= 0);

-- A job stopped for its over-use ('OverUse', job/core/reconcile.py STOP_REASONS) is a stop request
-- like the others.
CREATE OR REPLACE FUNCTION job_event_kind(from_state text, to_state text, from_reason text, to_reason text,
                                          cancel_asked boolean, victim boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
AS $kind$
    SELECT CASE
        WHEN from_state IS NULL THEN 'queued'
        WHEN from_state = to_state THEN CASE
            WHEN victim AND from_reason IS NOT DISTINCT FROM to_reason THEN 'victim'
            WHEN cancel_asked AND from_reason IS NOT DISTINCT FROM to_reason THEN 'cancel_requested'
            WHEN to_state = 'PENDING' THEN 'waiting'
            WHEN to_reason IN ('Cancelled', 'RuntimeLimit', 'OverUse', 'Preempted') THEN 'stop_requested'
            ELSE 'waiting_in_ray' END
        WHEN to_state = 'SUBMITTING' THEN 'placed'
        WHEN to_state = 'SUBMITTED' THEN 'submitted'
        WHEN to_state = 'RUNNING' THEN 'started'
        WHEN to_state = 'PENDING' AND to_reason = 'Preempted' THEN 'preempted'
        WHEN to_state = 'PENDING' THEN 'requeued'
        WHEN to_state IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'CANCELLED') THEN 'finished'
        ELSE 'changed' END
$kind$;
