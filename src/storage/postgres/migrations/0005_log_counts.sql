-- How many delivery-log records each organization has, kept by the statements
-- that add and remove them (issue 30): keeping a log to its retention then
-- costs what it deletes, not a scan of the records it keeps. Rows are
-- updated often, and only `records` changes: room on each page keeps those
-- updates on the page (HOT), without index writes.
--
-- The previous release reads and writes this schema unchanged; records it
-- adds are not counted, so a node of it running beside this release leaves
-- some logs longer than their retention until they are counted again.
CREATE TABLE delivery_log_counts (
    organization_id  uuid PRIMARY KEY,
    records          bigint NOT NULL
) WITH (fillfactor = 50);
INSERT INTO delivery_log_counts (organization_id, records)
    SELECT organization_id, count(*) FROM delivery_log GROUP BY organization_id;
