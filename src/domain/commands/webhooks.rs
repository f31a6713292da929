//! Webhook endpoint commands (seed 3.4, CONTRACT §6): save a passed test,
//! rotate the secret, delete. Audit records never carry the secret.

use crate::domain::access::{caller_permissions, Caller, Needs};
use crate::domain::audit::{AuditAction, AuditDraft};
use crate::domain::commands::{Change, Reply};
use crate::domain::error::ApiError;
use crate::domain::org_state::{Edit, OrgState};
use crate::domain::representation::representation;
use crate::domain::webhook::{PassedTest, WebhookEndpoint};
use crate::secrets::Secret;
use crate::time::Timestamp;

fn endpoint(state: &OrgState) -> Result<&WebhookEndpoint, ApiError> {
    state
        .webhook
        .as_deref()
        .ok_or(ApiError::NotFound("webhook"))
}

/// `PUT …/webhook`: saves the URL, events and secret of a passed test.
pub fn save_webhook(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    test: &PassedTest,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    needs.check(held, caller, None)?;
    let secret = match (&test.candidate_secret, &state.webhook) {
        (Some(candidate), _) => candidate.clone(),
        (None, Some(current)) => current.secret.clone(),
        (None, None) => {
            return Err(ApiError::TestRequired(
                "the endpoint was removed since the test; test again",
            ))
        }
    };
    let now = Timestamp::now();
    let saved = WebhookEndpoint {
        organization_id: state.id(),
        url: test.url.clone(),
        events: test.events,
        secret,
        created_at: state.webhook.as_ref().map(|w| w.created_at).unwrap_or(now),
        updated_at: now,
    };
    let before = match &state.webhook {
        Some(current) => Some(representation(&current.view())?),
        None => None,
    };
    Ok(Change {
        audit: Some(AuditDraft {
            action: AuditAction::WebhookSaved,
            target_type: "webhook",
            target_id: state.id().to_string(),
            before,
            after: Some(representation(&saved.view())?),
        }),
        events: Vec::new(),
        reply: Reply::Webhook(saved.view()),
        edits: vec![Edit::PutWebhook(saved)],
    })
}

/// `POST …/webhook/rotate`: `secret` replaces the current one, which is dead
/// at once. The caller generates it: the domain does no I/O, randomness
/// included.
pub fn rotate_webhook(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    secret: Secret,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    let current = endpoint(state)?;
    needs.check(held, caller, None)?;
    let mut rotated = current.clone();
    rotated.secret = secret.clone();
    rotated.updated_at = Timestamp::now();
    Ok(Change {
        audit: Some(AuditDraft {
            action: AuditAction::WebhookRotated,
            target_type: "webhook",
            target_id: state.id().to_string(),
            before: Some(representation(&current.view())?),
            after: Some(representation(&rotated.view())?),
        }),
        events: Vec::new(),
        reply: Reply::Secret(secret),
        edits: vec![Edit::PutWebhook(rotated)],
    })
}

/// `DELETE …/webhook`.
pub fn delete_webhook(state: &OrgState, caller: Caller, needs: Needs) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    let current = endpoint(state)?;
    needs.check(held, caller, None)?;
    Ok(Change {
        audit: Some(AuditDraft {
            action: AuditAction::WebhookDeleted,
            target_type: "webhook",
            target_id: state.id().to_string(),
            before: Some(representation(&current.view())?),
            after: None,
        }),
        events: Vec::new(),
        reply: Reply::Deleted,
        edits: vec![Edit::DeleteWebhook(state.id())],
    })
}
