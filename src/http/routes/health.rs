//! `GET /healthz`.

use actix_web::{get, HttpResponse};
use serde_json::json;
use utoipa_actix_web::service_config::ServiceConfig;

/// Registers the route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(healthz);
}

/// Liveness: 200 `{"status":"ok"}` once the server is serving.
#[utoipa::path(tag = "meta", responses((status = 200, description = "The server is up", body = Object, example = json!({"status": "ok"}))))]
#[get("/healthz")]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}
