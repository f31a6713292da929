//! Decisions: `/organizations/{org_id}/decisions…` (CONTRACT §7).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::decisions::{
    move_permission, move_target_permission, ChangeStatus, CreateDecision, Decision, UpdateDecision,
};
use crate::domain::resources::Changed;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::idempotency::{respond_with, Keyed};
use crate::http::org_routes::locate;
use crate::http::problem::Problem;
use crate::http::resource_routes::{crud, edit, Doc, Listed, Patch, Routed};
use crate::http::route_table::*;
use crate::http::AppContext;
use crate::time::Timestamp;
use crate::workspace::Workspace;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(crud::<Decision>()).service(change_status);
}

impl Listed for Decision {
    const TAG: &'static str = "decisions";
    const ONE: &'static str = "decision";
    const MANY: &'static str = "decisions";
    const LIST: Doc = Doc::new(DECISIONS_LIST, "Decisions, newest first.");
    const GET: Doc = Doc::new(DECISIONS_GET, "One decision.");
}

impl Routed for Decision {
    type Create = CreateDecision;
    type Update = UpdateDecision;
    const CREATE: Doc = Doc::new(
        DECISIONS_CREATE,
        "Records a decision (DRAFT or PENDING); fires `decision.created`.",
    );
    const UPDATE: Doc = Doc::new(
        DECISIONS_UPDATE,
        "Edits title, statement, rationale, tags or links; fires `decision.updated` when something changed.",
    );
    const DELETE: Doc = Doc::new(
        DECISIONS_DELETE,
        "Deletes a decision; fires `decision.deleted` with its last representation.",
    );
    const DELETED: Option<EventKind> = Some(EventKind::DecisionDeleted);

    async fn created(
        body: CreateDecision,
        access: &OrgAccess,
        _: &Workspace<'_>,
    ) -> Result<Changed<Decision>, ApiError> {
        let decision = body.build(access.org_id(), access.user)?;
        Ok(Changed::new(decision).emit(EventKind::DecisionCreated))
    }

    fn patch(body: UpdateDecision) -> Result<Patch<Decision>, ApiError> {
        let apply = body.validate()?;
        Ok(edit(
            move |d| Ok(apply(d)),
            Some(EventKind::DecisionUpdated),
        ))
    }
}

/// Moves the status (DRAFT→PENDING `update`; PENDING→ACCEPTED `accept`; PENDING→REJECTED `reject`;
/// PENDING or ACCEPTED→DEPRECATED `deprecate`); fires `decision.status_changed`.
#[utoipa::path(operation_id = "change_decision_status", tag = "decisions", security(("bearer" = [])), request_body = ChangeStatus, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Decision), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 409, body = Problem)))]
#[post("/{id}/status")]
async fn change_status(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    // The key depends on the move, which the body names; it is checked
    // before the decision is read (CONTRACT §11).
    let target = input.parse::<ChangeStatus>()?.status;
    move_target_permission(access.permissions, target)?;
    let current = locate::<Decision>(&ctx, &access, &path.1, DECISIONS_STATUS).await?;
    let (workspace, id) = (access.workspace(&ctx), current.id);
    let moved = |mut decision: Decision| {
        let key = move_permission(decision.status, target)?;
        access.require(key)?;
        decision.status = target;
        decision.updated_at = Timestamp::now();
        Ok(Changed::new(decision).emit(EventKind::DecisionStatusChanged))
    };
    let answer = respond_with(keyed.as_deref(), StatusCode::OK);
    Ok(workspace
        .update_answered(id, moved, answer)
        .await?
        .into_response())
}
