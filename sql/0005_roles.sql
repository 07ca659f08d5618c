-- Who may do what: the database is the security boundary. Four group roles without login; an
-- operator grants a login role membership in one of them (docs/operations/roles-and-logins.md).
--
--   job_admin      groups, users and every job: read, add, change, remove (rows, not the schema)
--   job_scheduler  what a tick and `prune` need, no more: read the queue's tables, update jobs,
--                  write usage (user_usage, resource_groups.usage_charged_at) and the selectors'
--                  state (group_state), delete finished jobs; never a group's options or a user
--   job_submitter  a login role whose name is its queue user name: submit as itself only, see and
--                  cancel its own jobs only (row-level security below); read groups and users
--   job_reader     read everything (metrics, status pages)
--
-- Roles belong to the server, not to one database: every database of the server (a test database
-- copied from a template, a second installation) shares them. They are created only where missing,
-- so that migrating a second database, or two at once, finds them made; a role an operator made
-- beforehand is kept as it is (then the migrating role needs no CREATEROLE).
--
-- The migrating role owns the tables: it is not subject to row-level security (not FORCEd) and keeps
-- every privilege. A later migration that adds a table or a column grants it here per role: a new
-- table is read by job_reader and written by job_admin; a column a submit writes is granted to
-- job_submitter's INSERT.

DO $roles$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['job_admin', 'job_scheduler', 'job_submitter', 'job_reader'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- another database's migration made it meanwhile
            END;
        END IF;
    END LOOP;
END
$roles$;

-- Nobody but the owner creates objects in the queue's schema (PostgreSQL 15 and later already
-- revoke it; earlier versions grant it to everyone).
DO $schema$
BEGIN
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO job_admin, job_scheduler, job_submitter, job_reader', current_schema());
END
$schema$;

-- Every role checks that the schema is current before it works.
GRANT SELECT ON schema_migrations TO job_admin, job_scheduler, job_submitter, job_reader;

-- job_reader: everything, read only.
GRANT SELECT ON installation, resource_groups, users, jobs, group_state, user_usage TO job_reader;

-- job_admin: every row of the queue's tables. Not TRUNCATE (it ignores row-level security), nor
-- TRIGGER or REFERENCES; the installation's id and the applied migrations belong to migrations.
GRANT SELECT, INSERT, UPDATE, DELETE ON resource_groups, users, jobs, group_state, user_usage TO job_admin;
GRANT SELECT ON installation TO job_admin;

-- job_scheduler: a tick reads groups, users, usage and jobs; writes jobs' states, the selectors'
-- state, users' usage and when usage was last charged; `prune` deletes finished jobs.
GRANT SELECT ON installation, resource_groups, users, jobs, group_state, user_usage TO job_scheduler;
GRANT UPDATE ON jobs TO job_scheduler;
GRANT DELETE ON jobs TO job_scheduler;
GRANT INSERT, UPDATE ON group_state, user_usage TO job_scheduler;
GRANT UPDATE (usage_charged_at) ON resource_groups TO job_scheduler;

-- job_submitter: reads groups and users (a submit names them); inserts the columns a submit writes
-- (job/store/jobs.py insert_job) and nothing else: no state but PENDING, no submitted_at of its
-- choosing, no attempt or submission id. It cannot update jobs: a cancel goes through job_cancel.
GRANT SELECT ON resource_groups, users TO job_submitter;
GRANT SELECT ON jobs TO job_submitter;
GRANT INSERT (state, user_name, group_name, entrypoint, resources, node_labels, runtime_env, priority, not_before,
              max_runtime_s, metadata, reason, message) ON jobs TO job_submitter;

-- Row-level security on jobs. Policies are permissive: a role sees a row if one of its policies
-- lets it. The owner (migrations, the tests' default connections) is not subject to them.
ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;

CREATE POLICY jobs_admin ON jobs FOR ALL TO job_admin USING (true) WITH CHECK (true);
CREATE POLICY jobs_reader ON jobs FOR SELECT TO job_reader USING (true);
CREATE POLICY jobs_scheduler_read ON jobs FOR SELECT TO job_scheduler USING (true);
CREATE POLICY jobs_scheduler_update ON jobs FOR UPDATE TO job_scheduler USING (true) WITH CHECK (true);
-- `prune` deletes finished jobs only (job/core/states.py FINISHED).
CREATE POLICY jobs_scheduler_prune ON jobs FOR DELETE TO job_scheduler
    USING (state IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'CANCELLED'));
