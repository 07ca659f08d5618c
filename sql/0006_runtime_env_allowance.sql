-- runtime_env keys a group lets its jobs use beyond those the scheduler knows (job/core/runtime_env.py),
-- taken as they are: `python -m job group set G --allow-runtime-env-key KEY`.
ALTER TABLE resource_groups
    ADD COLUMN allowed_runtime_env_keys text[] NOT NULL DEFAULT '{}';
