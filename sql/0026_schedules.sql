-- Schedules (issue 38): a job template submitted by the tick at each slot of a cron expression or
-- a period. A slot is a row of schedule_slots, keyed by (schedule, slot instant), written with its
-- job in one transaction: a second loop or a crash between the two never makes a slot's job twice.
--
--   template             the submit's fields as JSON, keyed by their jobs column (job/core/job.py
--                        SUBMITTED), but user_name and group_name, which are the schedule's
--   cron, every_s        one of them: a 5-field cron expression read in `timezone`, or a period
--   concurrency          allow, forbid (skip a slot while the last run is not ended) or replace
--                        (cancel the last run, then submit)
--   starting_deadline_s  a slot missed by more than this is skipped (NULL: never skipped)
--   created_at           a period's slots count from it, and no cron slot before it runs
--
-- A slot's outcome is `submitted` (its job_id set in the same transaction) or `skipped` (message:
-- why). Jobs carry the schedule and slot that made them; a submit cannot set them.

CREATE TABLE schedules (
    name text PRIMARY KEY,
    user_name text NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    group_name text NOT NULL REFERENCES resource_groups (name) ON DELETE CASCADE,
    template jsonb NOT NULL,
    cron text,
    every_s double precision CHECK (every_s > 0),
    timezone text NOT NULL DEFAULT 'UTC',
    concurrency text NOT NULL DEFAULT 'allow' CHECK (concurrency IN ('allow', 'forbid', 'replace')),
    starting_deadline_s double precision CHECK (starting_deadline_s > 0),
    paused boolean NOT NULL DEFAULT false,
    -- A whole second: a period's slots fall on whole seconds.
    created_at timestamptz NOT NULL DEFAULT date_trunc('second', now()),
    CHECK ((cron IS NULL) <> (every_s IS NULL))
);
CREATE INDEX schedules_group ON schedules (group_name) WHERE NOT paused;

CREATE TABLE schedule_slots (
    schedule_name text NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
    slot timestamptz NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('submitted', 'skipped')),
    job_id bigint,
    message text,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule_name, slot)
);

ALTER TABLE jobs ADD COLUMN schedule text, ADD COLUMN slot timestamptz;

-- Roles (sql/0005_roles.sql): a submitter manages its own schedules and reads their slots, an
-- admin every one; the tick reads schedules, writes slots and inserts their jobs, and cancels a
-- last run for `replace` through job_cancel, as `cancel` does.
GRANT SELECT ON schedules, schedule_slots TO job_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON schedules, schedule_slots TO job_admin;
GRANT SELECT ON schedules TO job_scheduler;
GRANT SELECT, INSERT, UPDATE (job_id, outcome, message) ON schedule_slots TO job_scheduler;
GRANT INSERT ON jobs TO job_scheduler;
GRANT EXECUTE ON FUNCTION job_cancel(bigint[], text[], text, text[]) TO job_scheduler;
GRANT SELECT, INSERT, DELETE, UPDATE (paused) ON schedules TO job_submitter;
GRANT SELECT ON schedule_slots TO job_submitter;

ALTER TABLE schedules ENABLE ROW LEVEL SECURITY;
CREATE POLICY schedules_admin ON schedules FOR ALL TO job_admin USING (true) WITH CHECK (true);
CREATE POLICY schedules_read ON schedules FOR SELECT TO job_reader, job_scheduler USING (true);
CREATE POLICY schedules_own ON schedules FOR ALL TO job_submitter
    USING (user_name = current_user) WITH CHECK (user_name = current_user);

ALTER TABLE schedule_slots ENABLE ROW LEVEL SECURITY;
CREATE POLICY schedule_slots_admin ON schedule_slots FOR ALL TO job_admin, job_scheduler USING (true) WITH CHECK (true);
CREATE POLICY schedule_slots_reader ON schedule_slots FOR SELECT TO job_reader USING (true);
-- The slots of the schedules it sees: its own (schedules' policy above).
CREATE POLICY schedule_slots_own ON schedule_slots FOR SELECT TO job_submitter
    USING (EXISTS (SELECT 1 FROM schedules WHERE schedules.name = schedule_name));

-- The tick inserts only a schedule's pending jobs.
CREATE POLICY jobs_scheduler_schedule ON jobs FOR INSERT TO job_scheduler
    WITH CHECK (schedule IS NOT NULL AND slot IS NOT NULL AND state = 'PENDING');

-- A schedule added, paused or resumed changes when its group's tick has work (sql/0024_wake.sql).
CREATE TRIGGER schedules_wake AFTER INSERT OR UPDATE ON schedules FOR EACH ROW
    EXECUTE FUNCTION job_wake_group('group_name');
