//! Decisions: `/organizations/{org_id}/decisions…` (CONTRACT §7).

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::decisions::{
    move_permission, move_target_permission, ChangeStatus, CreateDecision, Decision, UpdateDecision,
};
use crate::domain::resources::Changed;
use crate::domain::resources::Resource;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::org_routes::{delete_resource, get_resource, list, locate};
use crate::http::paging::Page;
use crate::http::problem::Problem;
use crate::http::route_table::*;
use crate::http::AppContext;
use crate::time::Timestamp;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create)
        .service(list_all)
        .service(get_one)
        .service(update)
        .service(remove)
        .service(change_status);
}

/// Records a decision (DRAFT or PENDING); fires `decision.created`.
#[utoipa::path(operation_id = "create_decision", tag = "decisions", security(("bearer" = [])), request_body = CreateDecision, params(("org_id" = String, Path)),
    responses((status = 201, body = Decision), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("")]
async fn create(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    access.allow(DECISIONS_CREATE)?;
    let decision = input
        .parse::<CreateDecision>()?
        .build(access.org_id(), access.user)?;
    let created = access
        .workspace(&ctx)
        .create(Changed::new(decision).emit(EventKind::DecisionCreated))
        .await?;
    Ok(HttpResponse::Created().json(created))
}

/// Decisions, newest first.
#[utoipa::path(operation_id = "list_decisions", tag = "decisions", security(("bearer" = [])),
    params(("org_id" = String, Path), crate::http::paging::IdPaging),
    responses((status = 200, body = Page<Decision>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn list_all(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(DECISIONS_LIST)?;
    list::<Decision>(&ctx, &access, &req, None).await
}

/// One decision.
#[utoipa::path(operation_id = "get_decision", tag = "decisions", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Decision), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{id}")]
async fn get_one(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    get_resource::<Decision>(&ctx, &access, &path.1, DECISIONS_GET).await
}

/// Edits title, statement, rationale, tags or links; fires `decision.updated` when something changed.
#[utoipa::path(operation_id = "update_decision", tag = "decisions", security(("bearer" = [])), request_body = UpdateDecision, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Decision), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[patch("/{id}")]
async fn update(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Decision>(&ctx, &access, &path.1, DECISIONS_UPDATE)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let apply = input.parse::<UpdateDecision>()?.validate()?;
    let updated = workspace
        .edit(
            id,
            |d: &Decision| Ok(apply(d)),
            Some(EventKind::DecisionUpdated),
        )
        .await?;
    Ok(HttpResponse::Ok().json(updated))
}

/// Deletes a decision; fires `decision.deleted` with its last representation.
#[utoipa::path(operation_id = "delete_decision", tag = "decisions", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[delete("/{id}")]
async fn remove(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    delete_resource::<Decision>(
        &ctx,
        &access,
        &path.1,
        DECISIONS_DELETE,
        Some(EventKind::DecisionDeleted),
    )
    .await
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
) -> Result<HttpResponse, ApiError> {
    // The key depends on the move, which the body names; it is checked
    // before the decision is read (CONTRACT §11).
    let target = input.parse::<ChangeStatus>()?.status;
    move_target_permission(access.permissions, target)?;
    let current = locate::<Decision>(&ctx, &access, &path.1, DECISIONS_STATUS).await?;
    let (workspace, id) = (access.workspace(&ctx), current.id);
    let moved = workspace
        .update(id, |mut decision: Decision| {
            let key = move_permission(decision.status, target)?;
            access.require(key)?;
            decision.status = target;
            decision.updated_at = Timestamp::now();
            Ok(Changed::new(decision).emit(EventKind::DecisionStatusChanged))
        })
        .await?;
    Ok(HttpResponse::Ok().json(moved))
}
