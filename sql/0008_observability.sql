-- What happened, kept in PostgreSQL: each job's history (job_events), each group's ticks (ticks),
-- running totals of both that never go down (job_event_totals, tick_totals), and the unfinished
-- jobs counted per group, user, state and reason (job_counts), which the metrics server reads at
-- scrape time instead of counting 100k pending jobs (`python -m job serve`, docs/observability.md).

-- One row per group per tick, written by the tick right after it (job/scheduler/ticks.py), so that
-- what the CronJob's short-lived pods did outlives them. Pruned with the jobs.
CREATE TABLE ticks (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name text NOT NULL REFERENCES resource_groups (name) ON DELETE CASCADE,
    at timestamptz NOT NULL DEFAULT now(),
    outcome text NOT NULL CHECK (outcome IN ('ticked', 'skipped', 'failed')),
    cause text,
    seconds double precision NOT NULL CHECK (seconds >= 0),
    -- Step name -> seconds (observe, reconcile, plan, commit, submit), and the part spent on Ray.
    steps jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(steps) = 'object'),
    ray_seconds double precision NOT NULL DEFAULT 0,
    placed integer NOT NULL DEFAULT 0,
    preempted integer NOT NULL DEFAULT 0,
    running integer NOT NULL DEFAULT 0,
    finished integer NOT NULL DEFAULT 0,
    -- Waiting reason -> jobs, as planned.
    waiting jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(waiting) = 'object'),
    reasons_written integer NOT NULL DEFAULT 0,
    statements integer NOT NULL DEFAULT 0,
    -- The group's alive Ray nodes as the tick saw them: [{"id", "resources", "free"}] in Ray's
    -- names and units ("free" null where Ray did not say). The totals of fair share come from here.
    nodes jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(nodes) = 'array')
);
-- A group's last successful tick, however many failed or skipped ones came since.
CREATE INDEX ticks_group_ticked ON ticks (group_name, id) WHERE outcome = 'ticked';
CREATE INDEX ticks_at ON ticks (at);

-- Per group, outcome and step ('' for the whole tick): how many ticks, their seconds, the last one.
-- Written in the statement that inserts the ticks; a few rows per group, never pruned, so that
-- the counters of the metrics only ever go up.
CREATE TABLE tick_totals (
    group_name text NOT NULL REFERENCES resource_groups (name) ON DELETE CASCADE,
    outcome text NOT NULL,
    step text NOT NULL,
    ticks bigint NOT NULL,
    seconds double precision NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (group_name, outcome, step)
);

-- A job's history: one row per change of its state, of its reason, or of a cancel request, in the
-- transaction of the change, whoever wrote it (the triggers below): never one for a message that
-- only restates figures. Deleted with the job (prune, group remove) by the delete trigger below,
-- one statement per statement: no foreign key, whose check would cost a lookup per event written.
CREATE TABLE job_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    -- queued, waiting, placed, submitted, started, waiting_in_ray, victim, stop_requested,
    -- cancel_requested, requeued, preempted, finished, changed
    kind text NOT NULL,
    from_state text,
    state text NOT NULL,
    reason text,
    message text,
    node text,
    attempt integer,
    -- What the row does not say by itself: at placement, the policy's figures (the tick adds them);
    -- for a victim, the job it makes room for.
    details jsonb
);
CREATE INDEX job_events_job ON job_events (job_id, id);

-- Events counted per group, kind, state and reason ('' for none): placements, requeues and
-- preemptions by reason, finished jobs by state. Never pruned: counters that only go up.
--
-- This table and job_counts hold signed amounts to be summed per key, not one row per key: each
-- statement on jobs adds its own rows, so that no two transactions wait on one counter row (a
-- submit inside a long transaction would hold every other submit of its group). job_fold_counts()
-- sums them into one row per key again; the tick calls it after each round.
CREATE TABLE job_event_totals (
    group_name text NOT NULL REFERENCES resource_groups (name) ON DELETE CASCADE,
    kind text NOT NULL,
    state text NOT NULL,
    reason text NOT NULL,
    count bigint NOT NULL
);

