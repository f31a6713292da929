//! Pure organization commands: `(state, caller, input) → Change`.
//!
//! A command checks everything in the contract's order and describes its
//! effect as data; the organization actor commits it. No I/O happens here,
//! so every rule is unit-testable.

pub mod members;
pub mod organization;
pub mod roles;
pub mod webhooks;

use crate::domain::audit::AuditDraft;
use crate::domain::event::Event;
use crate::domain::member::MembershipView;
use crate::domain::org_state::Edit;
use crate::domain::organization::Organization;
use crate::domain::role::RoleView;

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
    /// The audit record to append, when something changed.
    pub audit: Option<AuditDraft>,
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
            audit: None,
            events: Vec::new(),
            reply,
        }
    }
}

/// A REST representation as a JSON value (for audit records and events).
pub(crate) fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}
