//! `GET` / `PATCH /organizations/{org_id}`.

use actix_web::http::StatusCode;
use actix_web::{get, patch, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::actors::messages::OrgCommand;
use crate::domain::error::ApiError;
use crate::domain::organization::Organization;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::problem::Problem;
use crate::http::route_table::{ORG_GET, ORG_UPDATE};
use crate::http::routes::admin::UpdateOrganization;
use crate::http::AppContext;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_org).service(update_org);
}

/// The organization (any member).
#[utoipa::path(operation_id = "get_organization", tag = "organizations", security(("bearer" = [])), params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = Organization), (status = 401, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn get_org(access: OrgAccess) -> Result<HttpResponse, ApiError> {
    access.allow(ORG_GET)?;
    Ok(HttpResponse::Ok().json(&access.state.org))
}

/// Renames the organization (`org:settings:manage`) or changes its plan (`org:billing:manage`).
#[utoipa::path(operation_id = "update_organization", tag = "organizations", security(("bearer" = [])), request_body = UpdateOrganization,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = Organization), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem)))]
#[patch("")]
async fn update_org(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    ctx.run_command(
        &access,
        &req,
        ORG_UPDATE,
        OrgCommand::UpdateOrganization(input),
        StatusCode::OK,
    )
    .await
}
