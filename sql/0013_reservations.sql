-- Reservations for the head of the line (docs/planner.md, "Reservations and backfill"): the job
-- first in line of its class that has waited this long for resources reserves the node where it
-- fits soonest, and backfill may not delay it; at most max_reservations at a time (0: none).
ALTER TABLE resource_groups
    ADD COLUMN reserve_after_s double precision NOT NULL DEFAULT 300 CHECK (reserve_after_s >= 0),
    ADD COLUMN max_reservations integer NOT NULL DEFAULT 1 CHECK (max_reservations >= 0);
