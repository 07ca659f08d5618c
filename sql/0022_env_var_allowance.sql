-- env_vars that Ray reads for control (RAY_*, ...; job/core/runtime_env.py RAY_CONTROL) a group lets
-- its jobs set: `python -m job group set G --allow-env-var NAME`.
ALTER TABLE resource_groups
    ADD COLUMN allowed_env_vars text[] NOT NULL DEFAULT '{}';
