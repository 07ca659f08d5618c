-- The queue, its resource groups and users, and what the scheduler keeps between ticks.
-- Names: a letter or digit first, then letters, digits, '.', '_' or '-'; at most 63 characters.

CREATE TABLE installation (
    -- Prefix of every Ray submission_id, so that two databases sharing a Ray cluster never collide.
    id text PRIMARY KEY DEFAULT substr(md5(random()::text || clock_timestamp()::text), 1, 8),
    singleton boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton)
);
INSERT INTO installation DEFAULT VALUES;

CREATE TABLE resource_groups (
    name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    ray_address text NOT NULL CHECK (ray_address ~ '^(https?://|raycluster://)'),
    node_labels jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(node_labels) = 'object'),
    policy text NOT NULL DEFAULT 'fairshare' CHECK (policy IN ('fifo', 'lifo', 'drf', 'fairshare')),
    selector text NOT NULL DEFAULT 'dispersed'
        CHECK (selector IN ('legacy', 'concentrated', 'dispersed', 'roundrobin')),
    resource_priority text[] NOT NULL DEFAULT '{GPU,CPU,memory}',
    half_life_s double precision NOT NULL DEFAULT 3600 CHECK (half_life_s >= 0),
    max_running_per_user integer CHECK (max_running_per_user > 0),
    max_resources_per_user jsonb CHECK (jsonb_typeof(max_resources_per_user) = 'object'),
    strict_order boolean NOT NULL DEFAULT false,
    pending_timeout_s double precision CHECK (pending_timeout_s > 0),
    max_attempts integer NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
    use_head_node boolean NOT NULL DEFAULT false,
    -- End of the last interval whose usage was charged to users (fair share's memory).
    usage_charged_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,62}$'),
    shares double precision NOT NULL DEFAULT 1 CHECK (shares > 0 AND shares < 'Infinity'),
    -- Per-user limits; where set they replace the group's per-user limits.
    max_running integer CHECK (max_running > 0),
    max_resources jsonb CHECK (jsonb_typeof(max_resources) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_name text NOT NULL REFERENCES users (name),
    group_name text NOT NULL REFERENCES resource_groups (name),
    state text NOT NULL DEFAULT 'PENDING' CHECK (state IN (
        'PENDING', 'SUBMITTING', 'SUBMITTED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'STOPPED', 'CANCELLED')),
    entrypoint text NOT NULL CHECK (btrim(entrypoint) <> ''),
    runtime_env jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(runtime_env) = 'object'),
    metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    -- Ray resource name -> amount (memory in bytes), e.g. {"CPU": 1, "memory": 4294967296}.
    resources jsonb NOT NULL CHECK (jsonb_typeof(resources) = 'object'),
    -- Labels a node must carry to run this job, e.g. {"ray.io/accelerator-type": "A100"}.
    node_labels jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(node_labels) = 'object'),
    priority integer NOT NULL DEFAULT 0,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    not_before timestamptz,
    max_runtime_s double precision CHECK (max_runtime_s > 0),
    -- attempt counts submissions started; submission_id and node belong to the current one.
    attempt integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    submission_id text UNIQUE,
    node text,
    ray_status text,
    ray_message text,
    -- Why the job waits or how it ended, for people: a short reason and a sentence.
    reason text,
    message text,
    started_at timestamptz,
    finished_at timestamptz,
    exit_code integer,
    cancel_requested_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (state = 'PENDING' OR state = 'CANCELLED' OR state = 'FAILED' OR submission_id IS NOT NULL)
);

-- A tick reads a group's pending jobs and its active jobs; the CLI lists by user and by recency.
CREATE INDEX jobs_pending ON jobs (group_name, id) WHERE state = 'PENDING';
CREATE INDEX jobs_active ON jobs (group_name) WHERE state IN ('SUBMITTING', 'SUBMITTED', 'RUNNING');
CREATE INDEX jobs_user ON jobs (user_name, id);

-- A small typed document per (group, state name) that a policy or selector keeps between ticks.
CREATE TABLE group_state (
    group_name text NOT NULL REFERENCES resource_groups (name) ON DELETE CASCADE,
    name text NOT NULL,
    document jsonb NOT NULL CHECK (jsonb_typeof(document) = 'object'),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, name)
);

-- Decayed usage U of fair share, in dominant-share-seconds, as of resource_groups.usage_charged_at.
CREATE TABLE user_usage (
    group_name text NOT NULL REFERENCES resource_groups (name) ON DELETE CASCADE,
    user_name text NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    usage double precision NOT NULL DEFAULT 0 CHECK (usage >= 0),
    PRIMARY KEY (group_name, user_name)
);
