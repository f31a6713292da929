//! `GET /organizations/{org_id}/audit-log` (CONTRACT §5a), newest first.

use actix_web::{get, web, HttpRequest, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::audit::{AuditAction, AuditView};
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
#[utoipa::path(operation_id = "list_audit_records", tag = "audit", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"),
        ("action" = Option<AuditAction>, Query, description = "only records of this action"),
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
    let action = match query.filters.get("action") {
        None => None,
        Some(name) => Some(
            AuditAction::parse(name)
                .ok_or_else(|| ApiError::invalid("action", "not an audit action"))?
                .as_str(),
        ),
    };
    let page = ctx
        .store
        .audit_page(org, before, query.limit_or_default(), action)
        .await?;
    Ok(HttpResponse::Ok().json(Page::of_records(page, |r| *r.id.as_bytes(), |r| r.view())))
}
