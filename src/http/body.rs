//! The request body, read up to the limit but not yet judged: whether it is
//! JSON, too large or malformed is reported at the command's validation
//! step, after authentication and authorization (CONTRACT §1 check order).

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;

use crate::domain::error::ApiError;
use crate::domain::input::{Input, BODY_LIMIT};

/// Past the limit, at most this much more is read (and dropped) so the
/// client can still read our 413 instead of a reset connection.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// A request body, for handlers of routes that take one.
pub struct JsonInput(pub Input);

fn is_json(req: &HttpRequest) -> bool {
    let Some(value) = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl FromRequest for JsonInput {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let json = is_json(req);
        let mut payload = payload.take();
        Box::pin(async move {
            let mut body = Vec::new();
            let mut seen = 0usize;
            while let Some(chunk) = payload.next().await {
                let chunk = match chunk {
                    Ok(chunk) => chunk,
                    Err(err) => {
                        return Ok(JsonInput(Input::Broken(format!(
                            "the body could not be read: {err}"
                        ))))
                    }
                };
                seen += chunk.len();
                if seen <= BODY_LIMIT {
                    body.extend_from_slice(&chunk);
                } else if seen > BODY_LIMIT + DRAIN_LIMIT {
                    break;
                }
            }
            let input = if seen > BODY_LIMIT {
                Input::TooLarge
            } else if !json {
                Input::NotJson
            } else {
                Input::Json(body)
            };
            Ok(JsonInput(input))
        })
    }
}
