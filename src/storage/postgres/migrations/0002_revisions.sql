-- Several nodes on one database: every organization carries a revision,
-- which each change of its state (the organization, a role, a member, the
-- webhook) moves up by exactly one. A node reloads a snapshot whose
-- revision is behind the database's, and a change decided on an older
-- revision than the database holds is refused (SQLSTATE RC004): the node
-- reloads and decides again. So racing nodes serialize per organization
-- as one node's organization actor does.
ALTER TABLE organizations ADD COLUMN revision bigint NOT NULL DEFAULT 0;

CREATE FUNCTION organizations_revision_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revision IS DISTINCT FROM OLD.revision + 1 THEN
        RAISE EXCEPTION 'organization % is at revision %, the change was decided on revision %',
            OLD.id, OLD.revision, NEW.revision - 1
            USING ERRCODE = 'RC004';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER organizations_revision_guard BEFORE UPDATE ON organizations
    FOR EACH ROW EXECUTE FUNCTION organizations_revision_guard();
