-- A gateway submission id names a job among its user's own (issue 35), as a Ray cluster's ids name
-- its own jobs. Unique across all users, another user's id was answered "already the id of another
-- job", which told that it existed, and an id could be taken before the user who meant it used it.
--
--   user_name   the job's user, written from the job (job/store/gateway.py name_job); the key is
--               (user_name, submission_id), so each user reuses none of its own ids and any of
--               another's
--
-- The Ray submission id of a queued job is made from its job id (jobs.submission_id): Ray never
-- sees these ids, and nothing else looks one up across users.

ALTER TABLE gateway_submissions ADD COLUMN user_name text;
UPDATE gateway_submissions s SET user_name = j.user_name FROM jobs j WHERE j.id = s.job_id;
ALTER TABLE gateway_submissions ALTER COLUMN user_name SET NOT NULL;
ALTER TABLE gateway_submissions DROP CONSTRAINT gateway_submissions_pkey;
ALTER TABLE gateway_submissions ADD PRIMARY KEY (user_name, submission_id);

-- `.` and `..` are a URL path's own segments: Ray's client's requests to /api/jobs/ID never reach
-- a job of such an id (job/gateway/translate.py refuses them at submit). Rows written before are
-- let be.
ALTER TABLE gateway_submissions ADD CONSTRAINT gateway_submissions_not_dots
    CHECK (submission_id !~ '^\.+$') NOT VALID;

-- A submitter names its own jobs under its own name only: with another user's name beside its job,
-- it would take that user's id.
DROP POLICY IF EXISTS gateway_submissions_own ON gateway_submissions;
CREATE POLICY gateway_submissions_own ON gateway_submissions FOR ALL TO job_submitter
    USING (EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_id))
    WITH CHECK (EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_id AND jobs.user_name = gateway_submissions.user_name));
