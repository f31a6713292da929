//! The bearer credential of a request, parsed in one place: authentication
//! and the rate limiter must agree on which token a header names, whatever
//! its spelling (`Bearer` in any case, any run of spaces before the token).

use actix_web::http::header::{self, HeaderMap};

use crate::domain::error::ApiError;

/// The token of an `Authorization: Bearer <token>` header: the scheme in
/// any case, then the token with the spaces around it trimmed; 401 when
/// the header is missing or says anything else.
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    let missing =
        ApiError::Unauthenticated("a bearer token is required (Authorization: Bearer <token>)");
    let value = headers.get(header::AUTHORIZATION).ok_or(missing)?;
    let malformed =
        || ApiError::Unauthenticated("the Authorization header must be 'Bearer <token>'");
    let text = value.to_str().map_err(|_| malformed())?;
    let (scheme, token) = text.split_once(' ').ok_or_else(malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
        return Err(malformed());
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderMap, HeaderValue, AUTHORIZATION};

    use super::*;

    fn parsed(value: &str) -> Option<String> {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(value).ok()?);
        bearer_token(&headers).ok().map(str::to_owned)
    }

    #[test]
    fn every_spelling_of_one_token_names_it() {
        for value in [
            "Bearer rc_abc",
            "bearer rc_abc",
            "BEARER rc_abc",
            "Bearer      rc_abc",
            "Bearer rc_abc   ",
            &format!("Bearer{}rc_abc", " ".repeat(39)),
        ] {
            assert_eq!(parsed(value).as_deref(), Some("rc_abc"), "{value:?}");
        }
    }

    #[test]
    fn anything_else_names_no_token() {
        for value in [
            "",
            "Bearer",
            "Bearer ",
            "Bearer    ",
            "Basic rc_abc",
            "Bearer rc_abc extra",
            "Bearerrc_abc",
            "Token rc_abc",
        ] {
            assert_eq!(parsed(value), None, "{value:?}");
        }
        assert!(bearer_token(&HeaderMap::new()).is_err());
    }
}
