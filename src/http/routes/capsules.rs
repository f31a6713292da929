//! Capsules: `/organizations/{org_id}/capsules…` (CONTRACT §7).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::resources::capsules::{Capsule, CreateCapsule, SupersedeCapsule, UpdateCapsule};
use crate::domain::resources::Changed;
use crate::domain::resources::Resource;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::idempotency::{respond_with, Keyed};
use crate::http::org_routes::locate;
use crate::http::problem::Problem;
use crate::http::resource_routes::{crud, edit, Doc, Listed, Patch, Routed};
use crate::http::route_table::*;
use crate::http::AppContext;
use crate::workspace::Workspace;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(crud::<Capsule>())
        .service(freeze)
        .service(supersede);
}

impl Listed for Capsule {
    const TAG: &'static str = "capsules";
    const ONE: &'static str = "capsule";
    const MANY: &'static str = "capsules";
    const LIST: Doc = Doc::new(CAPSULES_LIST, "Capsules, newest first.");
    const GET: Doc = Doc::new(CAPSULES_GET, "One capsule.");
}

impl Routed for Capsule {
    type Create = CreateCapsule;
    type Update = UpdateCapsule;
    const CREATE: Doc = Doc::new(
        CAPSULES_CREATE,
        "Creates a capsule; fires `capsule.created`.",
    );
    const UPDATE: Doc = Doc::new(
        CAPSULES_UPDATE,
        "Edits title, body, scope or attachments (409 CAPSULE_FROZEN when frozen); fires `capsule.updated`.",
    )
    .also(&[409]);
    const DELETE: Doc = Doc::new(
        CAPSULES_DELETE,
        "Deletes a capsule (needs all four capsules keys); fires `capsule.deleted`.",
    );
    const DELETED: Option<EventKind> = Some(EventKind::CapsuleDeleted);

    async fn created(
        body: CreateCapsule,
        access: &OrgAccess,
        _: &Workspace<'_>,
    ) -> Result<Changed<Capsule>, ApiError> {
        Ok(Changed::new(body.build(access.org_id())?).emit(EventKind::CapsuleCreated))
    }

    fn patch(body: UpdateCapsule) -> Result<Patch<Capsule>, ApiError> {
        Ok(edit(body.validate()?, Some(EventKind::CapsuleUpdated)))
    }
}

/// Freezes a capsule (no-op when frozen); fires `capsule.updated`.
#[utoipa::path(operation_id = "freeze_capsule", tag = "capsules", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Capsule), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("/{id}/freeze")]
async fn freeze(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Capsule>(&ctx, &access, &path.1, CAPSULES_FREEZE)
        .await?
        .id();
    let freeze = |current: Capsule| {
        let next = Capsule {
            frozen: true,
            ..current.clone()
        };
        Ok(Changed::edited(
            current,
            next,
            Some(EventKind::CapsuleUpdated),
        ))
    };
    let answer = respond_with(keyed.as_deref(), StatusCode::OK);
    let workspace = access.workspace(&ctx);
    let frozen = workspace.update_answered(id, freeze, answer).await?;
    Ok(frozen.into_response())
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
