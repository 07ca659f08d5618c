-- Priority classes and preemption (docs/planner.md, "Priority classes and preemption").
--
-- A group lists its classes, each a name, an integer value and whether its jobs may be stopped to
-- make room; one is its default. A job names its class at submit (NULL: the group's default).
ALTER TABLE resource_groups
    ADD COLUMN priority_classes jsonb NOT NULL DEFAULT '[{"name": "default", "value": 0, "preemptible": true}]'
        CHECK (jsonb_typeof(priority_classes) = 'array' AND jsonb_array_length(priority_classes) > 0),
    ADD COLUMN default_class text NOT NULL DEFAULT 'default',
    ADD COLUMN preemption text NOT NULL DEFAULT 'off' CHECK (preemption IN ('off', 'priority', 'fairshare')),
    -- A job is never stopped before it ran this long.
    ADD COLUMN min_runtime_s double precision NOT NULL DEFAULT 600 CHECK (min_runtime_s >= 0),
    -- At most this many victims per tick.
    ADD COLUMN max_preemptions integer NOT NULL DEFAULT 10 CHECK (max_preemptions >= 0);

ALTER TABLE jobs
    ADD COLUMN priority_class text,
    -- A victim: when the tick decided to stop it, and for which job. Set with the decision, before
    -- Ray is asked to stop it; it goes back to PENDING once Ray reports it stopped.
    ADD COLUMN preempted_at timestamptz,
    ADD COLUMN preempted_by bigint,
    -- Times it went back to PENDING after being preempted: neither attempts nor requeues.
    ADD COLUMN preemptions integer NOT NULL DEFAULT 0 CHECK (preemptions >= 0),
    -- A pending job that preempted: the node whose room it holds, and since when (the hold ends
    -- when it starts, is cancelled, or is older than the group's start timeout).
    ADD COLUMN reserved_node text,
    ADD COLUMN reserved_at timestamptz;

-- Submitters name a class; the scheduler writes the rest (its UPDATE covers every column already).
GRANT INSERT (priority_class) ON jobs TO job_submitter;
