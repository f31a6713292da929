//! What a change writes, as domain values. Every change, whatever made it
//! (an organization command, a resource change, the admin API, a delivery
//! result), is a list of [`Write`]s that the commit path hands to the
//! storage engine in one transaction; the engine alone knows the rows, keys
//! and encodings they become.

use crate::domain::audit::AuditRecord;
use crate::domain::delivery::{Job, LogRecord};
use crate::domain::idempotency::KeyAnswer;
use crate::domain::org_state::Edit;
use crate::domain::resources::{AnyResource, ResourceKind};
use crate::domain::user::{TokenRecord, User};
use crate::ids::{DeliveryId, OrgId, ResourceId};

/// One write of a change.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// An organization-state edit (the organization, a role, a membership,
    /// the webhook endpoint): applied to storage and to the snapshot alike.
    Edit(Edit),
    /// Insert a user.
    PutUser(User),
    /// Insert a token record.
    PutToken(TokenRecord),
    /// Remove a token record.
    DeleteToken(TokenRecord),
    /// Append an audit record.
    Audit(AuditRecord),
    /// Insert or replace a delivery waiting for its next attempt.
    PutJob(Job),
    /// A delivery whose attempt failed waits for its retry: its row is
    /// updated in place, and only while it is there. A row gone was
    /// finished, by this node or by the node that took its organization
    /// over, whose outcome an attempt made under a lease that lapsed must
    /// not undo by queueing the delivery again.
    RetryJob(Job),
    /// Remove a finished delivery of an organization.
    DeleteJob(OrgId, DeliveryId),
    /// Append a delivery-log record.
    Log(LogRecord),
    /// Insert or replace a workspace resource of an organization.
    PutResource(OrgId, AnyResource),
    /// Insert a workspace resource that does not exist yet (a create: its
    /// id was just generated), where an engine can do it more cheaply than
    /// an insert-or-replace.
    NewResource(OrgId, AnyResource),
    /// Remove a workspace resource of an organization.
    DeleteResource(OrgId, ResourceKind, ResourceId),
    /// The organization's state moves from revision `next - 1` to `next`
    /// (every change of it comes with one): a store that several nodes
    /// share refuses it when the state stored is not at `next - 1`
    /// ([`crate::storage::StoreError::Stale`]).
    OrgRevision(OrgId, u64),
    /// Record the SHA-256 of the generated admin token, unless one is
    /// recorded: when nodes of a cluster race at their first start, the
    /// first one's token is the cluster's.
    AdminToken([u8; 32]),
    /// Record the answer of the request that made this change under an
    /// idempotency key, with the change itself: a node that stops after
    /// the commit cannot leave the change made and its key unanswered.
    KeyAnswer(Box<KeyAnswer>),
}

impl Write {
    /// The new delivery this write queues, if it is one.
    pub fn new_job(&self) -> Option<&Job> {
        match self {
            Write::PutJob(job) if job.attempts_made == 0 => Some(job),
            _ => None,
        }
    }
}
