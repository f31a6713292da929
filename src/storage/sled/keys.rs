//! Tree names (versioned) and key layouts. Keys start with the owning
//! organization's id where there is one, so per-org scans are prefix scans
//! and no lookup can cross organizations by accident.

use crate::domain::resources::ResourceKind;
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, ResourceId, RoleId, TokenId, UserId};

/// Every tree, with its versioned name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeName {
    /// user id → User
    Users,
    /// folded email → user id
    UserEmails,
    /// token SHA-256 → TokenRecord
    Tokens,
    /// token id → token SHA-256
    TokenIds,
    /// org id → Organization
    Orgs,
    /// org id | role id → Role
    Roles,
    /// org id | user id → Membership
    Members,
    /// org id | audit id (time-ordered) → AuditRecord
    Audit,
    /// name → value: schema version, admin token hash
    Meta,
    /// org id → WebhookEndpoint
    Webhooks,
    /// org id | delivery id (time-ordered) → Job
    Outbox,
    /// org id | log id (time-ordered) → LogRecord
    DeliveryLog,
    /// org id | kind tag | resource id (time-ordered) → resource
    Resources,
    /// org id | user id → Timestamp: when that member's role assignment
    /// ends (a tree of its own, so memberships keep their encoding)
    MemberExpiries,
    /// org id → where that organization's backlog file stands (`spill`)
    Spills,
    /// org id | delivery id | log id → nothing: each delivery-log record by
    /// its delivery, so that a lookup by delivery id reads only its own
    DeliveryIds,
    /// idempotency scope (SHA-256 of token, organization and key) →
    /// KeyRecord (`domain::idempotency`): the answers that
    /// [`super::answered`] could not note (past its most entries), and
    /// those stored before [`TreeName::AnswersByExpiry`]
    Idempotency,
    /// second of expiry (u32, big-endian) | idempotency scope → KeyRecord:
    /// each answer lands among those of its second. Under the scope alone,
    /// each landed in a leaf anywhere in the tree, which sled first read
    /// and then copied: a third of a keyed request's extra cost. Found
    /// through [`super::answered`], which notes each scope's second; an
    /// answer in its change's transaction where the route records it so,
    /// else on its own
    AnswersByExpiry,
    /// second of expiry (u32, big-endian) | batch number (u32, big-endian)
    /// → the answers one group commit wrote together
    /// ([`super::answer_batches`])
    AnswerBatches,
    /// the same key → the first 8 bytes of each of that batch's scopes,
    /// read at open to know where each answer is
    AnswerBatchIndex,
}

impl TreeName {
    /// Every tree in transaction-view order.
    pub const ALL: [TreeName; 20] = [
        TreeName::Users,
        TreeName::UserEmails,
        TreeName::Tokens,
        TreeName::TokenIds,
        TreeName::Orgs,
        TreeName::Roles,
        TreeName::Members,
        TreeName::Audit,
        TreeName::Meta,
        TreeName::Webhooks,
        TreeName::Outbox,
        TreeName::DeliveryLog,
        TreeName::Resources,
        TreeName::MemberExpiries,
        TreeName::Spills,
        TreeName::DeliveryIds,
        TreeName::Idempotency,
        TreeName::AnswersByExpiry,
        TreeName::AnswerBatches,
        TreeName::AnswerBatchIndex,
    ];

    /// The on-disk name; a layout change gets a new suffix.
    pub const fn name(self) -> &'static str {
        match self {
            TreeName::Users => "users_v1",
            TreeName::UserEmails => "user_emails_v1",
            TreeName::Tokens => "tokens_v1",
            TreeName::TokenIds => "token_ids_v1",
            TreeName::Orgs => "orgs_v1",
            TreeName::Roles => "roles_v1",
            TreeName::Members => "members_v1",
            TreeName::Audit => "audit_v1",
            TreeName::Meta => "meta_v1",
            TreeName::Webhooks => "webhooks_v1",
            TreeName::Outbox => "outbox_v2",
            TreeName::DeliveryLog => "delivery_log_v1",
            TreeName::Resources => "resources_v1",
            TreeName::MemberExpiries => "member_expiries_v1",
            TreeName::Spills => "outbox_spills_v1",
            TreeName::DeliveryIds => "delivery_ids_v1",
            TreeName::Idempotency => "idempotency_v1",
            TreeName::AnswersByExpiry => "idempotency_by_expiry_v1",
            TreeName::AnswerBatches => "idempotency_batches_v1",
            TreeName::AnswerBatchIndex => "idempotency_batch_index_v1",
        }
    }

    /// Position in [`TreeName::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The same name, borrowed for the whole program.
    pub fn as_static(self) -> &'static TreeName {
        &TreeName::ALL[self.index()]
    }
}

/// `a | b` as one key.
pub fn pair(a: &[u8; 16], b: &[u8; 16]) -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(a);
    key[16..].copy_from_slice(b);
    key
}

/// Key of a role.
pub fn role(org: OrgId, role: RoleId) -> [u8; 32] {
    pair(org.as_bytes(), role.as_bytes())
}

/// Key of a membership.
pub fn member(org: OrgId, user: UserId) -> [u8; 32] {
    pair(org.as_bytes(), user.as_bytes())
}

/// Key of an audit record.
pub fn audit(org: OrgId, id: AuditId) -> [u8; 32] {
    pair(org.as_bytes(), id.as_bytes())
}

