//! A request body as it arrived, parsed only when the command reaches its
//! validation step, so that 401/404/403/402 are answered before 400/413/415
//! (CONTRACT §1, order of checks).

use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::domain::error::ApiError;

/// Most bytes a request body may have (CONTRACT §1).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The body of a request.
#[derive(Clone, Debug)]
pub enum Input {
    /// A JSON-typed body within the limit.
    Json(Bytes),
    /// The body exceeded [`BODY_LIMIT`].
    TooLarge,
    /// The body was not sent as JSON.
    NotJson,
    /// The body could not be read.
    Broken(String),
}

impl Input {
    /// Parses the body as `T`, naming the offending field on failure.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        let bytes = match self {
            Input::Json(bytes) => bytes,
            Input::TooLarge => return Err(ApiError::PayloadTooLarge),
            Input::NotJson => return Err(ApiError::UnsupportedMediaType),
            Input::Broken(why) => return Err(ApiError::malformed(why.clone())),
        };
        // serde's derived structs also accept arrays (fields by position):
        // every body of this API is an object, so anything else is refused.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::malformed("the body must be a JSON object"));
        }
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            // serde reports a missing field at its parent; name the field itself.
            let missing = inner
                .to_string()
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split('`').next())
                .map(str::to_owned);
            match (path.as_str(), missing) {
                ("" | ".", Some(field)) => ApiError::invalid(&field, "is required"),
                ("" | ".", None) => ApiError::malformed(format!("invalid JSON body: {inner}")),
                (parent, Some(field)) => {
                    ApiError::invalid(&format!("{parent}.{field}"), "is required")
                }
                (path, None) => ApiError::invalid(path, inner.to_string()),
            }
        })?;
        deserializer
            .end()
            .map_err(|err| ApiError::malformed(format!("invalid JSON body: {err}")))?;
        Ok(value)
    }

    /// The top-level member names of a JSON object body, for commands whose
    /// required permission depends on which fields are present.
    pub fn object_keys(&self) -> Vec<String> {
        match self {
            Input::Json(bytes) => {
                serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(bytes)
                    .map(|map| map.keys().cloned().collect())
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }
}

/// For `Option` fields: absent is `None`, but an explicit `null` is a type
/// error (it would otherwise silently mean "absent").
pub fn non_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        #[serde(default, deserialize_with = "non_null")]
        note: Option<String>,
    }

    fn parse(text: &str) -> Result<Body, ApiError> {
        Input::Json(Bytes::copy_from_slice(text.as_bytes())).parse()
    }

    #[test]
    fn errors_name_the_field() {
        let err = parse(r#"{"name": 5}"#).err();
        assert!(
            matches!(err, Some(ApiError::Validation { field: Some(ref f), .. }) if f == "name")
        );
        assert!(matches!(
            parse(r#"{"name":"a","note":null}"#),
            Err(ApiError::Validation { .. })
        ));
        assert!(matches!(
            parse(r#"{"name":"a","x":1}"#),
            Err(ApiError::Validation { .. })
        ));
        assert!(matches!(parse("[1]"), Err(ApiError::Validation { .. })));
        assert!(matches!(
            parse(r#"["a"]"#),
            Err(ApiError::Validation { .. })
        ));
        assert!(matches!(parse(" null"), Err(ApiError::Validation { .. })));
        assert!(matches!(
            parse(r#"{"name":"a"} x"#),
            Err(ApiError::Validation { .. })
        ));
        assert!(parse(r#"{"name":"a"}"#).is_ok());
        let missing = parse(r#"{"note":"x"}"#).err();
        assert!(
            matches!(missing, Some(ApiError::Validation { field: Some(ref f), .. }) if f == "name")
        );
    }

    #[test]
    fn transport_problems_map_to_their_codes() {
        assert!(matches!(
            Input::TooLarge.parse::<Body>(),
            Err(ApiError::PayloadTooLarge)
        ));
        assert!(matches!(
            Input::NotJson.parse::<Body>(),
            Err(ApiError::UnsupportedMediaType)
        ));
    }
}
