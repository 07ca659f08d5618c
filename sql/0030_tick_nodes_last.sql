-- A group's nodes are kept on its last successful tick only: the status page and the metrics read
-- that one (store/reports.py), and a list of every node written into each tick's row made the
-- table grow by the whole list every few seconds (bench/clusters.py: 10,000 nodes, about 3 MB a
-- tick). The tick that records a successful tick empties the list of the group's earlier ones, in
-- the same statement (store/ticks.py record).
UPDATE ticks SET nodes = '[]'
    WHERE nodes <> '[]' AND id NOT IN (SELECT max(id) FROM ticks WHERE outcome = 'ticked' GROUP BY group_name);
CREATE INDEX IF NOT EXISTS ticks_with_nodes ON ticks (group_name) WHERE nodes <> '[]';
GRANT UPDATE (nodes) ON ticks TO job_scheduler;
