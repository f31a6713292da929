//! Memories (CONTRACT §7).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::input::non_null;
use crate::domain::resources::fields::{self, JsonObject};
use crate::domain::resources::{Resource, ResourceKind};
use crate::ids::{OrgId, ResourceId};
use crate::time::Timestamp;

/// A memory; also its REST representation and its events' `data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Memory {
    /// Id.
    pub id: ResourceId,
    /// Owner.
    pub organization_id: OrgId,
    /// The captured text (at most 64 KiB).
    pub content: String,
    /// A JSON object of at most 16 KiB.
    pub metadata: JsonObject,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl Resource for Memory {
    const KIND: ResourceKind = ResourceKind::Memory;
    const NAME: &'static str = "memory";
    fn id(&self) -> ResourceId {
        self.id
    }
    fn touch(&mut self, now: Timestamp) {
        self.updated_at = now;
    }
}

/// Body of `POST …/memories`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateMemory {
    content: String,
    #[serde(default, deserialize_with = "non_null")]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Body of `PATCH …/memories/{id}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemory {
    #[serde(default, deserialize_with = "non_null")]
    content: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

impl CreateMemory {
    /// A validated new memory.
    pub fn build(self, org: OrgId) -> Result<Memory, ApiError> {
        let now = Timestamp::now();
        Ok(Memory {
            id: ResourceId::generate(),
            organization_id: org,
            content: fields::body("content", &self.content)?,
            metadata: fields::metadata(self.metadata.unwrap_or_default())?,
            created_at: now,
            updated_at: now,
        })
    }
}

impl UpdateMemory {
    /// Validates the patch; returns a function applying it.
    pub fn validate(self) -> Result<impl Fn(&Memory) -> Memory, ApiError> {
        let content = self
            .content
            .as_deref()
            .map(|c| fields::body("content", c))
            .transpose()?;
        let metadata = self.metadata.map(fields::metadata).transpose()?;
        Ok(move |current: &Memory| {
            let mut next = current.clone();
            next.content = content.clone().unwrap_or(next.content);
            next.metadata = metadata.clone().unwrap_or(next.metadata);
            next
        })
    }
}
