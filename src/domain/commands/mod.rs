//! Pure organization commands: `(state, caller, input) → Change`.
//!
//! A command checks everything in the contract's order and describes its
//! effect as data; the organization actor hands it to the commit path. No
//! I/O happens here, so every rule is unit-testable.

pub mod members;
pub mod organization;
pub mod roles;
pub mod webhooks;

use crate::domain::audit::{AuditDraft, AuditRecord, RequestIdText};
use crate::domain::change::Write;
use crate::domain::error::ApiError;
use crate::domain::event::Event;
use crate::domain::member::MembershipView;
use crate::domain::org_state::Edit;
use crate::domain::org_state::OrgState;
use crate::domain::organization::Organization;
use crate::domain::outbox;
use crate::domain::role::RoleView;
use crate::ids::UserId;
use crate::time::Timestamp;

/// What a successful command answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A role and its ETag.
    Role(RoleView, String),
    /// A membership.
    Member(MembershipView),
    /// An organization.
    Organization(Organization),
    /// A webhook endpoint.
    Webhook(crate::domain::webhook::WebhookView),
    /// A newly generated signing secret (shown once).
    Secret(crate::secrets::Secret),
    /// Nothing (204).
    Deleted,
}

/// The effect of a command. An empty `edits` means a no-op: nothing is
/// written, audited or emitted.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// State changes, applied to storage and memory alike.
    pub edits: Vec<Edit>,
    /// The audit records to append, when something changed.
    pub audits: Vec<AuditDraft>,
    /// Events for the outbox.
    pub events: Vec<Event>,
    /// The answer.
    pub reply: Reply,
}

impl Change {
    /// A command that changes nothing.
    pub fn none(reply: Reply) -> Self {
        Change {
            edits: Vec::new(),
            audits: Vec::new(),
            events: Vec::new(),
            reply,
        }
    }

    /// The writes that commit this change, whose edits made `next`: the
    /// edits, the audit record (completed with who asked, in which request,
    /// now), and its events staged against `next`'s endpoint. Also the reply.
    pub fn into_writes(
        self,
        next: &OrgState,
        actor: Option<UserId>,
        request: &RequestIdText,
    ) -> Result<(Vec<Write>, Reply), ApiError> {
        let mut writes: Vec<Write> = self.edits.into_iter().map(Write::Edit).collect();
        let now = Timestamp::now();
        for draft in self.audits {
            let record = AuditRecord::from_draft(draft, next.id(), actor, request, now);
            writes.push(Write::Audit(record));
        }
        writes.extend(outbox::stage(next, &self.events)?);
        Ok((writes, self.reply))
    }
}
