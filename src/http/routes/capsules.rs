//! Capsules: `/organizations/{org_id}/capsules…` (CONTRACT §7).

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::capsules::{Capsule, CreateCapsule, SupersedeCapsule, UpdateCapsule};
use crate::domain::resources::Changed;
use crate::domain::resources::Resource;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::org_routes::{delete_resource, get_resource, list, locate};
use crate::http::paging::Page;
use crate::http::problem::Problem;
use crate::http::route_table::*;
use crate::http::AppContext;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create)
        .service(list_all)
        .service(get_one)
        .service(update)
        .service(freeze)
        .service(supersede)
        .service(remove);
}

/// Creates a capsule; fires `capsule.created`.
#[utoipa::path(operation_id = "create_capsule", tag = "capsules", security(("bearer" = [])), request_body = CreateCapsule, params(("org_id" = String, Path)),
    responses((status = 201, body = Capsule), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("")]
async fn create(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    access.allow(CAPSULES_CREATE)?;
    let capsule = input.parse::<CreateCapsule>()?.build(access.org_id())?;
    let created = access
        .workspace(&ctx)
        .create(Changed::new(capsule).emit(EventKind::CapsuleCreated))
        .await?;
    Ok(HttpResponse::Created().json(created))
}

/// Capsules, newest first.
#[utoipa::path(operation_id = "list_capsules", tag = "capsules", security(("bearer" = [])),
    params(("org_id" = String, Path), crate::http::paging::IdPaging),
    responses((status = 200, body = Page<Capsule>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn list_all(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(CAPSULES_LIST)?;
    list::<Capsule>(&ctx, &access, &req, None).await
}

/// One capsule.
#[utoipa::path(operation_id = "get_capsule", tag = "capsules", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Capsule), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{id}")]
async fn get_one(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    get_resource::<Capsule>(&ctx, &access, &path.1, CAPSULES_GET).await
}

/// Edits title, body, scope or attachments (409 CAPSULE_FROZEN when frozen); fires `capsule.updated`.
#[utoipa::path(operation_id = "update_capsule", tag = "capsules", security(("bearer" = [])), request_body = UpdateCapsule, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Capsule), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 409, body = Problem)))]
#[patch("/{id}")]
async fn update(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Capsule>(&ctx, &access, &path.1, CAPSULES_UPDATE)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let apply = input.parse::<UpdateCapsule>()?.validate()?;
    let updated = workspace
        .edit(id, apply, Some(EventKind::CapsuleUpdated))
        .await?;
    Ok(HttpResponse::Ok().json(updated))
}

/// Freezes a capsule (no-op when frozen); fires `capsule.updated`.
#[utoipa::path(operation_id = "freeze_capsule", tag = "capsules", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Capsule), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("/{id}/freeze")]
async fn freeze(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Capsule>(&ctx, &access, &path.1, CAPSULES_FREEZE)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let frozen = workspace
        .edit(
            id,
            |c: &Capsule| {
                Ok(Capsule {
                    frozen: true,
                    ..c.clone()
                })
            },
            Some(EventKind::CapsuleUpdated),
        )
        .await?;
    Ok(HttpResponse::Ok().json(frozen))
}

/// Creates the successor and freezes this capsule, pointing to it; fires `capsule.created`
/// (the successor) then `capsule.updated` (this one). Answers the successor.
#[utoipa::path(operation_id = "supersede_capsule", tag = "capsules", security(("bearer" = [])), request_body = SupersedeCapsule, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 201, body = Capsule), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 409, body = Problem)))]
#[post("/{id}/supersede")]
async fn supersede(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Capsule>(&ctx, &access, &path.1, CAPSULES_SUPERSEDE)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let succession = input.parse::<SupersedeCapsule>()?.validate()?;
    let replaced = workspace
        .update(id, |old: Capsule| {
            let (successor, replaced) = succession.apply(&old)?;
            Ok(Changed::new(replaced)
                .also(&successor, EventKind::CapsuleCreated)
                .emit(EventKind::CapsuleUpdated))
        })
        .await?;
    let successor_id = replaced
        .superseded_by
        .ok_or(ApiError::NotFound("capsule"))?;
    let successor: Capsule = workspace.get(successor_id).await?;
    Ok(HttpResponse::Created().json(successor))
}

/// Deletes a capsule (needs all four capsules keys); fires `capsule.deleted`.
#[utoipa::path(operation_id = "delete_capsule", tag = "capsules", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[delete("/{id}")]
async fn remove(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    delete_resource::<Capsule>(
        &ctx,
        &access,
        &path.1,
        CAPSULES_DELETE,
        Some(EventKind::CapsuleDeleted),
    )
    .await
}
