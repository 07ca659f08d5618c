-- A group spans one or more Ray clusters (job/core/specs.py ClusterSpec): `clusters` lists each
-- one's short name and address, in the order given, and whether it is being removed. A job
-- remembers the cluster it was placed in (`jobs.cluster`): its stop, its logs and its
-- reconciliation go there. NULL, for jobs placed before this migration: the group's first cluster.
ALTER TABLE resource_groups ADD COLUMN clusters jsonb;
-- The name a cluster gets when none is given (specs.cluster_name_of): a RayCluster's own name,
-- else the dashboard's host and port.
UPDATE resource_groups SET clusters = jsonb_build_array(jsonb_build_object(
    'name', CASE WHEN ray_address LIKE 'raycluster://%'
                 THEN left(split_part(ray_address, '/', 4), 63)
                 ELSE left(trim(BOTH '-' FROM regexp_replace(split_part(ray_address, '://', 2), '[^A-Za-z0-9-]+', '-', 'g')), 63)
            END,
    'address', ray_address, 'removing', false));
ALTER TABLE resource_groups
    ALTER COLUMN clusters SET NOT NULL,
    ADD CONSTRAINT resource_groups_clusters CHECK (jsonb_typeof(clusters) = 'array' AND jsonb_array_length(clusters) >= 1),
    -- The most drivers of ours a cluster runs at once; NULL: its head's memory over 100 MB.
    ADD COLUMN max_drivers integer CHECK (max_drivers > 0),
    ADD COLUMN cluster_lost_after_s double precision NOT NULL DEFAULT 120 CHECK (cluster_lost_after_s > 0);

ALTER TABLE jobs ADD COLUMN cluster text;
UPDATE jobs SET cluster = g.clusters -> 0 ->> 'name' FROM resource_groups g
    WHERE g.name = jobs.group_name AND jobs.state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING');
-- The tick drops a cluster being removed once no job of the group is active in it.
GRANT UPDATE (clusters) ON resource_groups TO job_scheduler;

-- The gateway keeps the packages of waiting jobs alive in every cluster of their group: any of
-- them may run the job.
CREATE OR REPLACE FUNCTION gateway_waiting_packages()
    RETURNS TABLE (ray_address text, uri text)
    LANGUAGE sql STABLE SECURITY DEFINER
AS $packages$
    SELECT DISTINCT c ->> 'address', p.uri
    FROM gateway_submissions s
    JOIN jobs j ON j.id = s.job_id
    JOIN resource_groups g ON g.name = j.group_name
    CROSS JOIN LATERAL jsonb_array_elements(g.clusters) c
    CROSS JOIN LATERAL (
        SELECT j.runtime_env ->> 'working_dir' AS uri
        UNION ALL
        SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(j.runtime_env -> 'py_modules') = 'array'
                                              THEN j.runtime_env -> 'py_modules' ELSE '[]' END)) p
    -- Once Ray accepted a job, the job itself holds its packages.
    WHERE j.state IN ('PENDING', 'SUBMITTING') AND p.uri LIKE 'gcs://%'
$packages$;

-- CREATE OR REPLACE drops the function's settings: its search path is set again, as in 0018.
DO $path$
BEGIN
    EXECUTE format('ALTER FUNCTION gateway_waiting_packages() SET search_path = %I, pg_temp', current_schema());
END
$path$;

ALTER TABLE resource_groups DROP COLUMN ray_address;
