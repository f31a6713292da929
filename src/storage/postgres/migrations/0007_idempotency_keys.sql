-- Idempotency keys (issue 31): per scope, the SHA-256 of the token, the
-- organization and the key (neither token nor key is kept), the
-- fingerprint of the request that used it, and either a claim of that
-- request while it runs or its answer, until `live_until` (the claim's
-- lapse, or the answer's expiry: `api.idempotency_ttl_hours`). Rows past
-- it count as absent and are deleted in batches.
--
-- The previous release reads and writes this schema unchanged: it never
-- reads the table.
CREATE TABLE idempotency_keys (
    scope        bytea PRIMARY KEY CHECK (octet_length(scope) = 32),
    fingerprint  bytea NOT NULL CHECK (octet_length(fingerprint) = 32),
    answered     boolean NOT NULL,
    live_until   timestamptz NOT NULL,
    -- The answer, once there is one: status, the headers a replay repeats
    -- (a JSON array of [name, value]) and the body.
    status       integer,
    headers      json,
    body         bytea
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (live_until);
