//! Validation of resource fields (issue 4): each violation is a 400
//! VALIDATION_FAILED naming its field.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::domain::error::ApiError;

/// Longest title, in characters.
pub const TITLE_MAX: usize = 200;
/// Largest body text, in bytes.
pub const BODY_MAX: usize = 64 * 1024;
/// Most tags.
pub const TAGS_MAX: usize = 20;
/// Longest tag, in characters.
pub const TAG_MAX: usize = 50;
/// Most links or attachments.
pub const LINKS_MAX: usize = 20;
/// Longest link, attachment or URL, in characters.
pub const URL_MAX: usize = 2048;
/// Largest metadata object, in bytes of JSON.
pub const METADATA_MAX: usize = 16 * 1024;

/// A title: trimmed, 1..=200 characters, no control characters.
pub fn title(field: &str, raw: &str) -> Result<String, ApiError> {
    short_text(field, raw, TITLE_MAX)
}

/// Trimmed, 1..=`max` characters, no control characters.
pub fn short_text(field: &str, raw: &str, max: usize) -> Result<String, ApiError> {
    let trimmed = raw.trim();
    let length = trimmed.chars().count();
    if length == 0 || length > max {
        return Err(ApiError::invalid(
            field,
            format!("must be 1 to {max} characters"),
        ));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(trimmed.to_owned())
}

/// A body text: at most 64 KiB.
pub fn body(field: &str, raw: &str) -> Result<String, ApiError> {
    if raw.len() > BODY_MAX {
        return Err(ApiError::invalid(field, "must be at most 64 KiB"));
    }
    Ok(raw.to_owned())
}

/// At most `max_items` entries, each valid short text of at most `max_len` characters.
pub fn list(
    field: &str,
    items: &[String],
    max_items: usize,
    max_len: usize,
) -> Result<Vec<String>, ApiError> {
    if items.len() > max_items {
        return Err(ApiError::invalid(
            field,
            format!("must have at most {max_items} entries"),
        ));
    }
    items
        .iter()
        .map(|item| short_text(field, item, max_len))
        .collect()
}

/// Up to 20 tags of up to 50 characters.
pub fn tags(items: &[String]) -> Result<Vec<String>, ApiError> {
    list("tags", items, TAGS_MAX, TAG_MAX)
}

/// A JSON object of at most 16 KiB.
pub fn metadata(value: serde_json::Map<String, serde_json::Value>) -> Result<JsonObject, ApiError> {
    if serde_json::to_vec(&value)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
        > METADATA_MAX
    {
        return Err(ApiError::invalid(
            "metadata",
            "must be at most 16 KiB of JSON",
        ));
    }
    Ok(JsonObject(value))
}

/// A JSON object field. The binary codec cannot carry self-describing
/// values, so in storage it is kept as JSON text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonObject(pub serde_json::Map<String, serde_json::Value>);

impl Serialize for JsonObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            self.0.serialize(serializer)
        } else {
            let text = serde_json::to_string(&self.0).map_err(serde::ser::Error::custom)?;
            serializer.serialize_str(&text)
        }
    }
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            serde_json::Map::deserialize(deserializer).map(JsonObject)
        } else {
            let text = String::deserialize(deserializer)?;
            serde_json::from_str(&text)
                .map(JsonObject)
                .map_err(serde::de::Error::custom)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert!(title("title", &"x".repeat(200)).is_ok());
        assert!(title("title", &"x".repeat(201)).is_err());
        assert!(title("title", " ").is_err());
        assert!(body("body", &"x".repeat(BODY_MAX)).is_ok());
        assert!(body("body", &"x".repeat(BODY_MAX + 1)).is_err());
        assert!(tags(&vec!["t".to_string(); 20]).is_ok());
        assert!(tags(&vec!["t".to_string(); 21]).is_err());
        assert!(tags(&["x".repeat(51)]).is_err());
        let mut big = serde_json::Map::new();
        big.insert(
            "k".into(),
            serde_json::Value::String("x".repeat(METADATA_MAX)),
        );
        assert!(metadata(big).is_err());
        assert!(metadata(serde_json::Map::new()).is_ok());
    }
}
