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

-- The rows of a group written since a snapshot: those at or after its xmin, as many as were written
-- since, a few per tick, whatever the size of the history. Finished ones too: a job placed and
-- ended within one tick, or cancelled while pending, has left the pending rows kept.
CREATE INDEX jobs_group_version ON jobs (group_name, version);
