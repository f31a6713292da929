//! Request ids: honour a sane incoming `X-Request-Id`, else make one; store
//! it for handlers (audit records) and echo it in the response.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::HttpMessage;

use crate::domain::audit::RequestIdText;

/// The header carrying the request id.
pub const X_REQUEST_ID: &str = "x-request-id";

fn acceptable(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}

/// Middleware body (for `actix_web::middleware::from_fn`).
pub async fn assign_request_id(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let id = req
        .headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(|v| RequestIdText(v.to_owned()))
        .unwrap_or_else(RequestIdText::generate);
    req.extensions_mut().insert(id.clone());
    let mut response = next.call(req).await?;
    if let Ok(value) = HeaderValue::from_str(&id.0) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(X_REQUEST_ID), value);
    }
    Ok(response)
}
