-- A tick rewrites the waiting reason of many pending jobs at once. With room left on each page,
-- PostgreSQL can update such rows in place (heap-only tuples: no new index entries, less to
-- vacuum), which makes those updates much cheaper on a long queue. Pages written from now on keep
-- the room.
ALTER TABLE jobs SET (fillfactor = 50);
