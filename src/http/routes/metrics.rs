//! `GET /metrics`: the Prometheus text exposition.

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{get, web, HttpResponse};
use utoipa_actix_web::service_config::ServiceConfig;

use crate::actors::dispatcher::GetQueueDepth;
use crate::domain::error::ApiError;
use crate::http::extract::MetricsAuth;
use crate::http::problem::Problem;
use crate::http::AppContext;
use crate::metrics::Gauges;

/// The exposition format's content type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Registers the route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(metrics);
}

/// Metrics in Prometheus text format: HTTP requests by route template,
/// deliveries by outcome and attempt, queue depth, outbox size, live
/// organization actors and database size. Open unless `metrics.token` is set.
#[utoipa::path(operation_id = "get_metrics", tag = "meta", security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Prometheus text format", content_type = "text/plain", body = String),
        (status = 401, body = Problem)))]
#[get("/metrics")]
async fn metrics(_: MetricsAuth, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    // A dispatcher that cannot answer is a failure to report, not a queue of zero.
    let depth = ctx
        .queue_depth
        .send(GetQueueDepth)
        .await
        .map_err(ApiError::internal)?;
    let gauges = Gauges {
        ready: depth.ready as u64,
        in_flight: depth.in_flight as u64,
        scheduled: depth.scheduled as u64,
        outbox: ctx.store.outbox_len().await? as u64,
        org_actors: ctx.registry.live_actors() as u64,
        storage_bytes: ctx.store.size_on_disk().await?,
    };
    let text = ctx.metrics.render(gauges);
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, PROMETHEUS_TEXT))
        .body(text))
}
