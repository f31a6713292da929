//! REST representations as JSON values: what audit records and event `data`
//! carry.

use serde::Serialize;

use crate::domain::error::ApiError;

/// `value` as the JSON the REST API returns for it. Our types always
/// serialize (no maps with non-string keys, no failing `Serialize` impls);
/// should one ever fail, the change is refused rather than recorded with a
/// `null` in place of the entity.
pub fn representation<T: Serialize + ?Sized>(value: &T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(value).map_err(ApiError::internal)
}
