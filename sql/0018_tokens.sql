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
