-- Reservations for the head of the line, stored by the tick with its intents (docs/planner.md,
-- "Reservations and backfill"), so that the next plan keeps them on the same nodes; and since when
-- a pending job has waited for resources, what `reserve_after` counts from. The table-level grants
-- of 0005_roles cover the new columns: the scheduler updates jobs.
ALTER TABLE jobs
    -- What the reservation of reserved_node is: 'preemption' (its job preempted there) or 'head'
    -- (first in line past reserve_after); the node of each of its job's bundles (NULL: all on
    -- reserved_node); when it is expected to start (a preemption's: when it was made; NULL: not
    -- known). A reservation ends once the group's start timeout has passed since that start.
    ADD COLUMN IF NOT EXISTS reserved_kind text CHECK (reserved_kind IN ('preemption', 'head')),
    ADD COLUMN IF NOT EXISTS reserved_bundle_nodes jsonb
        CHECK (reserved_bundle_nodes IS NULL OR jsonb_typeof(reserved_bundle_nodes) = 'array'),
    ADD COLUMN IF NOT EXISTS reserved_start timestamptz,
    -- When the tick first saw it wait for resources since it became pending (Resources, Reserved,
    -- Preempting); NULL while it waits for anything else, or has not waited yet.
    ADD COLUMN IF NOT EXISTS waiting_since timestamptz;

-- The preemptions' reservations made before this migration.
UPDATE jobs SET reserved_kind = 'preemption', reserved_start = reserved_at
    WHERE reserved_node IS NOT NULL AND reserved_kind IS NULL;
