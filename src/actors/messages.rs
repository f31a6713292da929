//! Every actor message, in one place.

use actix::Message;

use crate::domain::access::{Caller, IfMatch};
use crate::domain::audit::RequestIdText;
use crate::domain::commands::Reply;
use crate::domain::error::ApiError;
use crate::domain::input::Input;
use crate::ids::{RoleId, UserId};

/// A mutation of one organization.
#[derive(Clone, Debug)]
pub enum OrgCommand {
    /// Create a custom role.
    CreateRole(Input),
    /// Edit a role.
    UpdateRole(RoleId, Option<IfMatch>, Input),
    /// Delete a role.
    DeleteRole(RoleId, Option<IfMatch>),
    /// Invite a user.
    AddMember(Input),
    /// Change a member's role.
    ChangeMemberRole(UserId, Input),
    /// Remove a member.
    RemoveMember(UserId),
    /// Rename or change the plan.
    UpdateOrganization(Input),
}

/// Asks an organization actor to run a command; answers once the change is
/// durable and visible to every later request.
#[derive(Clone, Debug, Message)]
#[rtype(result = "Result<Reply, ApiError>")]
pub struct Mutate {
    /// Who asks.
    pub caller: Caller,
    /// The request, for the audit record.
    pub request_id: RequestIdText,
    /// What to do.
    pub command: OrgCommand,
}
