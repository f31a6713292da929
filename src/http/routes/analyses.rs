//! Pull-request analyses: `/organizations/{org_id}/pull-requests/analyses…` (CONTRACT §7).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::{ApiError, Reference};
use crate::domain::event::EventKind;
use crate::domain::resources::analyses::{
    violation_data, Analysis, AnalysisStatus, ReportAnalysis,
};
use crate::domain::resources::decisions::{Decision, DecisionStatus};
use crate::domain::resources::Changed;
use crate::domain::resources::Resource;
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::idempotency::{respond_with, Keyed};
use crate::http::org_routes::locate;
use crate::http::problem::Problem;
use crate::http::resource_routes::{reads, Doc, Listed};
use crate::http::route_table::*;
use crate::http::AppContext;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(report)
        .service(reads::<Analysis>())
        .service(accept);
}

impl Listed for Analysis {
    const TAG: &'static str = "pull-requests";
    const ONE: &'static str = "analysis";
    const MANY: &'static str = "analyses";
    const LIST: Doc = Doc::new(ANALYSES_LIST, "Analyses, newest first.");
    const GET: Doc = Doc::new(ANALYSES_GET, "One analysis.");
}

/// The scanner reports an analysis; fires `pr.analysis_completed`, then one
/// `pr.violation_detected` per finding whose decision is ACCEPTED. 422 when a
/// finding names no decision of this organization.
#[utoipa::path(operation_id = "report_analysis", tag = "pull-requests", security(("bearer" = [])), request_body = ReportAnalysis, params(("org_id" = String, Path)),
    responses((status = 201, body = Analysis), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 404, body = Problem), (status = 422, body = Problem)))]
#[post("")]
async fn report(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    access.allow(ANALYSES_CREATE)?;
    let analysis = input.parse::<ReportAnalysis>()?.build()?;
    let workspace = access.workspace(&ctx);
    let mut changed = Changed::new(analysis.clone()).emit(EventKind::PrAnalysisCompleted);
    for finding in &analysis.findings {
        let decision: Decision = match workspace.get(finding.decision_id).await {
            Err(ApiError::NotFound(_)) => {
                return Err(ApiError::UnknownReference(
                    Reference::Decision,
                    "findings.decision_id",
                ))
            }
            found => found?,
        };
        if decision.status == DecisionStatus::Accepted {
            changed = changed.emit_data(
                EventKind::PrViolationDetected,
                violation_data(&analysis, finding)?,
            );
        }
    }
    let answer = respond_with(keyed.as_deref(), StatusCode::CREATED);
    Ok(workspace.create(changed, answer).await?.into_response())
}

/// Accepts the proposed findings; fires `pr.results_accepted` (409 when already accepted).
#[utoipa::path(operation_id = "accept_analysis", tag = "pull-requests", security(("bearer" = [])), params(("org_id" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Analysis), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[post("/{id}/accept")]
async fn accept(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    let id = locate::<Analysis>(&ctx, &access, &path.1, ANALYSES_ACCEPT)
        .await?
        .id();
    let workspace = access.workspace(&ctx);
    let accept = |mut analysis: Analysis| {
        if analysis.status == AnalysisStatus::Accepted {
            return Err(ApiError::InvalidTransition {
                from: "accepted".into(),
                to: "accepted".into(),
            });
        }
        analysis.status = AnalysisStatus::Accepted;
        Ok(Changed::new(analysis).emit(EventKind::PrResultsAccepted))
    };
    let answer = respond_with(keyed.as_deref(), StatusCode::OK);
    Ok(workspace
        .update_answered(id, accept, answer)
        .await?
        .into_response())
}
