//! Tasks: `/organizations/{org_id}/tasks…` (CONTRACT §7).

use actix_web::{delete, get, patch, post, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::{ApiError, Reference};
use crate::domain::event::EventKind;
use crate::domain::resources::projects::Project;
use crate::domain::resources::tasks::{CreateTask, Task, TaskStatus, UpdateTask};
use crate::domain::resources::Changed;
use crate::domain::resources::Resource;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::org_routes::{delete_resource, get_resource, list, locate};
use crate::http::paging::Page;
use crate::http::problem::Problem;
use crate::http::route_table::*;
use crate::http::AppContext;
use crate::ids::ResourceId;
use crate::time::Timestamp;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create)
        .service(list_all)
        .service(get_one)
        .service(update)
        .service(remove);
}

/// Opens a task; fires `task.created`.
#[utoipa::path(operation_id = "create_task", tag = "tasks", security(("bearer" = [])), request_body = CreateTask, params(("org_id" = String, Path)),
    responses((status = 201, body = Task), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 422, body = Problem)))]
#[post("")]
async fn create(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    access.allow(TASKS_CREATE)?;
    let body: CreateTask = input.parse()?;
    let project_id = body.project_id.clone();
    let mut task = body.build(access.org_id())?;
    let workspace = access.workspace(&ctx);
    if let Some(raw) = project_id {
        // A reference is checked after the body is valid (400 before 422).
        let id = ResourceId::parse(&raw)
            .ok_or_else(|| ApiError::invalid("project_id", "must be a project id (UUID)"))?;
        match workspace.get::<Project>(id).await {
            Err(ApiError::NotFound(_)) => {
                return Err(ApiError::UnknownReference(Reference::Project, "project_id"))
            }
            found => found?,
        };
        task.project_id = Some(id);
    }
    let created = workspace
        .create(Changed::new(task).emit(EventKind::TaskCreated))
        .await?;
    Ok(HttpResponse::Created().json(created))
}

/// Tasks, newest first.
#[utoipa::path(operation_id = "list_tasks", tag = "tasks", security(("bearer" = [])),
    params(("org_id" = String, Path), crate::http::paging::IdPaging),
    responses((status = 200, body = Page<Task>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn list_all(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(TASKS_LIST)?;
    list::<Task>(&ctx, &access, &req, None).await
}

/// One task.
#[utoipa::path(operation_id = "get_task", tag = "tasks", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Task), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/{id}")]
async fn get_one(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    get_resource::<Task>(&ctx, &access, &path.1, TASKS_GET).await
}

/// Edits title, description or status (adjacent moves only); a status move fires
/// `task.status_changed`, and a move to done then `task.completed`.
#[utoipa::path(operation_id = "update_task", tag = "tasks", security(("bearer" = [])), request_body = UpdateTask, params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Task), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 409, body = Problem)))]
#[patch("/{id}")]
async fn update(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Task>(&ctx, &access, &path.1, TASKS_UPDATE)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let patch = input.parse::<UpdateTask>()?.validate()?;
    let updated = workspace
        .update(id, |current: Task| {
            let (next, moved) = patch.apply(&current, Timestamp::now())?;
            let completed = moved && next.status == TaskStatus::Done;
            let mut changed = Changed::new(next);
            if moved {
                changed = changed.emit(EventKind::TaskStatusChanged);
            }
            if completed {
                changed = changed.emit(EventKind::TaskCompleted);
            }
            Ok(changed)
        })
        .await?;
    Ok(HttpResponse::Ok().json(updated))
}

/// Deletes a task.
#[utoipa::path(operation_id = "delete_task", tag = "tasks", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[delete("/{id}")]
async fn remove(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    delete_resource::<Task>(&ctx, &access, &path.1, TASKS_DELETE, None).await
}
