//! Request ids: honour a sane incoming `X-Request-Id`, else make one.

use actix_web::dev::ServiceRequest;

use crate::domain::audit::RequestIdText;

/// The header carrying the request id.
pub const X_REQUEST_ID: &str = "x-request-id";

/// At most 128 visible ASCII characters: anything else could forge log
/// lines or bloat records, so it is replaced by a fresh id.
fn acceptable(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}

/// The request's id: its `X-Request-Id` when acceptable, else a new one.
pub fn request_id_of(req: &ServiceRequest) -> RequestIdText {
    req.headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(|v| RequestIdText(v.to_owned()))
        .unwrap_or_else(RequestIdText::generate)
}

#[cfg(test)]
mod tests {
    use super::acceptable;

    #[test]
    fn only_short_visible_ascii_ids_are_kept() {
        assert!(acceptable("req-42_ABC.x"));
        assert!(!acceptable(""));
        assert!(!acceptable("two words"));
        assert!(!acceptable("line\nbreak"));
        assert!(!acceptable(&"x".repeat(129)));
    }
}
