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

-- A job that ends wakes the loop for the groups of the pending jobs that wait for it in other
-- groups (sql/0024_wake.sql): its own group's tick, which recorded the end, already planned its
-- dependents there, and a tick of another group that ran before it saw the job unfinished. A row
-- trigger whose WHEN is checked without calling the function; the function reads the dependents
-- through the index jobs_after, for the few jobs a tick ends. SECURITY DEFINER: a submitter's
-- cancel (through job_cancel) and the scheduler alike find every dependent, and tell only groups.
CREATE OR REPLACE FUNCTION job_wake_dependents() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
AS $wake$
BEGIN
    PERFORM pg_notify('job_wake', groups.group_name)
    FROM (SELECT DISTINCT group_name FROM jobs
          WHERE after @> jsonb_build_array(jsonb_build_object('job', NEW.id)) AND after IS NOT NULL
            AND state = 'PENDING' AND group_name <> NEW.group_name) AS groups;
    RETURN NULL;
END
$wake$;

DO $path$
BEGIN
    EXECUTE format('ALTER FUNCTION job_wake_dependents() SET search_path = %I, pg_temp', current_schema());
END
$path$;
REVOKE EXECUTE ON FUNCTION job_wake_dependents() FROM PUBLIC;

DROP TRIGGER IF EXISTS jobs_wake_dependents ON jobs;
CREATE TRIGGER jobs_wake_dependents AFTER UPDATE OF state ON jobs FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'CANCELLED'))
    EXECUTE FUNCTION job_wake_dependents();