-- Unfinished jobs (PENDING, SUBMITTING, SUBMITTED, RUNNING) per group, user, class, state and
-- waiting reason ('' for none), exact in every transaction's view. `class`: the job's
-- priority_class as it names it ('' for none: the group's default, which the reports put there).
CREATE TABLE job_counts (
    group_name text NOT NULL REFERENCES resource_groups (name) ON DELETE CASCADE,
    user_name text NOT NULL,
    class text NOT NULL,
    state text NOT NULL,
    reason text NOT NULL,
    jobs bigint NOT NULL
);

-- The kind of a change. Reasons an active job gets when the tick asks Ray to stop it
-- (job/core/reconcile.py STOP_REASONS, and a victim's 'Preempted'); tests/test_events.py checks
-- each one.
CREATE FUNCTION job_event_kind(from_state text, to_state text, from_reason text, to_reason text,
                               cancel_asked boolean, victim boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
AS $kind$
    SELECT CASE
        WHEN from_state IS NULL THEN 'queued'
        WHEN from_state = to_state THEN CASE
            WHEN victim AND from_reason IS NOT DISTINCT FROM to_reason THEN 'victim'
            WHEN cancel_asked AND from_reason IS NOT DISTINCT FROM to_reason THEN 'cancel_requested'
            WHEN to_state = 'PENDING' THEN 'waiting'
            WHEN to_reason IN ('Cancelled', 'RuntimeLimit', 'Preempted') THEN 'stop_requested'
            ELSE 'waiting_in_ray' END
        WHEN to_state = 'SUBMITTING' THEN 'placed'
        WHEN to_state = 'SUBMITTED' THEN 'submitted'
        WHEN to_state = 'RUNNING' THEN 'started'
        WHEN to_state = 'PENDING' AND to_reason = 'Preempted' THEN 'preempted'
        WHEN to_state = 'PENDING' THEN 'requeued'
        WHEN to_state IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'CANCELLED') THEN 'finished'
        ELSE 'changed' END
$kind$;

-- Statement triggers with transition tables: one INSERT per table per statement on jobs, whatever
-- the number of rows, and nothing written for rows whose state, reason and cancel request did not
-- change (a message refresh). SECURITY DEFINER: no role needs to write the history or the counts
-- itself, and none can forge them.
CREATE FUNCTION job_events_record() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
AS $record$
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH changes AS (
            SELECT n.id, n.group_name, n.user_name, coalesce(n.priority_class, '') AS class, 'queued' AS kind,
                   NULL::text AS from_state, n.state, n.reason, n.message, n.node, n.attempt
            FROM new_jobs n),
        written AS (
            INSERT INTO job_events (job_id, kind, from_state, state, reason, message, node, attempt)
            SELECT id, kind, from_state, state, reason, message, node, attempt FROM changes ORDER BY id),
        counted AS (
            INSERT INTO job_counts (group_name, user_name, class, state, reason, jobs)
            SELECT group_name, user_name, class, state, coalesce(reason, ''), count(*) FROM changes
            WHERE state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING')
            GROUP BY group_name, user_name, class, state, coalesce(reason, ''))
        INSERT INTO job_event_totals (group_name, kind, state, reason, count)
        SELECT group_name, kind, state, coalesce(reason, ''), count(*) FROM changes
        GROUP BY group_name, kind, state, coalesce(reason, '');
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM job_events WHERE job_id IN (SELECT id FROM old_jobs);
        INSERT INTO job_counts (group_name, user_name, class, state, reason, jobs)
        SELECT group_name, user_name, coalesce(priority_class, ''), state, coalesce(reason, ''), -count(*)
        FROM old_jobs WHERE state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING')
        GROUP BY group_name, user_name, coalesce(priority_class, ''), state, coalesce(reason, '');
    ELSE
        WITH pairs AS (
            SELECT n.id, n.group_name, n.user_name, coalesce(n.priority_class, '') AS class, n.state, n.reason,
                   n.message, n.node, n.attempt, n.preempted_by,
                   o.group_name AS from_group, o.user_name AS from_user,
                   coalesce(o.priority_class, '') AS from_class, o.state AS from_state, o.reason AS from_reason,
                   o.cancel_requested_at IS NULL AND n.cancel_requested_at IS NOT NULL AS cancel_asked,
                   o.preempted_at IS NULL AND n.preempted_at IS NOT NULL AS victim
            FROM new_jobs n JOIN old_jobs o ON o.id = n.id),
        changes AS (
            SELECT *, job_event_kind(from_state, state, from_reason, reason, cancel_asked, victim) AS kind FROM pairs
            WHERE from_state IS DISTINCT FROM state OR from_reason IS DISTINCT FROM reason OR cancel_asked OR victim),
        written AS (
            INSERT INTO job_events (job_id, kind, from_state, state, reason, message, node, attempt, details)
            SELECT id, kind, from_state, state, reason, message, node, attempt,
                   CASE WHEN kind = 'victim' THEN jsonb_build_object('for_job', preempted_by) END
            FROM changes ORDER BY id),
        moved AS (
            SELECT from_group AS group_name, from_user AS user_name, from_class AS class, from_state AS state,
                   from_reason AS reason, -1 AS jobs
            FROM pairs
            WHERE (from_state, from_reason, from_group, from_user, from_class)
                  IS DISTINCT FROM (state, reason, group_name, user_name, class)
            UNION ALL
            SELECT group_name, user_name, class, state, reason, 1 FROM pairs
            WHERE (from_state, from_reason, from_group, from_user, from_class)
                  IS DISTINCT FROM (state, reason, group_name, user_name, class)),
        counted AS (
            INSERT INTO job_counts (group_name, user_name, class, state, reason, jobs)
            SELECT group_name, user_name, class, state, coalesce(reason, ''), sum(jobs) FROM moved
            WHERE state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING')
            GROUP BY group_name, user_name, class, state, coalesce(reason, '') HAVING sum(jobs) <> 0)
        INSERT INTO job_event_totals (group_name, kind, state, reason, count)
        SELECT group_name, kind, state, coalesce(reason, ''), count(*) FROM changes
        GROUP BY group_name, kind, state, coalesce(reason, '');
    END IF;
    RETURN NULL;
END
$record$;

DO $path$
BEGIN
    EXECUTE format('ALTER FUNCTION job_events_record() SET search_path = %I, pg_temp', current_schema());
END
$path$;
REVOKE EXECUTE ON FUNCTION job_events_record() FROM PUBLIC;

CREATE TRIGGER jobs_events_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_events_record();
CREATE TRIGGER jobs_events_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_events_record();
CREATE TRIGGER jobs_events_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_events_record();

-- One row per key again in job_counts and job_event_totals (see above). Concurrent calls are safe:
-- a row another call deleted meanwhile is skipped, and what it summed is that call's to insert.
CREATE FUNCTION job_fold_counts() RETURNS void
    LANGUAGE sql SECURITY DEFINER
AS $fold$
    WITH gone AS (DELETE FROM job_counts RETURNING *)
    INSERT INTO job_counts (group_name, user_name, class, state, reason, jobs)
    SELECT group_name, user_name, class, state, reason, sum(jobs) FROM gone
    GROUP BY group_name, user_name, class, state, reason HAVING sum(jobs) <> 0;
    WITH gone AS (DELETE FROM job_event_totals RETURNING *)
    INSERT INTO job_event_totals (group_name, kind, state, reason, count)
    SELECT group_name, kind, state, reason, sum(count) FROM gone GROUP BY group_name, kind, state, reason;
$fold$;
DO $path$
BEGIN
    EXECUTE format('ALTER FUNCTION job_fold_counts() SET search_path = %I, pg_temp', current_schema());
END
$path$;
REVOKE EXECUTE ON FUNCTION job_fold_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION job_fold_counts() TO job_scheduler, job_admin;

-- Rights (sql/0005_roles.sql): everyone who may read jobs reads their history; the scheduler writes
-- the ticks and the placement's figures of an event; prune deletes old ticks.
GRANT SELECT ON ticks, tick_totals, job_events, job_event_totals, job_counts TO job_reader, job_admin, job_scheduler;
GRANT SELECT ON job_events TO job_submitter;
GRANT INSERT ON ticks TO job_scheduler;
GRANT INSERT, UPDATE ON tick_totals TO job_scheduler;
GRANT DELETE ON ticks TO job_scheduler, job_admin;
GRANT UPDATE (details) ON job_events TO job_scheduler;

-- A submitter sees the history of its own jobs only, as it sees its jobs.
ALTER TABLE job_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY job_events_read ON job_events FOR SELECT TO job_reader, job_admin, job_scheduler USING (true);
CREATE POLICY job_events_details ON job_events FOR UPDATE TO job_scheduler USING (true) WITH CHECK (true);
CREATE POLICY job_events_own ON job_events FOR SELECT TO job_submitter
    USING (EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_events.job_id));
