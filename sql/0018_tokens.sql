-- The gateway (`python -m job gateway`, job/gateway/): Ray's Job Submission API in front of the
-- queue, for callers that hold a bearer token instead of a PostgreSQL login.
--
--   tokens               a token's SHA-256 (the token itself is shown once, never stored), its
--                        user, when it expires, when it was revoked
--   gateway_submissions  the submission id a Ray client knows a job by (its own or one the gateway
--                        made), unique, beside the queue's job
--   job_gateway          the gateway's role: it reads tokens, and may SET ROLE to a token's user
--                        (`token create` grants it that user's role), so that the user's
--                        row-level security of sql/0005_roles.sql confines what it does. NOINHERIT:
--                        outside SET ROLE it holds none of those users' rights.

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'job_gateway') THEN
        BEGIN
            CREATE ROLE job_gateway NOLOGIN NOINHERIT;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- another database's migration made it meanwhile
        END;
    END IF;
END
$roles$;

DO $schema$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO job_gateway', current_schema());
END
$schema$;

CREATE TABLE IF NOT EXISTS tokens (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_name text NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    -- sha256 of the token: a token is 32 random bytes, so a plain hash cannot be guessed back.
    hash bytea NOT NULL UNIQUE CHECK (length(hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz
);

CREATE TABLE IF NOT EXISTS gateway_submissions (
    submission_id text PRIMARY KEY CHECK (submission_id ~ '^[A-Za-z0-9_.-]{1,128}$'),
    job_id bigint NOT NULL UNIQUE REFERENCES jobs (id) ON DELETE CASCADE
);

GRANT SELECT ON schema_migrations TO job_gateway;
GRANT SELECT (user_name, hash, expires_at, revoked_at) ON tokens TO job_gateway;

GRANT SELECT ON tokens, gateway_submissions TO job_reader, job_scheduler;
GRANT SELECT, INSERT, UPDATE, DELETE ON tokens, gateway_submissions TO job_admin;
-- A submitter (and the gateway acting as one) names its own jobs; row-level security below.
GRANT SELECT, INSERT, DELETE ON gateway_submissions TO job_submitter;

ALTER TABLE gateway_submissions ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS gateway_submissions_all ON gateway_submissions;
CREATE POLICY gateway_submissions_all ON gateway_submissions FOR ALL TO job_admin USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS gateway_submissions_read ON gateway_submissions;
CREATE POLICY gateway_submissions_read ON gateway_submissions FOR SELECT TO job_reader, job_scheduler USING (true);
-- The subquery reads jobs under the caller's own row-level security: its own jobs only.
DROP POLICY IF EXISTS gateway_submissions_own ON gateway_submissions;
CREATE POLICY gateway_submissions_own ON gateway_submissions FOR ALL TO job_submitter
    USING (EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_id))
    WITH CHECK (EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_id));

-- A `--working-dir` package uploaded through the gateway lives in the Ray cluster's GCS unpinned
-- for RAY_RUNTIME_ENV_TEMPORARY_REFERENCE_EXPIRATION_S (600 s) until a job of Ray's uses it; a job
-- waiting longer in the queue would find it gone. The gateway pins the packages of waiting jobs
-- again every few minutes (job/gateway/server.py), and learns them here: the URIs and their
-- clusters only, not the jobs, which its own login may not read.
CREATE OR REPLACE FUNCTION gateway_waiting_packages()
    RETURNS TABLE (ray_address text, uri text)
    LANGUAGE sql STABLE SECURITY DEFINER
AS $packages$
    SELECT DISTINCT g.ray_address, p.uri
    FROM gateway_submissions s
    JOIN jobs j ON j.id = s.job_id
    JOIN resource_groups g ON g.name = j.group_name
    CROSS JOIN LATERAL (
        SELECT j.runtime_env ->> 'working_dir' AS uri
        UNION ALL
        SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(j.runtime_env -> 'py_modules') = 'array'
                                              THEN j.runtime_env -> 'py_modules' ELSE '[]' END)) p
    -- Once Ray accepted a job, the job itself holds its packages.
    WHERE j.state IN ('PENDING', 'SUBMITTING') AND p.uri LIKE 'gcs://%'
$packages$;

DO $path$
BEGIN
    EXECUTE format('ALTER FUNCTION gateway_waiting_packages() SET search_path = %I, pg_temp', current_schema());
END
$path$;

REVOKE EXECUTE ON FUNCTION gateway_waiting_packages() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gateway_waiting_packages() TO job_gateway;
