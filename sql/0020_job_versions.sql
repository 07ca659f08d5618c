-- Every write to a job marks its row with the writing transaction, whoever writes it and in
-- whatever order the transactions commit: the loop keeps a group's pending rows between its ticks
-- and reads again only the rows written since its last read (job/scheduler/pending.py), against
-- the snapshot it took then. Rows written before this migration have version 0, seen by every snapshot.
ALTER TABLE jobs ADD COLUMN version xid8 NOT NULL DEFAULT '0';

CREATE FUNCTION job_version() RETURNS trigger
    LANGUAGE plpgsql
AS $version$
BEGIN
    NEW.version := pg_current_xact_id();
    RETURN NEW;
END
$version$;

REVOKE EXECUTE ON FUNCTION job_version() FROM PUBLIC;

CREATE TRIGGER jobs_version BEFORE INSERT OR UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION job_version();

-- The unfinished rows of a group written since a snapshot: those at or after its xmin, a few per
-- tick, wherever the history is. A pending job that finished without being placed (cancelled, timed
-- out) is not among them: it shows as a pending count that differs, and all are read again.
CREATE INDEX jobs_group_version ON jobs (group_name, version) WHERE state IN ('PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING');
