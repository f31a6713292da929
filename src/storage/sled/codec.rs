//! The one value codec: a version byte, then bincode 2 (serde mode).
//! Changing the encoding means a new version byte, not a silent reinterpretation.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::storage::StoreError;

/// The version byte of values written by this build.
const VERSION: u8 = 1;

/// Why a stored value could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum Malformed {
    /// The value is empty.
    #[error("empty value")]
    Empty,
    /// The version byte is not one this build reads.
    #[error("unknown value version {0}")]
    Version(u8),
    /// Bytes were left after the value.
    #[error("trailing bytes after value")]
    Trailing,
}

/// Encodes a value for storage.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, StoreError> {
    let mut bytes = vec![VERSION];
    let body = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(StoreError::codec)?;
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

/// Decodes a stored value, refusing unknown versions and trailing bytes.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    let body = versioned(bytes)?;
    let (value, used) = bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map_err(StoreError::codec)?;
    if used != body.len() {
        return Err(StoreError::codec(Malformed::Trailing));
    }
    Ok(value)
}

/// Decodes only the leading fields of a stored value, as `T` (a tuple or
/// struct of those fields, in order): what a filter looks at, without
/// decoding the rest (a log record's envelope, say).
pub fn decode_head<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    bincode::serde::decode_from_slice(versioned(bytes)?, bincode::config::standard())
        .map(|(value, _)| value)
        .map_err(StoreError::codec)
}

/// The encoded value after its version byte, if this build reads it.
fn versioned(bytes: &[u8]) -> Result<&[u8], StoreError> {
    match bytes.split_first() {
        Some((&VERSION, body)) => Ok(body),
        Some((version, _)) => Err(StoreError::codec(Malformed::Version(*version))),
        None => Err(StoreError::codec(Malformed::Empty)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::permissions::PermissionSet;
    use crate::domain::resources::fields::JsonObject;
    use crate::time::Timestamp;

    #[test]
    fn a_head_is_the_leading_fields() {
        let value = (7u8, "seven".to_string(), vec![0u8; 1000]);
        let bytes = encode(&value).unwrap_or_default();
        let head: Result<(u8, String), _> = decode_head(&bytes);
        assert_eq!(head.ok(), Some((7, "seven".to_string())));
        assert!(
            decode::<(u8, String)>(&bytes).is_err(),
            "decode wants it all"
        );
        let mut wrong = bytes;
        wrong[0] = 9;
        assert!(decode_head::<u8>(&wrong).is_err());
    }

    #[test]
    fn round_trips_and_checks_version() {
        let value = (
            Timestamp(1234),
            PermissionSet::member_default(),
            Some("x".to_string()),
        );
        let bytes = encode(&value).unwrap_or_default();
        assert_eq!(bytes[0], VERSION);
        let back: Result<(Timestamp, PermissionSet, Option<String>), _> = decode(&bytes);
        assert_eq!(back.ok(), Some(value));
        let mut wrong = bytes.clone();
        wrong[0] = 9;
        assert!(decode::<(Timestamp, PermissionSet, Option<String>)>(&wrong).is_err());
        assert!(decode::<u8>(&[]).is_err());
    }

    /// A resource travels to storage as `AnyResource`; its row must be the
    /// bytes of the value itself, as data directories already hold them.
    #[test]
    fn a_resource_of_any_kind_is_stored_as_itself() {
        use crate::domain::resources::projects::Project;
        use crate::domain::resources::AnyResource;
        use crate::ids::{OrgId, ResourceId};
        let project = Project {
            id: ResourceId::generate(),
            organization_id: OrgId::generate(),
            name: "Core".into(),
            repository_url: Some("https://example.com/r".into()),
            created_at: Timestamp(1_700_000_000_000),
            updated_at: Timestamp(1_700_000_000_001),
        };
        let direct = encode(&project).unwrap_or_default();
        let any = encode(&AnyResource::from(project.clone())).unwrap_or_default();
        assert!(!direct.is_empty());
        assert_eq!(any, direct);
        let back: Option<Project> = decode(&any).ok();
        assert_eq!(back, Some(project));
    }

    #[test]
    fn json_objects_survive_the_binary_codec() {
        let mut map = serde_json::Map::new();
        map.insert("nested".into(), serde_json::json!({"a": [1, 2, null]}));
        let value = JsonObject(map);
        let bytes = encode(&value).unwrap_or_default();
        let back: Option<JsonObject> = decode(&bytes).ok();
        assert_eq!(back, Some(value));
    }
}
