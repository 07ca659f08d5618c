-- A job's bundles (issue 20): what its work needs beside the driver, placed all or nothing with it
-- (job/core/planner/gang.py), and the node the plan chose for each. NULL bundles: a job of its
-- driver alone, read by the tick as before. Submitters insert bundles and bundle_strategy through
-- the column grants of store/migrations.py (SUBMIT_COLUMNS); bundle_nodes is the scheduler's, as node.
ALTER TABLE jobs
    ADD COLUMN bundles jsonb CHECK (jsonb_typeof(bundles) = 'array' AND jsonb_array_length(bundles) > 0),
    ADD COLUMN bundle_strategy text CHECK (bundle_strategy IN ('PACK', 'SPREAD', 'STRICT_PACK', 'STRICT_SPREAD')),
    -- One node id per bundle, in the bundles' order: written with node by the tick's intent.
    ADD COLUMN bundle_nodes jsonb CHECK (jsonb_typeof(bundle_nodes) = 'array'),
    ADD CONSTRAINT jobs_bundle_strategy_with_bundles CHECK ((bundles IS NULL) = (bundle_strategy IS NULL));
