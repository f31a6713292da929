-- Several nodes share one delivery queue (CONTRACT §8). One node at a time
-- delivers an organization: the holder of its lease, which it renews while
-- it lives and releases when it stops or the organization's queue empties.
-- A killed node's leases run out after webhooks.lease_ms, and another node
-- takes them.
--
-- Each new holder gets the next epoch. An outbox row's claim is the epoch
-- of the holder that read it into memory (NULL: not read yet), so a new
-- holder takes over every row claimed before it: the same row, so the same
-- delivery id, body and attempt number.
--
-- The previous release reads and writes this schema unchanged: it never
-- reads the new table or column, and its inserts leave claim NULL.
CREATE TABLE delivery_leases (
    organization_id  uuid PRIMARY KEY,
    -- The holder (a node's id for one run), NULL once released.
    node             uuid,
    epoch            bigint NOT NULL DEFAULT 0,
    until            timestamptz NOT NULL DEFAULT '-infinity'
);

-- Every organization has a lease row, so that a node looking for
-- deliveries nobody makes needs only this table and the outbox. The
-- trigger comes first: it locks out inserts until this step commits, so
-- the rows filled in next miss no organization a running node creates.
CREATE FUNCTION organizations_delivery_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO delivery_leases (organization_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER organizations_delivery_lease AFTER INSERT ON organizations
    FOR EACH ROW EXECUTE FUNCTION organizations_delivery_lease();
INSERT INTO delivery_leases (organization_id) SELECT id FROM organizations ON CONFLICT DO NOTHING;

ALTER TABLE outbox ADD COLUMN claim bigint;
