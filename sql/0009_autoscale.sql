-- Autoscaling clusters (job/core/autoscale.py): whether a group tells Ray's autoscaler what its
-- queue needs, and the node types an http:// group's cluster can add (a raycluster:// group's
-- are read from its RayCluster). The table-level grants of 0005_roles cover the new columns:
-- every role reads them, only job_admin writes them (group options), the scheduler never does.
ALTER TABLE resource_groups
    ADD COLUMN autoscale boolean NOT NULL DEFAULT false,
    ADD COLUMN node_types jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(node_types) = 'array');