CREATE POLICY jobs_submitter_read ON jobs FOR SELECT TO job_submitter USING (user_name = current_user);
-- A new job of its own, waiting (job/core/states.py INITIAL).
CREATE POLICY jobs_submitter_submit ON jobs FOR INSERT TO job_submitter
    WITH CHECK (user_name = current_user AND state = 'PENDING');

-- Cancel (job/store/jobs.py cancel_jobs): a pending job becomes CANCELLED at once, an active one
-- gets a cancel request that the next tick carries out in Ray. It runs as its owner, so that a
-- submitter, who may not update jobs, can cancel; it cancels only the caller's own jobs unless the
-- caller may update every job (job_admin, the owner). It returns, per id the caller may see, the
-- state before and after (unchanged for a job it did not change); other ids are left out.
--
-- The states come from job/core/states.py (CANCEL_PENDING, REQUEST_CANCEL) as arguments, and are
-- refused unless they are the moves a cancel may make: a caller cannot ask it for any other.
CREATE FUNCTION job_cancel(ids bigint[], cancel_from text[], cancelled text, request_from text[])
    RETURNS TABLE (job_id bigint, state_before text, state_after text)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $cancel$
DECLARE
    -- Here current_user is this function's owner: the caller is the role it SET, else its login.
    caller text := CASE WHEN current_setting('role') = 'none' THEN session_user
                        ELSE current_setting('role') END;
    every_job boolean;
BEGIN
    IF NOT (cancel_from <@ ARRAY['PENDING'] AND cancelled = 'CANCELLED'
            AND request_from <@ ARRAY['SUBMITTING', 'SUBMITTED', 'RUNNING']) THEN
        RAISE EXCEPTION 'a cancel moves a PENDING job to CANCELLED and asks for the stop of a SUBMITTING, '
                        'SUBMITTED or RUNNING one, nothing else'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    every_job := has_table_privilege(caller, 'jobs', 'UPDATE');
    RETURN QUERY
    WITH target AS (
        SELECT j.id, j.state FROM jobs j
        WHERE j.id = ANY(ids) AND (every_job OR j.user_name = caller)
        FOR UPDATE),
    changed AS (
        UPDATE jobs SET
            state = CASE WHEN target.state = ANY(cancel_from) THEN cancelled ELSE jobs.state END,
            finished_at = CASE WHEN target.state = ANY(cancel_from) THEN now() ELSE jobs.finished_at END,
            reason = CASE WHEN target.state = ANY(cancel_from) THEN 'Cancelled' ELSE jobs.reason END,
            message = CASE WHEN target.state = ANY(cancel_from) THEN 'cancelled before it started'
                           ELSE jobs.message END,
            cancel_requested_at = coalesce(jobs.cancel_requested_at, now()),
            updated_at = now()
        FROM target
        WHERE jobs.id = target.id AND (target.state = ANY(cancel_from) OR target.state = ANY(request_from))
        RETURNING jobs.id, target.state AS before, jobs.state AS after)
    SELECT changed.id, changed.before, changed.after FROM changed
    UNION ALL
    SELECT target.id, target.state, target.state FROM target
    WHERE target.id NOT IN (SELECT changed.id FROM changed);
END
$cancel$;

-- A fixed search_path: the queue's schema, then pg_temp last (a caller's temporary table named
-- jobs must not stand in for the queue's).
DO $path$
BEGIN
    EXECUTE format('ALTER FUNCTION job_cancel(bigint[], text[], text, text[]) SET search_path = %I, pg_temp',
                   current_schema());
END
$path$;

REVOKE EXECUTE ON FUNCTION job_cancel(bigint[], text[], text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION job_cancel(bigint[], text[], text, text[]) TO job_admin, job_submitter;
