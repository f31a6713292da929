//! Organizations and their plans.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::OrgId;
use crate::time::Timestamp;

/// A billing plan. Only Enterprise may write custom roles (seed 3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    /// The free plan.
    Free,
    /// The Pro plan.
    Pro,
    /// The Enterprise plan: custom roles are writable.
    Enterprise,
}

/// An organization, stored and returned as is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Organization {
    /// The organization's id.
    pub id: OrgId,
    /// Display name.
    pub name: String,
    /// Current plan.
    pub plan: Plan,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}
