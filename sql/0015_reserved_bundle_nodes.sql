-- A gang that preempted across nodes (job/core/planner/preemption.py) reserves each of its bundles'
-- nodes, beside its driver's `reserved_node`: one node id per bundle, in the bundles' order; NULL
-- for a reservation that holds all of a job on `reserved_node`. Written and cleared with
-- reserved_node by the tick (the table-level grants of 0005_roles cover it).
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS reserved_bundle_nodes jsonb
    CHECK (reserved_bundle_nodes IS NULL OR jsonb_typeof(reserved_bundle_nodes) = 'array');
