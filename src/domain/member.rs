//! Memberships: a user in an organization, holding exactly one role.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{OrgId, RoleId, UserId};
use crate::time::Timestamp;

/// A membership as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// The organization.
    pub organization_id: OrgId,
    /// The member.
    pub user_id: UserId,
    /// The member's email, copied at join time (emails never change).
    pub email: String,
    /// The role held; always a role of the same organization.
    pub role_id: RoleId,
    /// When the user joined.
    pub joined_at: Timestamp,
    /// When the membership last changed.
    pub updated_at: Timestamp,
    /// When the role assignment ends and the membership falls back to the
    /// Member role; never on Owner. Stored beside the membership, not in
    /// its encoded value (sled: a tree of its own, so memberships written by
    /// earlier builds read unchanged; PostgreSQL: a column).
    #[serde(skip)]
    pub role_expires_at: Option<Timestamp>,
}

impl Membership {
    /// The REST representation, with the role's current name.
    pub fn view(&self, role_name: &str) -> MembershipView {
        MembershipView {
            organization_id: self.organization_id,
            user_id: self.user_id,
            email: self.email.clone(),
            role_id: self.role_id,
            role_name: role_name.to_owned(),
            role_expires_at: self.role_expires_at,
            joined_at: self.joined_at,
            updated_at: self.updated_at,
        }
    }
}

/// A membership as the API returns it (CONTRACT §5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct MembershipView {
    /// The organization.
    pub organization_id: OrgId,
    /// The member.
    pub user_id: UserId,
    /// The member's email.
    pub email: String,
    /// The role held.
    pub role_id: RoleId,
    /// The role's current name.
    pub role_name: String,
    /// When the role assignment ends (the member then holds Member); null
    /// when it does not.
    pub role_expires_at: Option<Timestamp>,
    /// When the user joined.
    pub joined_at: Timestamp,
    /// When the membership last changed.
    pub updated_at: Timestamp,
}
