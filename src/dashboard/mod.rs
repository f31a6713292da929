//! The org admins' dashboard: static files embedded in the binary and served
//! at `/`, so it works offline on-prem. It only calls the public API; the
//! server stays the enforcement.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{web, HttpResponse};

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("assets/index.html"),
    },
    Asset {
        path: "/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/app.js"),
    },
    Asset {
        path: "/app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/app.css"),
    },
];

/// Nothing is fetched from elsewhere; scripts and styles come from this origin only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Registers one GET route per embedded file (plain actix: not in the OpenAPI document).
pub fn configure(cfg: &mut web::ServiceConfig) {
    for asset in ASSETS {
        cfg.route(asset.path, web::get().to(move || serve(asset)));
    }
}

async fn serve(asset: &'static Asset) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        ))
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(asset.body)
}
