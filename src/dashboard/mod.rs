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

/// A JavaScript module `assets/js/$file`, served at `/js/$file`.
macro_rules! module {
    ($file:literal) => {
        Asset {
            path: concat!("/js/", $file),
            content_type: "text/javascript; charset=utf-8",
            body: include_str!(concat!("assets/js/", $file)),
        }
    };
}

/// The page, its styles and its script: native ES modules, no build step.
const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("assets/index.html"),
    },
    Asset {
        path: "/app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/app.css"),
    },
    module!("main.js"),
    module!("nav.js"),
    module!("dom.js"),
    module!("format.js"),
    module!("state.js"),
    module!("api.js"),
    module!("feedback.js"),
    module!("catalog.js"),
    module!("chart.js"),
    module!("schema-example.js"),
    module!("pages/signin.js"),
    module!("pages/roles.js"),
    module!("pages/role-form.js"),
    module!("pages/members.js"),
    module!("pages/webhook.js"),
    module!("pages/events.js"),
    module!("pages/deliveries.js"),
    module!("pages/audit.js"),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What stands between `open` and the next `close`, at each place `open` stands.
    fn between<'a>(text: &'a str, open: &'a str, close: char) -> impl Iterator<Item = &'a str> {
        text.match_indices(open)
            .filter_map(move |(i, _)| text[i + open.len()..].split(close).next())
    }

    /// `spec` (`./x.js`, `../x.js`) resolved against the module served at `from`.
    fn resolve(from: &str, spec: &str) -> String {
        let mut parts: Vec<&str> = from.split('/').collect();
        parts.pop();
        for part in spec.split('/') {
            match part {
                "." => {}
                ".." => {
                    parts.pop();
                }
                _ => parts.push(part),
            }
        }
        parts.join("/")
    }

    #[test]
    fn every_module_the_page_loads_is_served() {
        let served: Vec<&str> = ASSETS.iter().map(|a| a.path).collect();
        let page = ASSETS.iter().find(|a| a.path == "/").map_or("", |a| a.body);
        let scripts: Vec<&str> = between(page, "<script type=\"module\" src=\"", '"').collect();
        assert_eq!(scripts, ["/js/main.js"]);
        for asset in ASSETS {
            for spec in between(asset.body, " from '", '\'') {
                let target = resolve(asset.path, spec);
                assert!(
                    served.contains(&target.as_str()),
                    "{} imports {spec}, which is not served",
                    asset.path
                );
            }
        }
    }
}
