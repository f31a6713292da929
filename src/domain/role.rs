//! Roles: the stored record and its REST representation.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::permissions::PermissionSet;
use crate::ids::{OrgId, RoleId};
use crate::time::Timestamp;

/// A role as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    /// The role's id.
    pub id: RoleId,
    /// The owning organization.
    pub organization_id: OrgId,
    /// Display name, unique per organization after folding.
    pub name: String,
    /// What the role is for.
    pub description: String,
    /// The keys holders of the role get. Owner's is always the whole catalog.
    pub permissions: PermissionSet,
    /// True only for Owner: sealed name and permissions.
    pub is_immutable: bool,
    /// True for Owner and Member: never deletable.
    pub is_system: bool,
    /// Bumped on every change; the ETag is derived from it.
    pub revision: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl Role {
    /// The strong ETag of this revision, quoted as HTTP wants it.
    pub fn etag(&self) -> String {
        format!("\"{}-{}\"", self.id.0.simple(), self.revision)
    }

    /// The REST representation.
    pub fn view(&self, member_count: usize) -> RoleView {
        RoleView {
            id: self.id,
            organization_id: self.organization_id,
            name: self.name.clone(),
            description: self.description.clone(),
            permissions: self.permissions,
            is_immutable: self.is_immutable,
            is_system: self.is_system,
            member_count,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A role as the API returns it (CONTRACT §4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct RoleView {
    /// The role's id.
    pub id: RoleId,
    /// The owning organization.
    pub organization_id: OrgId,
    /// Display name.
    pub name: String,
    /// What the role is for.
    pub description: String,
    /// Sorted permission keys.
    pub permissions: PermissionSet,
    /// True only for Owner.
    pub is_immutable: bool,
    /// True for Owner and Member.
    pub is_system: bool,
    /// How many members hold the role.
    pub member_count: usize,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}
