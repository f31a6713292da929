//! The outermost middleware: gives each request its id (stored for audit
//! records, echoed in `X-Request-Id`), holds it to the token's rate limit
//! (see [`rate_limit`](crate::http::rate_limit)), runs it inside a `request`
//! span so every log line it causes carries the id, then writes one
//! access-log line and records the HTTP metrics under the matched route
//! template.

use std::time::Instant;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};
use tracing::Instrument;

use crate::http::request_id::{request_id_of, X_REQUEST_ID};
use crate::http::route_template::route_template;
use crate::http::AppContext;

/// The route label of requests that matched no route (bounded cardinality).
const UNMATCHED: &str = "unmatched";

/// Middleware body (for `actix_web::middleware::from_fn`).
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let started = Instant::now();
    let id = request_id_of(&req);
    req.extensions_mut().insert(id.clone());
    let method = method_label(req.method());
    let span = tracing::info_span!("request", request_id = %id.0, method, path = req.path());
    let ctx = req.app_data::<web::Data<AppContext>>().cloned();
    let verdict = ctx
        .as_ref()
        .and_then(|ctx| ctx.rate_limiter.as_ref())
        .and_then(|limiter| limiter.judge(&req));
    let mut response = match verdict {
        Some(verdict) if !verdict.allowed => {
            req.into_response(verdict.refusal()).map_into_right_body()
        }
        _ => next
            .call(req)
            .instrument(span.clone())
            .await?
            .map_into_left_body(),
    };
    if let Some(verdict) = verdict {
        verdict.set_headers(response.headers_mut());
    }
    let elapsed = started.elapsed();
    let status = response.status();
    let route = route_template(response.request());
    let route = route.as_deref().unwrap_or(UNMATCHED);
    if let Some(ctx) = &ctx {
        ctx.metrics
            .http_request(route, method, status, elapsed.as_secs_f64());
    }
    span.in_scope(|| {
        tracing::info!(
            request_id = %id.0,
            route,
            status = status.as_u16(),
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "request"
        )
    });
    if let Ok(value) = HeaderValue::from_str(&id.0) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(X_REQUEST_ID), value);
    }
    Ok(response)
}

/// The method as a label: the standard ones by name, anything else "other".
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
