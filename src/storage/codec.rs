//! The one value codec: a version byte, then bincode 2 (serde mode).
//! Changing the encoding means a new version byte, not a silent reinterpretation.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::storage::StorageError;

/// The version byte of values written by this build.
const VERSION: u8 = 1;

/// Encodes a value for storage.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StorageError> {
    let mut bytes = vec![VERSION];
    let body = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(|err| StorageError::Codec(err.to_string()))?;
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

/// Decodes a stored value, refusing unknown versions and trailing bytes.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StorageError> {
    match bytes.split_first() {
        Some((&VERSION, body)) => {
            let (value, used) =
                bincode::serde::decode_from_slice(body, bincode::config::standard())
                    .map_err(|err| StorageError::Codec(err.to_string()))?;
            if used != body.len() {
                return Err(StorageError::Codec("trailing bytes after value".into()));
            }
            Ok(value)
        }
        Some((version, _)) => Err(StorageError::Codec(format!(
            "unknown value version {version}"
        ))),
        None => Err(StorageError::Codec("empty value".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::permissions::PermissionSet;
    use crate::time::Timestamp;

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
}
