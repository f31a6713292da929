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

-- Passed webhook tests waiting to be saved (seed 4.3: a save needs a
-- passed, unused test of the last 15 minutes), shared so that the test and
-- the save may reach different nodes. The candidate secret is sealed as
-- the endpoint's is when storage.secret_key is set.
CREATE TABLE webhook_tests (
    id                uuid PRIMARY KEY,
    organization_id   uuid NOT NULL,
    url               text NOT NULL,
    events            text[] NOT NULL,
    candidate_secret  text,
    passed_at         timestamptz NOT NULL
);
