-- The loop wakes on what changes a plan, whoever writes it (CLI, API, gateway, plain SQL): a
-- NOTIFY on the channel job_wake, sent at commit, whose payload is the group concerned ('' for
-- every group: a user's or an account's change). job/scheduler/wake.py listens; its --every stays
-- the safety net. NOTIFY folds identical payloads of one transaction into one, so a burst of
-- submits in one transaction wakes the loop once per group. The tick's own writes notify nothing
-- (usage_charged_at, and no cancel or insert of its own), so a tick never wakes the next.
--
-- And when a tick placed a job (committed its intent): with submitted_at, accepted_at (Ray took the
-- submission) and started_at, `show` says where a job's time went before it ran.

ALTER TABLE jobs ADD COLUMN IF NOT EXISTS placed_at timestamptz;

CREATE OR REPLACE FUNCTION job_wake_inserted() RETURNS trigger
    LANGUAGE plpgsql
AS $wake$
BEGIN
    PERFORM pg_notify('job_wake', group_name) FROM (SELECT DISTINCT group_name FROM new_jobs) AS groups;
    RETURN NULL;
END
$wake$;

-- The row's group is in the column that the trigger names.
CREATE OR REPLACE FUNCTION job_wake_group() RETURNS trigger
    LANGUAGE plpgsql
AS $wake$
BEGIN
    PERFORM pg_notify('job_wake', to_jsonb(NEW) ->> TG_ARGV[0]);
    RETURN NULL;
END
$wake$;

CREATE OR REPLACE FUNCTION job_wake_all() RETURNS trigger
    LANGUAGE plpgsql
AS $wake$
BEGIN
    PERFORM pg_notify('job_wake', '');
    RETURN NULL;
END
$wake$;

DROP TRIGGER IF EXISTS jobs_wake_insert ON jobs;
CREATE TRIGGER jobs_wake_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_wake_inserted();

-- A cancel: a stop to send to Ray, or a pending job gone from the plan (it may have held a
-- reservation). Row triggers whose WHEN is checked without calling the function: the tick's
-- updates of thousands of rows pay a comparison each.
DROP TRIGGER IF EXISTS jobs_wake_cancel ON jobs;
CREATE TRIGGER jobs_wake_cancel AFTER UPDATE OF cancel_requested_at, state ON jobs FOR EACH ROW
    WHEN ((OLD.cancel_requested_at IS NULL AND NEW.cancel_requested_at IS NOT NULL)
          OR (OLD.state = 'PENDING' AND NEW.state = 'CANCELLED'))
    EXECUTE FUNCTION job_wake_group('group_name');

-- A group's options; the tick writes only usage_charged_at (and group_state, another table).
DROP TRIGGER IF EXISTS resource_groups_wake_insert ON resource_groups;
CREATE TRIGGER resource_groups_wake_insert AFTER INSERT ON resource_groups FOR EACH ROW
    EXECUTE FUNCTION job_wake_group('name');
DROP TRIGGER IF EXISTS resource_groups_wake_update ON resource_groups;
CREATE TRIGGER resource_groups_wake_update AFTER UPDATE ON resource_groups FOR EACH ROW
    WHEN (to_jsonb(OLD) - 'usage_charged_at' - 'updated_at' IS DISTINCT FROM to_jsonb(NEW) - 'usage_charged_at' - 'updated_at')
    EXECUTE FUNCTION job_wake_group('name');

-- Shares and limits of users and accounts count in every group's plan.
DROP TRIGGER IF EXISTS users_wake ON users;
CREATE TRIGGER users_wake AFTER INSERT OR UPDATE OR DELETE ON users FOR EACH STATEMENT
    EXECUTE FUNCTION job_wake_all();
DROP TRIGGER IF EXISTS accounts_wake ON accounts;
CREATE TRIGGER accounts_wake AFTER INSERT OR UPDATE OR DELETE ON accounts FOR EACH STATEMENT
    EXECUTE FUNCTION job_wake_all();

REVOKE EXECUTE ON FUNCTION job_wake_inserted(), job_wake_group(), job_wake_all() FROM PUBLIC;
