//! `POST /organizations/{org_id}/webhook/recover`: after a subscriber's
//! outage, one new delivery for every event that failed in a window and
//! has not been delivered since (see [`crate::webhooks::recovery`]).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::commit::Commit;
use crate::domain::audit::{AuditAction, AuditDraft, AuditRecord};
use crate::domain::change::Write;
use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::http::body::JsonInput;
use crate::http::extract::{request_id, OrgAccess};
use crate::http::idempotency::{respond_with, Keyed};
use crate::http::problem::Problem;
use crate::http::route_table::WEBHOOK_RECOVER;
use crate::http::AppContext;
use crate::time::Timestamp;
use crate::webhooks::recovery::{recover, Window};

/// Registers the route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(recover_failed);
}

/// Body of `POST …/webhook/recover`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Recover {
    /// Recover failures from this instant (RFC 3339).
    #[schema(value_type = String, format = DateTime)]
    since: String,
    /// Up to this instant, excluded (RFC 3339; default: now).
    #[schema(value_type = String, format = DateTime, required = false)]
    #[serde(default, deserialize_with = "non_null")]
    until: Option<String>,
}

/// The answer of a recovery.
#[derive(Serialize, ToSchema)]
pub struct Recovered {
    /// New deliveries queued.
    count: usize,
}

/// Queues one new delivery (new id, attempts from 1, signed with the current
/// secret) for every event whose attempts failed in `[since, until)` and that
/// has not succeeded since nor is queued (`org:settings:manage`).
#[utoipa::path(operation_id = "recover_webhook_deliveries", tag = "webhook", security(("bearer" = [])), request_body = Recover,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 202, body = Recovered), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("/recover")]
async fn recover_failed(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    JsonInput(input): JsonInput,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    access.allow(WEBHOOK_RECOVER)?;
    if access.state.webhook.is_none() {
        return Err(ApiError::NotFound("webhook"));
    }
    let window = window(input.parse::<Recover>()?)?;
    let org = access.org_id();
    let (jobs, _running) = recover(&ctx.store, org, window, ctx.log_retention).await?;
    let count = jobs.len();
    let audit = AuditDraft {
        action: AuditAction::WebhookRecovered,
        target_type: "webhook",
        target_id: org.to_string(),
        before: None,
        after: Some(serde_json::json!({
            "since": window.since,
            "until": window.until,
            "count": count,
        })),
    };
    let record = AuditRecord::from_draft(
        audit,
        org,
        access.caller().user_id(),
        &request_id(&req),
        Timestamp::now(),
    );
    let answer = respond_with(keyed.as_deref(), StatusCode::ACCEPTED);
    let (answer, recorded) = answer(&Recovered { count })?;
    let mut writes: Vec<Write> = jobs.into_iter().map(Write::PutJob).collect();
    writes.push(Write::Audit(record));
    writes.extend(recorded);
    ctx.commit.commit(Commit::writes(writes)).await?;
    Ok(answer.into_response())
}

/// The window a body asks for: `since` before `until`, `since` not in the future.
fn window(body: Recover) -> Result<Window, ApiError> {
    let instant = |field: &str, text: &str| {
        Timestamp::parse_client(text)
            .ok_or_else(|| ApiError::invalid(field, "must be an RFC 3339 date-time"))
    };
    let now = Timestamp::now();
    let since = instant("since", &body.since)?;
    let until = match &body.until {
        Some(text) => instant("until", text)?,
        None => now,
    };
    if since > now {
        return Err(ApiError::invalid("since", "must not be in the future"));
    }
    if until <= since {
        return Err(ApiError::invalid("until", "must be after since"));
    }
    Ok(Window { since, until })
}
