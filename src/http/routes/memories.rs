//! Memories: `/organizations/{org_id}/memories…` (CONTRACT §7).

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::memories::{CreateMemory, Memory, UpdateMemory};
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
        .service(remove);
}

/// Captures a memory; fires `memory.created`.
#[utoipa::path(operation_id = "create_memory", tag = "memories", security(("bearer" = [])), request_body = CreateMemory, params(("org_id" = String, Path)),
    responses((status = 201, body = Memory), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("")]
async fn create(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    access.allow(MEMORIES_CREATE)?;
    let memory = input.parse::<CreateMemory>()?.build(access.org_id())?;
    let created = access
        .workspace(&ctx)
        .create(Changed::new(memory).emit(EventKind::MemoryCreated))
        .await?;
    Ok(HttpResponse::Created().json(created))
}

/// Memories, newest first.
#[utoipa::path(operation_id = "list_memories", tag = "memories", security(("bearer" = [])),
    params(("org_id" = String, Path), crate::http::paging::IdPaging),
    responses((status = 200, body = Page<Memory>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn list_all(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(MEMORIES_LIST)?;
    list::<Memory>(&ctx, &access, &req, None).await
}

/// One memory.
#[utoipa::path(operation_id = "get_memory", tag = "memories", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Memory), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{id}")]
async fn get_one(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    get_resource::<Memory>(&ctx, &access, &path.1, MEMORIES_GET).await
}

/// Edits content or metadata; fires `memory.updated` when something changed.
#[utoipa::path(operation_id = "update_memory", tag = "memories", security(("bearer" = [])), request_body = UpdateMemory, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Memory), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[patch("/{id}")]
async fn update(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Memory>(&ctx, &access, &path.1, MEMORIES_UPDATE)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let apply = input.parse::<UpdateMemory>()?.validate()?;
    let updated = workspace
        .edit(
            id,
            |m: &Memory| Ok(apply(m)),
            Some(EventKind::MemoryUpdated),
        )
        .await?;
    Ok(HttpResponse::Ok().json(updated))
}

/// Deletes a memory; fires `memory.deleted` with its last representation.
#[utoipa::path(operation_id = "delete_memory", tag = "memories", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[delete("/{id}")]
async fn remove(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    delete_resource::<Memory>(
        &ctx,
        &access,
        &path.1,
        MEMORIES_DELETE,
        Some(EventKind::MemoryDeleted),
    )
    .await
}
