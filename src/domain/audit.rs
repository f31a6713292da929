//! The audit log: one record per change to roles, memberships, the plan or
//! the webhook configuration, written in the change's own transaction.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{AuditId, OrgId, RequestId, UserId};
use crate::time::Timestamp;

/// Every action the audit log records: one list, so the OpenAPI document
/// (and the dashboard's filter, which reads it there) cannot miss one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub enum AuditAction {
    #[serde(rename = "organization.created")]
    OrganizationCreated,
    #[serde(rename = "organization.renamed")]
    OrganizationRenamed,
    #[serde(rename = "organization.plan_changed")]
    OrganizationPlanChanged,
    #[serde(rename = "role.created")]
    RoleCreated,
    #[serde(rename = "role.updated")]
    RoleUpdated,
    #[serde(rename = "role.deleted")]
    RoleDeleted,
    #[serde(rename = "member.added")]
    MemberAdded,
    #[serde(rename = "member.role_changed")]
    MemberRoleChanged,
    #[serde(rename = "member.removed")]
    MemberRemoved,
    #[serde(rename = "member.role_expired")]
    MemberRoleExpired,
    #[serde(rename = "webhook.saved")]
    WebhookSaved,
    #[serde(rename = "webhook.rotated")]
    WebhookRotated,
    #[serde(rename = "webhook.deleted")]
    WebhookDeleted,
    #[serde(rename = "webhook.recovered")]
    WebhookRecovered,
    #[serde(rename = "webhook.disabled")]
    WebhookDisabled,
    #[serde(rename = "webhook.enabled")]
    WebhookEnabled,
}

impl AuditAction {
    /// Every action, in the order of the list above.
    pub const ALL: [AuditAction; 16] = [
        AuditAction::OrganizationCreated,
        AuditAction::OrganizationRenamed,
        AuditAction::OrganizationPlanChanged,
        AuditAction::RoleCreated,
        AuditAction::RoleUpdated,
        AuditAction::RoleDeleted,
        AuditAction::MemberAdded,
        AuditAction::MemberRoleChanged,
        AuditAction::MemberRemoved,
        AuditAction::MemberRoleExpired,
        AuditAction::WebhookSaved,
        AuditAction::WebhookRotated,
        AuditAction::WebhookDeleted,
        AuditAction::WebhookRecovered,
        AuditAction::WebhookDisabled,
        AuditAction::WebhookEnabled,
    ];

    /// The action named `name`, if there is one.
    pub fn parse(name: &str) -> Option<AuditAction> {
        AuditAction::ALL
            .into_iter()
            .find(|action| action.as_str() == name)
    }

    /// The stored and published name, e.g. `role.created`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::OrganizationCreated => "organization.created",
            AuditAction::OrganizationRenamed => "organization.renamed",
            AuditAction::OrganizationPlanChanged => "organization.plan_changed",
            AuditAction::RoleCreated => "role.created",
            AuditAction::RoleUpdated => "role.updated",
            AuditAction::RoleDeleted => "role.deleted",
            AuditAction::MemberAdded => "member.added",
            AuditAction::MemberRoleChanged => "member.role_changed",
            AuditAction::MemberRemoved => "member.removed",
            AuditAction::MemberRoleExpired => "member.role_expired",
            AuditAction::WebhookSaved => "webhook.saved",
            AuditAction::WebhookRotated => "webhook.rotated",
            AuditAction::WebhookDisabled => "webhook.disabled",
            AuditAction::WebhookEnabled => "webhook.enabled",
            AuditAction::WebhookDeleted => "webhook.deleted",
            AuditAction::WebhookRecovered => "webhook.recovered",
        }
    }
}

/// What a command wants recorded; the actor adds who, when and which request.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditDraft {
    /// What happened.
    pub action: AuditAction,
    /// E.g. `role`.
    pub target_type: &'static str,
    /// The target's id.
    pub target_id: String,
    /// REST representation before the change (none for creations).
    pub before: Option<serde_json::Value>,
    /// REST representation after the change (none for deletions).
    pub after: Option<serde_json::Value>,
}

/// An audit record as stored. `before`/`after` are JSON text because the
/// binary codec cannot carry self-describing values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Time-ordered id; also the storage key suffix.
    pub id: AuditId,
    /// The organization.
    pub organization_id: OrgId,
    /// Who acted; `None` for the admin token.
    pub actor_user_id: Option<UserId>,
    /// What happened.
    pub action: String,
    /// What kind of thing changed.
    pub target_type: String,
    /// Which thing changed.
    pub target_id: String,
    /// JSON before, if any.
    pub before: Option<String>,
    /// JSON after, if any.
    pub after: Option<String>,
    /// The request that made the change.
    pub request_id: String,
    /// When.
    pub occurred_at: Timestamp,
}

impl AuditRecord {
    /// Completes a draft.
    pub fn from_draft(
        draft: AuditDraft,
        organization_id: OrgId,
        actor_user_id: Option<UserId>,
        request_id: &RequestIdText,
        occurred_at: Timestamp,
    ) -> Self {
        let text = |value: Option<serde_json::Value>| value.map(|v| v.to_string());
        AuditRecord {
            id: AuditId::generate(),
            organization_id,
            actor_user_id,
            action: draft.action.as_str().to_owned(),
            target_type: draft.target_type.to_owned(),
            target_id: draft.target_id,
            before: text(draft.before),
            after: text(draft.after),
            request_id: request_id.0.clone(),
            occurred_at,
        }
    }

    /// The REST representation.
    pub fn view(&self) -> AuditView {
        let parse = |text: &Option<String>| {
            text.as_deref()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or(serde_json::Value::Null)
        };
        AuditView {
            id: self.id,
            organization_id: self.organization_id,
            actor_user_id: self.actor_user_id,
            action: self.action.clone(),
            target_type: self.target_type.clone(),
            target_id: self.target_id.clone(),
            before: parse(&self.before),
            after: parse(&self.after),
            request_id: self.request_id.clone(),
            occurred_at: self.occurred_at,
        }
    }
}

/// A request id as text: either ours (a UUID) or the caller's `X-Request-Id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestIdText(pub String);

impl RequestIdText {
    /// A fresh id.
    pub fn generate() -> Self {
        Self(RequestId::generate().to_string())
    }
}

/// An audit record as the API returns it (CONTRACT §5a).
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct AuditView {
    /// Record id.
    pub id: AuditId,
    /// The organization.
    pub organization_id: OrgId,
    /// Who acted; null for the admin token.
    pub actor_user_id: Option<UserId>,
    /// What happened, e.g. `role.created`.
    #[schema(value_type = AuditAction)]
    pub action: String,
    /// What kind of thing changed.
    pub target_type: String,
    /// Which thing changed.
    pub target_id: String,
    /// REST representation before the change, or null.
    #[schema(value_type = Option<Object>)]
    pub before: serde_json::Value,
    /// REST representation after the change, or null.
    #[schema(value_type = Option<Object>)]
    pub after: serde_json::Value,
    /// The request that made the change.
    pub request_id: String,
    /// When.
    pub occurred_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::AuditAction;

    #[test]
    fn an_actions_stored_name_is_its_published_name_and_parses_back() {
        for action in AuditAction::ALL {
            assert_eq!(
                serde_json::to_value(action).ok(),
                Some(serde_json::Value::from(action.as_str()))
            );
            assert_eq!(AuditAction::parse(action.as_str()), Some(action));
        }
        assert_eq!(AuditAction::parse("role.renamed"), None);
    }
}
