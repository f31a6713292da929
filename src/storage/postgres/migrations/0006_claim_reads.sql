-- Which read marked an outbox row (issue 30). A holder marks the rows it
-- reads into memory with its epoch (`claim`) and, now, with the number of
-- the statement that read them (`claim_read`, counted by each node run).
-- When that statement's answer is lost (the connection cut while it ran),
-- the rows it marked are in no node's memory although they carry the
-- holder's epoch: the holder's next reads take them again by that number,
-- instead of leaving them until its lease changes hands.
--
-- The previous release reads and writes this schema unchanged: it never
-- reads the column, and the rows it marks leave it NULL.
ALTER TABLE outbox ADD COLUMN claim_read bigint;

-- Room on each outbox page: the update that marks a row read then stays on
-- its page (HOT: no new index entry, and WAL of the changed bytes only)
-- instead of copying the whole row, its envelope included, to another page.
ALTER TABLE outbox SET (fillfactor = 70);
