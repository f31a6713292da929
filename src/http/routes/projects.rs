//! Projects: `/organizations/{org_id}/projects…` (CONTRACT §7).

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::projects::{CreateProject, Project, UpdateProject};
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

/// Adds a project; fires `project.created`.
#[utoipa::path(operation_id = "create_project", tag = "projects", security(("bearer" = [])), request_body = CreateProject, params(("org_id" = String, Path)),
    responses((status = 201, body = Project), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("")]
async fn create(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    access.allow(PROJECTS_CREATE)?;
    let project = input.parse::<CreateProject>()?.build(access.org_id())?;
    let created = access
        .workspace(&ctx)
        .create(Changed::new(project).emit(EventKind::ProjectCreated))
        .await?;
    Ok(HttpResponse::Created().json(created))
}

/// Projects, newest first.
#[utoipa::path(operation_id = "list_projects", tag = "projects", security(("bearer" = [])),
    params(("org_id" = String, Path), crate::http::paging::IdPaging),
    responses((status = 200, body = Page<Project>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn list_all(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(PROJECTS_LIST)?;
    list::<Project>(&ctx, &access, &req, None).await
}

/// One project.
#[utoipa::path(operation_id = "get_project", tag = "projects", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Project), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{id}")]
async fn get_one(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    get_resource::<Project>(&ctx, &access, &path.1, PROJECTS_GET).await
}

/// Renames a project or changes its repository.
#[utoipa::path(operation_id = "update_project", tag = "projects", security(("bearer" = [])), request_body = UpdateProject, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Project), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[patch("/{id}")]
async fn update(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Project>(&ctx, &access, &path.1, PROJECTS_UPDATE)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let apply = input.parse::<UpdateProject>()?.validate()?;
    let updated = workspace.edit(id, |p: &Project| Ok(apply(p)), None).await?;
    Ok(HttpResponse::Ok().json(updated))
}

/// Deletes a project.
#[utoipa::path(operation_id = "delete_project", tag = "projects", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[delete("/{id}")]
async fn remove(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    delete_resource::<Project>(&ctx, &access, &path.1, PROJECTS_DELETE, None).await
}
