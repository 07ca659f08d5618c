-- A job's dependencies (`submit --after ID[:ok|any|fail]`, job/core/dependencies.py): the jobs it
-- waits for, and how each must end, as a list of {"job": id, "when": "ok"|"any"|"fail"}; NULL for
-- none (most jobs). A column rather than a table of edges: the tick reads them with the pending
-- rows it reads anyway (no join, no statement of their own), a submit writes them with its one
-- insert (a submitter inserts jobs, no other table), and the edges are never updated. The reverse
-- lookup (`show`'s "before": the jobs that wait for one) goes through the GIN index, by
-- containment: after @> '[{"job": 12}]'.
--
-- Its column grant to job_submitter is migrations.migrate's, from the job fields a submit takes.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS after jsonb
    CHECK (after IS NULL OR jsonb_typeof(after) = 'array');
CREATE INDEX IF NOT EXISTS jobs_after ON jobs USING gin (after jsonb_path_ops) WHERE after IS NOT NULL;

-- A pending job that waited for others (reason 'Dependency') and may now be planned:
-- 'dependency_satisfied', with the states that satisfied it in its message. One that never will
-- ends FAILED, reason 'DependencyNeverSatisfied': 'finished', as every end (job_finished counts it).
CREATE OR REPLACE FUNCTION job_event_kind(from_state text, to_state text, from_reason text, to_reason text,
                                          cancel_asked boolean, victim boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
AS $kind$
    SELECT CASE
        WHEN from_state IS NULL THEN 'queued'
        WHEN from_state = to_state THEN CASE
            WHEN victim AND from_reason IS NOT DISTINCT FROM to_reason THEN 'victim'
            WHEN cancel_asked AND from_reason IS NOT DISTINCT FROM to_reason THEN 'cancel_requested'
            WHEN to_state = 'PENDING' AND from_reason = 'Dependency' THEN 'dependency_satisfied'
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
