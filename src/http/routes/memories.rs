//! Memories: `/organizations/{org_id}/memories…` (CONTRACT §7).

use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::memories::{CreateMemory, Memory, UpdateMemory};
use crate::domain::resources::Changed;
use crate::http::extract::OrgAccess;
use crate::http::resource_routes::{crud, edit, Doc, Listed, Patch, Routed};
use crate::http::route_table::*;
use crate::workspace::Workspace;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(crud::<Memory>());
}

impl Listed for Memory {
    const TAG: &'static str = "memories";
    const ONE: &'static str = "memory";
    const MANY: &'static str = "memories";
    const LIST: Doc = Doc::new(MEMORIES_LIST, "Memories, newest first.");
    const GET: Doc = Doc::new(MEMORIES_GET, "One memory.");
}

impl Routed for Memory {
    type Create = CreateMemory;
    type Update = UpdateMemory;
    const CREATE: Doc = Doc::new(
        MEMORIES_CREATE,
        "Captures a memory; fires `memory.created`.",
    );
    const UPDATE: Doc = Doc::new(
        MEMORIES_UPDATE,
        "Edits content or metadata; fires `memory.updated` when something changed.",
    );
    const DELETE: Doc = Doc::new(
        MEMORIES_DELETE,
        "Deletes a memory; fires `memory.deleted` with its last representation.",
    );
    const DELETED: Option<EventKind> = Some(EventKind::MemoryDeleted);

    async fn created(
        body: CreateMemory,
        access: &OrgAccess,
        _: &Workspace<'_>,
    ) -> Result<Changed<Memory>, ApiError> {
        Ok(Changed::new(body.build(access.org_id())?).emit(EventKind::MemoryCreated))
    }

    fn patch(body: UpdateMemory) -> Result<Patch<Memory>, ApiError> {
        let apply = body.validate()?;
        Ok(edit(move |m| Ok(apply(m)), Some(EventKind::MemoryUpdated)))
    }
}
