-- Accounts (teams) above users: fair share goes down the tree, accounts first, then the people in
-- an account (docs/planner.md, "Accounts"). A user in no account is in the root, beside the top
-- accounts: an installation that defines none plans as before. Idempotent, like every migration.
CREATE TABLE IF NOT EXISTS accounts (
    name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    -- NULL: a top account, child of the root.
    parent text REFERENCES accounts (name) CHECK (parent <> name),
    shares double precision NOT NULL DEFAULT 1 CHECK (shares > 0 AND shares < 'Infinity'),
    -- Limits on the whole subtree's jobs, per group: running jobs, resources held.
    max_running integer CHECK (max_running > 0),
    max_resources jsonb CHECK (jsonb_typeof(max_resources) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS accounts_parent ON accounts (parent);

ALTER TABLE users ADD COLUMN IF NOT EXISTS account text REFERENCES accounts (name);
CREATE INDEX IF NOT EXISTS users_account ON users (account);

-- A parent below its own child would make a cycle, which the planner could not walk: refused
-- here, whoever writes the row, under a lock that serializes changes of the tree.
CREATE OR REPLACE FUNCTION accounts_no_cycle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.parent IS NULL THEN
        RETURN NEW;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('accounts_tree'));
    IF EXISTS (
        WITH RECURSIVE up (name, parent) AS (
            SELECT name, parent FROM accounts WHERE name = NEW.parent
            UNION
            SELECT a.name, a.parent FROM accounts a JOIN up ON a.name = up.parent
        )
        SELECT 1 FROM up WHERE name = NEW.name
    ) THEN
        RAISE EXCEPTION 'account %: parent % is below it, which would make a cycle', NEW.name, NEW.parent
            USING ERRCODE = 'check_violation', CONSTRAINT = 'accounts_no_cycle';
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS accounts_no_cycle ON accounts;
CREATE TRIGGER accounts_no_cycle BEFORE INSERT OR UPDATE OF parent ON accounts
    FOR EACH ROW EXECUTE FUNCTION accounts_no_cycle();

-- Read by everyone who reads users (a tick's snapshot, share, serve, a submit naming its user);
-- written by admins only (sql/0005_roles.sql).
GRANT SELECT ON accounts TO job_reader, job_scheduler, job_submitter;
GRANT SELECT, INSERT, UPDATE, DELETE ON accounts TO job_admin;
