//! Tasks: `/organizations/{org_id}/tasks…` (CONTRACT §7).

use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::{ApiError, Reference};
use crate::domain::event::EventKind;
use crate::domain::resources::projects::Project;
use crate::domain::resources::tasks::{CreateTask, Task, TaskStatus, UpdateTask};
use crate::domain::resources::Changed;
use crate::http::extract::OrgAccess;
use crate::http::resource_routes::{crud, Doc, Listed, Patch, Routed};
use crate::http::route_table::*;
use crate::ids::ResourceId;
use crate::time::Timestamp;
use crate::workspace::Workspace;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(crud::<Task>());
}

impl Listed for Task {
    const TAG: &'static str = "tasks";
    const ONE: &'static str = "task";
    const MANY: &'static str = "tasks";
    const LIST: Doc = Doc::new(TASKS_LIST, "Tasks, newest first.");
    const GET: Doc = Doc::new(TASKS_GET, "One task.");
}

impl Routed for Task {
    type Create = CreateTask;
    type Update = UpdateTask;
    const CREATE: Doc = Doc::new(TASKS_CREATE, "Opens a task; fires `task.created`.").also(&[422]);
    const UPDATE: Doc = Doc::new(
        TASKS_UPDATE,
        "Edits title, description or status (adjacent moves only); a status move fires\n\
         `task.status_changed`, and a move to done then `task.completed`.",
    )
    .also(&[409]);
    const DELETE: Doc = Doc::new(TASKS_DELETE, "Deletes a task.");
    const DELETED: Option<EventKind> = None;

    /// 422 when `project_id` names no project of the organization, checked
    /// once the body is valid (400 before 422).
    async fn created(
        body: CreateTask,
        access: &OrgAccess,
        workspace: &Workspace<'_>,
    ) -> Result<Changed<Task>, ApiError> {
        let project_id = body.project_id.clone();
        let mut task = body.build(access.org_id())?;
        if let Some(raw) = project_id {
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
        Ok(Changed::new(task).emit(EventKind::TaskCreated))
    }

    /// A status move fires `task.status_changed`, and a move to done then
    /// `task.completed`.
    fn patch(body: UpdateTask) -> Result<Patch<Task>, ApiError> {
        let patch = body.validate()?;
        Ok(Box::new(move |current: Task| {
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
        }))
    }
}
