//! Projects: `/organizations/{org_id}/projects…` (CONTRACT §7).

use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::projects::{CreateProject, Project, UpdateProject};
use crate::domain::resources::Changed;
use crate::http::extract::OrgAccess;
use crate::http::resource_routes::{crud, edit, Doc, Listed, Patch, Routed};
use crate::http::route_table::*;
use crate::workspace::Workspace;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(crud::<Project>());
}

impl Listed for Project {
    const TAG: &'static str = "projects";
    const ONE: &'static str = "project";
    const MANY: &'static str = "projects";
    const LIST: Doc = Doc::new(PROJECTS_LIST, "Projects, newest first.");
    const GET: Doc = Doc::new(PROJECTS_GET, "One project.");
}

impl Routed for Project {
    type Create = CreateProject;
    type Update = UpdateProject;
    const CREATE: Doc = Doc::new(PROJECTS_CREATE, "Adds a project; fires `project.created`.");
    const UPDATE: Doc = Doc::new(
        PROJECTS_UPDATE,
        "Renames a project or changes its repository.",
    );
    const DELETE: Doc = Doc::new(PROJECTS_DELETE, "Deletes a project.");
    const DELETED: Option<EventKind> = None;

    async fn created(
        body: CreateProject,
        access: &OrgAccess,
        _: &Workspace<'_>,
    ) -> Result<Changed<Project>, ApiError> {
        Ok(Changed::new(body.build(access.org_id())?).emit(EventKind::ProjectCreated))
    }

    fn patch(body: UpdateProject) -> Result<Patch<Project>, ApiError> {
        let apply = body.validate()?;
        Ok(edit(move |p| Ok(apply(p)), None))
    }
}
