//! RFC 9457 problem details: the one place errors become responses.

use actix_web::body::BoxBody;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::ConnectionType;
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
    /// The field that is wrong (VALIDATION_FAILED, UNKNOWN_DECISION,
    /// UNKNOWN_PROJECT).
    field: Option<String>,
    /// The permission keys or event types not known (UNKNOWN_PERMISSION,
    /// UNKNOWN_EVENT).
    unknown: Option<Vec<String>>,
    /// The permission the caller lacks (FORBIDDEN).
    missing_permission: Option<String>,
    /// The permissions a role change would grant that the caller lacks
    /// (PERMISSION_ESCALATION).
    missing_permissions: Option<Vec<String>>,
    /// The status a refused transition started from (INVALID_TRANSITION).
    from: Option<String>,
    /// The status a refused transition asked for (INVALID_TRANSITION).
    to: Option<String>,
    /// Members still holding the role (ROLE_IN_USE).
    #[schema(minimum = 1)]
    member_count: Option<u64>,
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

/// The HTTP status of each error (CONTRACT §1).
pub fn status_of(error: &ApiError) -> StatusCode {
    use ApiError::*;
    match error {
        Validation { .. }
        | UnknownPermission(_)
        | UnknownEvent(_)
        | InvalidUrl(_)
        | MustHaveOwner => StatusCode::BAD_REQUEST,
        Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        LicenseRequired => StatusCode::PAYMENT_REQUIRED,
        Forbidden(_) | PermissionEscalation(_) | RoleImmutable | SystemRole => {
            StatusCode::FORBIDDEN
        }
        NotFound(_) => StatusCode::NOT_FOUND,
        MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
        NameConflict(_)
        | AlreadyMember
        | EmailTaken
        | TestRequired(_)
        | InvalidTransition { .. }
        | CapsuleFrozen => StatusCode::CONFLICT,
        PreconditionFailed => StatusCode::PRECONDITION_FAILED,
        PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        RoleInUse(_) | UnknownRole | UnknownReference(..) => StatusCode::UNPROCESSABLE_ENTITY,
        StorageUnavailable(_) | StorageUnconfirmed(_) => StatusCode::SERVICE_UNAVAILABLE,
        RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
        IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
        IdempotencyKeyInProgress => StatusCode::CONFLICT,
        BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
        ServerBusy => StatusCode::SERVICE_UNAVAILABLE,
        Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Seconds a client should wait before retrying while storage is
/// unavailable: the store retries reopening within a second, and a few
/// seconds let a freed disk or a failed-over database come back.
pub const RETRY_AFTER_SECS: u32 = 2;

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        status_of(self)
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
            ApiError::Internal(_) => {
                tracing::error!(error = %crate::telemetry::cause_chain(self), "request failed");
            }
            ApiError::StorageUnavailable(_) | ApiError::StorageUnconfirmed(_) => {
                tracing::warn!(error = %crate::telemetry::cause_chain(self), "storage unavailable");
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
            ApiError::StorageUnavailable(_) | ApiError::StorageUnconfirmed(_) => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            ApiError::RateLimited(seconds) => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*seconds));
            }
            ApiError::BodyTimeout(_) => {
                response
                    .head_mut()
                    .set_connection_type(ConnectionType::Close);
            }
            ApiError::IdempotencyKeyInProgress => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1));
            }
            ApiError::ServerBusy => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1));
                response
                    .head_mut()
                    .set_connection_type(ConnectionType::Close);
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("flush failed")]
    struct Flush(#[source] std::io::Error);

    #[test]
    fn a_500_names_every_cause() {
        let disk = std::io::Error::other("No space left on device");
        let error = ApiError::internal(Flush(disk));
        assert_eq!(
            crate::telemetry::cause_chain(&error),
            "internal error: flush failed: No space left on device"
        );
        assert_eq!(status_of(&error), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
