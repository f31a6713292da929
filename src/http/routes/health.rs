//! `GET /healthz` (liveness) and `GET /readyz` (readiness: the store takes
//! writes). A load balancer routes to a node while `/readyz` answers 200;
//! a supervisor restarts a process only when `/healthz` fails.

use actix_web::{get, web, HttpResponse};
use serde_json::json;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::domain::error::ApiError;
use crate::http::problem::Problem;
use crate::http::AppContext;

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(healthz).service(readyz);
}

/// Liveness: 200 `{"status":"ok"}` once the server is serving.
#[utoipa::path(operation_id = "get_liveness", tag = "meta", responses((status = 200, description = "The server is up", body = Object, example = json!({"status": "ok"}))))]
#[get("/healthz")]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Readiness: 200 `{"status":"ready"}` while the store takes writes (a
/// write succeeded within the last second, or a probe write is flushed
/// now); 503 STORAGE_UNAVAILABLE with `Retry-After` while it does not.
#[utoipa::path(operation_id = "get_readiness", tag = "meta", responses(
    (status = 200, description = "The store takes writes", body = Object, example = json!({"status": "ready"})),
    (status = 503, description = "The store cannot take writes now", body = Problem,
        headers(("Retry-After" = u32, description = "seconds")))))]
#[get("/readyz")]
async fn readyz(ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.store.ready().await?;
    Ok(HttpResponse::Ok().json(json!({"status": "ready"})))
}
