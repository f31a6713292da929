//! Webhook endpoint commands (seed 3.4, CONTRACT §6): save a passed test,
//! rotate the secret, delete. Audit records never carry the secret.

use crate::domain::access::{caller_permissions, Caller, Needs};
use crate::domain::audit::{AuditAction, AuditDraft};
use crate::domain::commands::{Change, Reply};
use crate::domain::error::ApiError;
use crate::domain::org_state::{Edit, OrgState};
use crate::domain::representation::representation;
use crate::domain::webhook::{Disabled, PassedTest, WebhookEndpoint};
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
    // A disabled endpoint is enabled only by a test that passed after it
    // was disabled: one from before proves nothing of the subscriber now.
    if let Some(disabled) = state.webhook.as_ref().and_then(|w| w.disabled) {
        let elapsed = i64::try_from(test.passed_at.elapsed().as_millis()).unwrap_or(i64::MAX);
        if now.millis().saturating_sub(elapsed) < disabled.at.millis() {
            return Err(ApiError::TestRequired(
                "the endpoint was disabled after this test passed; test it again",
            ));
        }
    }
    let saved = WebhookEndpoint {
        organization_id: state.id(),
        url: test.url.clone(),
        events: test.events,
        secret,
        created_at: state.webhook.as_ref().map(|w| w.created_at).unwrap_or(now),
        updated_at: now,
        disabled: None,
        failing_since: None,
    };
    let before = match &state.webhook {
        Some(current) => Some(representation(&current.view())?),
        None => None,
    };
    let mut audits = vec![AuditDraft {
        action: AuditAction::WebhookSaved,
        target_type: "webhook",
        target_id: state.id().to_string(),
        before: before.clone(),
        after: Some(representation(&saved.view())?),
    }];
    // The passing test proved the subscriber is back.
    if state.webhook.as_ref().is_some_and(|w| w.disabled.is_some()) {
        audits.push(AuditDraft {
            action: AuditAction::WebhookEnabled,
            target_type: "webhook",
            target_id: state.id().to_string(),
            before,
            after: Some(representation(&saved.view())?),
        });
    }
    Ok(Change {
        audits,
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
        audits: vec![AuditDraft {
            action: AuditAction::WebhookRotated,
            target_type: "webhook",
            target_id: state.id().to_string(),
            before: Some(representation(&current.view())?),
            after: Some(representation(&rotated.view())?),
        }],
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
        audits: vec![AuditDraft {
            action: AuditAction::WebhookDeleted,
            target_type: "webhook",
            target_id: state.id().to_string(),
            before: Some(representation(&current.view())?),
            after: None,
        }],
        events: Vec::new(),
        reply: Reply::Deleted,
        edits: vec![Edit::DeleteWebhook(state.id())],
    })
}

/// Which save of an endpoint an attempt was made at: a later save (a new
/// URL, a new secret, or the endpoint removed and saved anew) is not judged
/// by what an attempt at an earlier one found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generation {
    /// When the endpoint was first saved.
    pub created_at: Timestamp,
    /// When it was last saved or rotated (health records leave it).
    pub updated_at: Timestamp,
}

impl Generation {
    /// `endpoint`'s.
    pub fn of(endpoint: &WebhookEndpoint) -> Self {
        Generation {
            created_at: endpoint.created_at,
            updated_at: endpoint.updated_at,
        }
    }
}

/// What delivery learned of an endpoint's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Stop deliveries (410 Gone, or a failing run long enough).
    Disable(Disabled),
    /// A run of failures began at this time (`None`: it ended in a success).
    FailingSince(Option<Timestamp>),
}

/// Records `health` of the endpoint's save `generation`: a disable
/// (audited as `webhook.disabled`, with no actor) or the start or end of a
/// failing run. Nothing when the endpoint is gone, saved again since,
/// already disabled, or already so.
pub fn record_health(
    state: &OrgState,
    generation: Generation,
    health: Health,
) -> Result<Change, ApiError> {
    let Some(current) = state
        .webhook
        .as_deref()
        .filter(|w| Generation::of(w) == generation && w.disabled.is_none())
    else {
        return Ok(Change::none(Reply::Deleted));
    };
    let mut next = current.clone();
    let audits = match health {
        // A run's start is written once: a later failure does not move it.
        Health::FailingSince(since)
            if since == current.failing_since
                || (since.is_some() && current.failing_since.is_some()) =>
        {
            return Ok(Change::none(Reply::Deleted))
        }
        Health::FailingSince(since) => {
            next.failing_since = since;
            Vec::new()
        }
        Health::Disable(disabled) => {
            next.disabled = Some(disabled);
            vec![AuditDraft {
                action: AuditAction::WebhookDisabled,
                target_type: "webhook",
                target_id: state.id().to_string(),
                before: Some(representation(&current.view())?),
                after: Some(representation(&next.view())?),
            }]
        }
    };
    Ok(Change {
        audits,
        events: Vec::new(),
        reply: Reply::Webhook(next.view()),
        edits: vec![Edit::PutWebhook(next)],
    })
}
