//! `GET /organizations/{org_id}/audit-log` (CONTRACT §5a), newest first.

use actix_web::{get, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::audit::AuditView;
use crate::domain::error::ApiError;
use crate::http::extract::OrgAccess;
use crate::http::paging::{ListQuery, Page};
use crate::http::problem::Problem;
use crate::http::route_table::AUDIT_LOG;
use crate::http::AppContext;
use crate::ids::AuditId;

/// Registers the route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(audit_log);
}

/// The audit log (`org:settings:read`), newest first; `?action=` filters.
#[utoipa::path(tag = "audit", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"),
        ("action" = Option<String>, Query, description = "e.g. role.created"),
        crate::http::paging::IdPaging),
    responses((status = 200, body = Page<AuditView>), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/audit-log")]
async fn audit_log(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(AUDIT_LOG)?;
    let query = ListQuery::parse(&req)?;
    let org = access.org_id();
    let before = query.cursor_id(AuditId::from_slice)?;
    let action = query.filters.get("action").map(String::as_str);
    let page = ctx
        .store
        .audit_page(org, before, query.limit_or_default(), action)
        .await?;
    Ok(HttpResponse::Ok().json(Page::of_records(page, |r| *r.id.as_bytes(), |r| r.view())))
}
