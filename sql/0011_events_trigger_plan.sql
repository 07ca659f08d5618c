-- The events trigger's join of a statement's old and new rows, planned anew at each UPDATE.
--
-- PL/pgSQL keeps the plan of a static statement for the session, made at its first run, and
-- transition tables have no statistics but their size at that run. A tick's first UPDATE of a few
-- rows planned the join of old_jobs and new_jobs as a nested loop, which every later UPDATE of
-- the session reused: 20,000 rows in one statement took 230 s in the trigger (n² comparisons),
-- against 2 s with the hash join a fresh plan chooses. EXECUTE plans the statement each time, at
-- the cost of a millisecond of planning per UPDATE statement. The rest of the function is as in
-- 0008 (the INSERT branch joins nothing; the DELETE branch's lookup by job id suits any size).

CREATE OR REPLACE FUNCTION job_events_record() RETURNS trigger
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
        EXECUTE $update$
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
        GROUP BY group_name, kind, state, coalesce(reason, '')
        $update$;
    END IF;
    RETURN NULL;
END
$record$;

-- CREATE OR REPLACE resets the function's settings: its search path again, as in 0008.
DO $path$
BEGIN
    EXECUTE format('ALTER FUNCTION job_events_record() SET search_path = %I, pg_temp', current_schema());
END
$path$;
