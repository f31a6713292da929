-- Endpoint status (issue 32, CONTRACT §10): an endpoint that answered 410
-- Gone, or kept failing, is disabled until a passing test and a save.
-- disabled_at and disabled_reason are set together; failing_since is the
-- start of the run of failed attempts under way.
--
-- The previous release reads and writes this schema unchanged: it never
-- reads the columns, and its upserts leave them as they are.
ALTER TABLE webhooks
    ADD COLUMN disabled_at timestamptz,
    ADD COLUMN disabled_reason text
        CHECK (disabled_reason IN ('gone', 'failing')),
    ADD COLUMN failing_since timestamptz,
    ADD CONSTRAINT webhooks_disabled_together
        CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL));
