-- Job arrays (`submit --array SPEC`, job/core/arrays.py): one job per index, each a row of its own
-- with the same options, so that the tick, `cancel`, the history and the events treat a task as
-- any job. Three columns, not a table of arrays: the tick reads the throttle with the pending row
-- it reads anyway (no join, no statement of its own), and an array is one INSERT of its rows.
--
-- array_id is the id of the array's first task: the submit inserts the first task with none, which
-- this trigger sets to its own id, then the others naming it, in one statement (store/jobs.py).
ALTER TABLE jobs
    ADD COLUMN array_id bigint,
    ADD COLUMN array_index integer CHECK (array_index BETWEEN 0 AND 1000000),
    ADD COLUMN array_throttle integer CHECK (array_throttle BETWEEN 1 AND 10000),
    ADD CONSTRAINT jobs_array_task CHECK ((array_index IS NULL) = (array_id IS NULL));

CREATE FUNCTION job_array_first() RETURNS trigger
    LANGUAGE plpgsql
AS $first$
BEGIN
    NEW.array_id := NEW.id;
    RETURN NEW;
END
$first$;

REVOKE EXECUTE ON FUNCTION job_array_first() FROM PUBLIC;

CREATE TRIGGER jobs_array_first BEFORE INSERT ON jobs FOR EACH ROW
    WHEN (NEW.array_index IS NOT NULL AND NEW.array_id IS NULL) EXECUTE FUNCTION job_array_first();

-- An array's tasks in index order: `jobs --array ID`, `cancel ID`, `show ID`'s summary.
CREATE INDEX jobs_array ON jobs (array_id, array_index) WHERE array_id IS NOT NULL;
-- `jobs`: newest first, an array as one line, by its id; read backward and stopped at the limit.
CREATE INDEX jobs_listed ON jobs ((coalesce(array_id, id)));
