//! Imports: `/organizations/{org_id}/projects/{id}/imports` and `/imports/{id}…` (CONTRACT §7).

use actix_web::http::StatusCode;
use actix_web::{get, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::imports::{finish, Import, ImportResult, ImportStatus, StartImport};
use crate::domain::resources::projects::Project;
use crate::domain::resources::Changed;
use crate::domain::resources::Resource;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::idempotency::{respond_with, Keyed};
use crate::http::org_routes::{get_resource, list, locate};
use crate::http::paging::Page;
use crate::http::problem::Problem;
use crate::http::route_table::*;
use crate::http::AppContext;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_one).service(cancel).service(result);
}

/// Registers the routes under a project (`/projects/{id}/imports`).
pub fn configure_for_projects(cfg: &mut ServiceConfig) {
    cfg.service(start).service(list_for_project);
}

/// Starts an import into a project (status running).
#[utoipa::path(operation_id = "start_import", tag = "imports", security(("bearer" = [])), request_body = StartImport, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 202, body = Import), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("/{id}/imports")]
async fn start(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    let project = locate::<Project>(&ctx, &access, &path.1, IMPORTS_START).await?;
    let import = input.parse::<StartImport>()?.build(project.id)?;
    let answer = respond_with(keyed.as_deref(), StatusCode::ACCEPTED);
    let workspace = access.workspace(&ctx);
    let started = workspace.create(Changed::new(import), answer).await?;
    Ok(started.into_response())
}

/// A project's imports, newest first.
#[utoipa::path(operation_id = "list_project_imports", tag = "imports", security(("bearer" = [])),
    params(("org_id" = String, Path), ("id" = String, Path), crate::http::paging::IdPaging),
    responses((status = 200, body = Page<Import>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{id}/imports")]
async fn list_for_project(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let project = locate::<Project>(&ctx, &access, &path.1, IMPORTS_LIST).await?;
    list::<Import>(&ctx, &access, &req, Some(project.id)).await
}

/// One import.
#[utoipa::path(operation_id = "get_import", tag = "imports", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Import), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{id}")]
async fn get_one(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    get_resource::<Import>(&ctx, &access, &path.1, IMPORTS_GET).await
}

/// Cancels a running import (409 INVALID_TRANSITION when it finished).
#[utoipa::path(operation_id = "cancel_import", tag = "imports", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Import), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[post("/{id}/cancel")]
async fn cancel(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Import>(&ctx, &access, &path.1, IMPORTS_CANCEL)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let cancel = |import: Import| {
        Ok(Changed::new(finish(
            &import,
            ImportStatus::Cancelled,
            None,
        )?))
    };
    let answer = respond_with(keyed.as_deref(), StatusCode::OK);
    Ok(workspace
        .update_answered(id, cancel, answer)
        .await?
        .into_response())
}

/// The importer reports the outcome; fires `project.import_completed` or
/// `project.import_failed` (with `failure_reason`). 409 when already finished.
#[utoipa::path(operation_id = "report_import_result", tag = "imports", security(("bearer" = [])), request_body = ImportResult, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Import), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 409, body = Problem)))]
#[post("/{id}/result")]
async fn result(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Import>(&ctx, &access, &path.1, IMPORTS_RESULT)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let (status, reason) = input.parse::<ImportResult>()?.validate()?;
    let event = if status == ImportStatus::Completed {
        EventKind::ProjectImportCompleted
    } else {
        EventKind::ProjectImportFailed
    };
    let report =
        |import: Import| Ok(Changed::new(finish(&import, status, reason.clone())?).emit(event));
    let answer = respond_with(keyed.as_deref(), StatusCode::OK);
    Ok(workspace
        .update_answered(id, report, answer)
        .await?
        .into_response())
}
