-- rolecall schema, version 1: the whole single-node service.
--
-- Ids are uuid (time-ordered v7, so ordering by id is ordering by creation),
-- times are timestamptz, payloads are json. Event envelopes keep their exact
-- bytes (json, unlike jsonb, stores the text as given): a re-sent attempt
-- must carry the very body that was signed. Query them with ->, ->> or a
-- cast to jsonb.

CREATE TABLE users (
    id            uuid PRIMARY KEY,
    email         text NOT NULL,
    -- The email as compared (NFKC, case-folded): one account per address.
    email_folded  text NOT NULL UNIQUE,
    name          text,
    created_at    timestamptz NOT NULL
);

CREATE TABLE tokens (
    -- Only the SHA-256 of a token is stored.
    sha256      bytea PRIMARY KEY CHECK (octet_length(sha256) = 32),
    id          uuid NOT NULL UNIQUE,
    user_id     uuid NOT NULL REFERENCES users (id),
    kind        text NOT NULL CHECK (kind IN ('session', 'api')),
    name        text,
    created_at  timestamptz NOT NULL
);
CREATE INDEX tokens_by_user ON tokens (user_id);

CREATE TABLE organizations (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    plan        text NOT NULL CHECK (plan IN ('free', 'pro', 'enterprise')),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE roles (
    organization_id  uuid NOT NULL REFERENCES organizations (id) DEFERRABLE INITIALLY DEFERRED,
    id               uuid NOT NULL,
    name             text NOT NULL,
    description      text NOT NULL,
    -- Permission keys, sorted ("org:team:read", ...).
    permissions      text[] NOT NULL,
    is_immutable     boolean NOT NULL,
    is_system        boolean NOT NULL,
    revision         bigint NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (organization_id, id),
    CHECK (is_system OR NOT is_immutable)
);
-- Seed 2.4: exactly one Owner (immutable) and one Member (system) role.
CREATE UNIQUE INDEX roles_one_owner ON roles (organization_id) WHERE is_immutable;
CREATE UNIQUE INDEX roles_one_member ON roles (organization_id) WHERE is_system AND NOT is_immutable;

-- Seed 2.4 in the database itself: the Owner role never changes, the
-- Member role is never deleted, and no role changes kind. Errors carry
-- their own SQLSTATEs, which the engine maps back to the API's errors.
CREATE FUNCTION roles_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.is_immutable THEN
            RAISE EXCEPTION 'the Owner role is immutable' USING ERRCODE = 'RC001';
        ELSIF OLD.is_system THEN
            RAISE EXCEPTION 'the Member role cannot be deleted' USING ERRCODE = 'RC002';
        END IF;
        RETURN OLD;
    END IF;
    IF (OLD.is_immutable, OLD.is_system) IS DISTINCT FROM (NEW.is_immutable, NEW.is_system) THEN
        RAISE EXCEPTION 'a role cannot change kind' USING ERRCODE = 'RC003';
    END IF;
    IF OLD.is_immutable AND OLD IS DISTINCT FROM NEW THEN
        RAISE EXCEPTION 'the Owner role is immutable' USING ERRCODE = 'RC001';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER roles_guard BEFORE UPDATE OR DELETE ON roles
    FOR EACH ROW EXECUTE FUNCTION roles_guard();

CREATE TABLE memberships (
    organization_id  uuid NOT NULL,
    user_id          uuid NOT NULL REFERENCES users (id),
    email            text NOT NULL,
    role_id          uuid NOT NULL,
    joined_at        timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (organization_id, user_id),
    -- No membership is left on a deleted role (seed ROLE_IN_USE).
    FOREIGN KEY (organization_id, role_id) REFERENCES roles (organization_id, id)
        DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX memberships_by_user ON memberships (user_id);

CREATE TABLE webhooks (
    organization_id  uuid PRIMARY KEY REFERENCES organizations (id) DEFERRABLE INITIALLY DEFERRED,
    url              text NOT NULL,
    events           text[] NOT NULL,
    -- "whsec_..." in clear, or sealed with storage.secret_key
    -- (XChaCha20-Poly1305, the organization id as associated data).
    secret           text NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);

CREATE TABLE audit_log (
    organization_id  uuid NOT NULL,
    id               uuid NOT NULL,
    actor_user_id    uuid,
    action           text NOT NULL,
    target_type      text NOT NULL,
    target_id        text NOT NULL,
    before           json,
    after            json,
    request_id       text NOT NULL,
    occurred_at      timestamptz NOT NULL,
    PRIMARY KEY (organization_id, id)
);
CREATE INDEX audit_log_by_action ON audit_log (organization_id, action, id);

-- Workspace resources (tasks, decisions, ...): their REST representation.
CREATE TABLE resources (
    organization_id  uuid NOT NULL,
    kind             text NOT NULL,
    id               uuid NOT NULL,
    parent_id        uuid,
    data             json NOT NULL,
    PRIMARY KEY (organization_id, kind, id)
);
CREATE INDEX resources_by_parent ON resources (organization_id, kind, parent_id, id)
    WHERE parent_id IS NOT NULL;

-- Deliveries waiting for their next attempt.
CREATE TABLE outbox (
    organization_id  uuid NOT NULL,
    delivery_id      uuid NOT NULL,
    event            text NOT NULL,
    body             json NOT NULL,
    attempts_made    smallint NOT NULL,
    due_at           timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    PRIMARY KEY (organization_id, delivery_id)
);

CREATE TABLE delivery_log (
    organization_id  uuid NOT NULL,
    id               uuid NOT NULL,
    delivery_id      uuid NOT NULL,
    event            text NOT NULL,
    attempt          smallint,
    outcome          text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'skipped')),
    response_code    integer,
    response_body    text,
    latency_ms       bigint,
    error            text,
    attempted_at     timestamptz NOT NULL,
    envelope         json NOT NULL,
    PRIMARY KEY (organization_id, id)
);
CREATE INDEX delivery_log_by_delivery ON delivery_log (organization_id, delivery_id, id);

-- The generated admin token's SHA-256: one for the whole installation.
CREATE TABLE admin_token (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    sha256     bytea NOT NULL CHECK (octet_length(sha256) = 32)
);