/// Key of a delivery-log record.
pub fn delivery_log(org: OrgId, id: LogId) -> [u8; 32] {
    pair(org.as_bytes(), id.as_bytes())
}

/// Key of a delivery-log record's entry in [`TreeName::DeliveryIds`]: its
/// delivery's prefix ([`delivery_ids`]), then its own id.
pub fn delivery_id_entry(org: OrgId, delivery: DeliveryId, log: LogId) -> [u8; 48] {
    let mut key = [0u8; 48];
    key[..32].copy_from_slice(&delivery_ids(org, delivery));
    key[32..].copy_from_slice(log.as_bytes());
    key
}

/// The prefix of one delivery's entries in [`TreeName::DeliveryIds`].
pub fn delivery_ids(org: OrgId, delivery: DeliveryId) -> [u8; 32] {
    pair(org.as_bytes(), delivery.as_bytes())
}

/// The stored tag of each kind of resource: part of the key, so never
/// changed or reused.
pub const fn kind_tag(kind: ResourceKind) -> u8 {
    match kind {
        ResourceKind::Decision => 1,
        ResourceKind::Task => 2,
        ResourceKind::Memory => 3,
        ResourceKind::Capsule => 4,
        ResourceKind::Project => 5,
        ResourceKind::Import => 6,
        ResourceKind::Analysis => 7,
    }
}

/// The key prefix of `org`'s resources of one kind.
pub fn resource_prefix(org: OrgId, kind: ResourceKind) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[..16].copy_from_slice(org.as_bytes());
    key[16] = kind_tag(kind);
    key
}

/// Key of a workspace resource.
pub fn resource(org: OrgId, kind: ResourceKind, id: ResourceId) -> [u8; 33] {
    let mut key = [0u8; 33];
    key[..17].copy_from_slice(&resource_prefix(org, kind));
    key[17..].copy_from_slice(id.as_bytes());
    key
}

/// Key of an outbox job: by organization, then in creation order.
pub fn job(org: OrgId, id: DeliveryId) -> [u8; 32] {
    pair(org.as_bytes(), id.as_bytes())
}

/// The outbox key right after `id`'s: its own, one zero byte longer.
pub fn job_after(org: OrgId, id: DeliveryId) -> Vec<u8> {
    let mut key = job(org, id).to_vec();
    key.push(0);
    key
}

/// Past every key of `org` in a tree keyed by organization, then id (the
/// outbox, the delivery log).
pub fn past_org(org: OrgId) -> Vec<u8> {
    let mut key = org.as_bytes().to_vec();
    key.extend_from_slice(&[0xff; 17]);
    key
}

/// The outbox of layout 1, keyed by delivery id alone; moved to
/// [`TreeName::Outbox`] when a data directory of that layout is opened.
pub const OUTBOX_V1: &str = "outbox_v1";

/// Key of an answer in [`TreeName::AnswersByExpiry`].
pub fn answer(expires_second: u32, scope: &[u8; 32]) -> [u8; 36] {
    let mut key = [0u8; 36];
    key[..4].copy_from_slice(&expires_second.to_be_bytes());
    key[4..].copy_from_slice(scope);
    key
}

/// Key of a token-id index entry.
pub fn token_id(id: TokenId) -> [u8; 16] {
    *id.as_bytes()
}

/// Meta key of the admin token's SHA-256.
pub const ADMIN_TOKEN_SHA256: &[u8] = b"admin_token_sha256";
/// Meta key of the storage layout version.
pub const LAYOUT_VERSION: &[u8] = b"layout_version";
/// Meta key of the last probe write (whether the disk takes writes).
pub const PROBE: &[u8] = b"probe";

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys are the on-disk layout: a data directory written by an earlier
    /// build must read the same.
    #[test]
    fn key_layouts_are_stable() {
        let names: Vec<&str> = TreeName::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "users_v1",
                "user_emails_v1",
                "tokens_v1",
                "token_ids_v1",
                "orgs_v1",
                "roles_v1",
                "members_v1",
                "audit_v1",
                "meta_v1",
                "webhooks_v1",
                "outbox_v2",
                "delivery_log_v1",
                "resources_v1",
                "member_expiries_v1",
                "outbox_spills_v1",
                "delivery_ids_v1",
                "idempotency_v1",
                "idempotency_by_expiry_v1",
                "idempotency_batches_v1",
                "idempotency_batch_index_v1"
            ]
        );
        let answer = answer(0x0102_0304, &[9; 32]);
        assert_eq!(&answer[..4], &[1, 2, 3, 4], "by second of expiry first");
        assert_eq!(&answer[4..], &[9; 32]);
        let tags: Vec<u8> = ResourceKind::ALL.iter().map(|k| kind_tag(*k)).collect();
        assert_eq!(tags, [1, 2, 3, 4, 5, 6, 7]);
        let org = OrgId::from_slice(&[1; 16]).unwrap_or_else(OrgId::generate);
        let id = ResourceId::from_slice(&[2; 16]).unwrap_or_else(ResourceId::generate);
        let key = resource(org, ResourceKind::Capsule, id);
        assert_eq!(&key[..16], &[1; 16]);
        assert_eq!(key[16], 4);
        assert_eq!(&key[17..], &[2; 16]);
        let job = job(
            org,
            DeliveryId::from_slice(&[3; 16]).unwrap_or_else(DeliveryId::generate),
        );
        assert_eq!(
            &job[..16],
            &[1; 16],
            "the outbox is kept by organization (layout 2)"
        );
        assert_eq!(&job[16..], &[3; 16]);
    }
}
