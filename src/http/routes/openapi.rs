//! `GET /openapi.json`: the OpenAPI 3.1 document of every route.

use actix_web::{get, web, App, HttpResponse};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::OpenApi;
use utoipa_actix_web::service_config::ServiceConfig;
use utoipa_actix_web::AppExt;

/// Registers the route.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(openapi_json);
}

/// The document, collected from the route registrations themselves, so a
/// route cannot exist without being documented.
pub fn document() -> OpenApi {
    let (_, mut api) = App::new()
        .into_utoipa_app()
        .configure(super::configure)
        .split_for_parts();
    api.info.title = "rolecall".into();
    api.info.version = env!("CARGO_PKG_VERSION").into();
    api.info.description = Some("Per-organization role catalog with server-side permission enforcement, and signed webhooks.".into());
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    api
}

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(tag = "meta", responses((status = 200, description = "OpenAPI 3.1 document", body = Object)))]
#[get("/openapi.json")]
async fn openapi_json(doc: web::Data<OpenApi>) -> HttpResponse {
    HttpResponse::Ok().json(doc.get_ref())
}
