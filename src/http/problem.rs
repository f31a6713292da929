//! RFC 9457 problem details: the one place errors become responses.

use actix_web::body::BoxBody;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use crate::domain::error::ApiError;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The shape of every error body (extra members vary by code).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Problem {
    /// Always `about:blank`.
    r#type: String,
    /// The status's reason phrase.
    title: String,
    /// The HTTP status.
    status: u16,
    /// Machine-readable code, e.g. `NAME_CONFLICT`.
    code: String,
    /// What went wrong, for people.
    detail: String,
}

/// A problem+json response for `status`, `code` and `detail`, plus `extra` members.
pub fn problem_response(
    status: StatusCode,
    code: &str,
    detail: &str,
    extra: Map<String, Value>,
) -> HttpResponse {
    let mut body = Map::new();
    body.insert("type".into(), json!("about:blank"));
    body.insert(
        "title".into(),
        json!(status.canonical_reason().unwrap_or("Error")),
    );
    body.insert("status".into(), json!(status.as_u16()));
    body.insert("code".into(), json!(code));
    body.insert("detail".into(), json!(detail));
    body.extend(extra);
    HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)))
        .body(Value::Object(body).to_string())
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse<BoxBody> {
        let mut extra = Map::new();
        match self {
            ApiError::Validation {
                field: Some(field), ..
            } => {
                extra.insert("field".into(), json!(field));
            }
            ApiError::UnknownPermission(keys) => {
                extra.insert("unknown".into(), json!(keys));
            }
            ApiError::UnknownEvent(ids) => {
                extra.insert("unknown".into(), json!(ids));
            }
            ApiError::Forbidden(permission) => {
                extra.insert("missing_permission".into(), json!(permission.key()));
            }
            ApiError::PermissionEscalation(keys) => {
                extra.insert("missing_permissions".into(), json!(keys));
            }
            ApiError::InvalidTransition { from, to } => {
                extra.insert("from".into(), json!(from));
                extra.insert("to".into(), json!(to));
            }
            ApiError::UnknownReference(_, field) => {
                extra.insert("field".into(), json!(field));
            }
            ApiError::RoleInUse(count) => {
                extra.insert("member_count".into(), json!(count));
            }
            ApiError::Internal(err) => {
                tracing::error!(error = %err, source = ?std::error::Error::source(err.as_ref()), "request failed");
            }
            _ => {}
        }
        let mut response =
            problem_response(self.status_code(), self.code(), &self.to_string(), extra);
        match self {
            ApiError::Unauthenticated(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::MethodNotAllowed(allow) => {
                if let Ok(value) = HeaderValue::from_str(allow) {
                    response.headers_mut().insert(header::ALLOW, value);
                }
            }
            _ => {}
        }
        response
    }
}
