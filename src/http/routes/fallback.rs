//! Requests that match no route: 405 with `Allow` when the path exists under
//! another method, else 404, both as problem+json.

use actix_web::{web, HttpRequest, HttpResponse};
use utoipa::openapi::OpenApi;

use crate::domain::error::ApiError;

/// Whether a concrete path matches a template such as `/a/{id}/b`.
fn matches(template: &str, path: &str) -> bool {
    let mut template_parts = template.split('/');
    let mut path_parts = path.split('/');
    loop {
        match (template_parts.next(), path_parts.next()) {
            (None, None) => return true,
            (Some(t), Some(p)) if t.starts_with('{') || t == p => continue,
            _ => return false,
        }
    }
}

/// The default service.
pub async fn no_route(req: HttpRequest, doc: web::Data<OpenApi>) -> Result<HttpResponse, ApiError> {
    let path = req.path();
    let allowed: Vec<String> = doc
        .paths
        .paths
        .iter()
        .filter(|(template, _)| matches(template, path))
        .flat_map(|(_, item)| {
            [
                ("GET", item.get.is_some()),
                ("POST", item.post.is_some()),
                ("PUT", item.put.is_some()),
                ("PATCH", item.patch.is_some()),
                ("DELETE", item.delete.is_some()),
            ]
            .into_iter()
            .filter(|(_, present)| *present)
            .map(|(method, _)| method.to_owned())
        })
        .collect();
    if allowed.is_empty() {
        Err(ApiError::NotFound("route"))
    } else {
        Err(ApiError::MethodNotAllowed(allowed.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn template_matching() {
        assert!(matches(
            "/organizations/{org_id}/roles",
            "/organizations/x/roles"
        ));
        assert!(!matches(
            "/organizations/{org_id}/roles",
            "/organizations/x/roles/y"
        ));
        assert!(!matches("/organizations/{org_id}", "/organizations"));
        assert!(matches("/healthz", "/healthz"));
    }
}
