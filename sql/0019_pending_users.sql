-- The users with jobs waiting in a group, that every tick reads (job/store/users.py
-- users_of_group): one probe of this index per user, where the group's pending rows were all read
-- (through jobs_pending, 100k of them at 100k pending) to find their thousand users.
CREATE INDEX jobs_pending_user ON jobs (group_name, user_name) WHERE state = 'PENDING';
