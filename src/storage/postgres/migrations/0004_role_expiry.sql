-- Role assignments that expire (issue 18): when role_expires_at passes, the
-- membership falls back to the Member role. NULL: the assignment runs until
-- changed. The index serves the sweep that records each fall-back.
--
-- The previous release reads and writes this schema unchanged: it never
-- reads the column, and its upserts leave it as it is.
ALTER TABLE memberships ADD COLUMN role_expires_at timestamptz;
CREATE INDEX memberships_role_expiry ON memberships (role_expires_at)
    WHERE role_expires_at IS NOT NULL;
