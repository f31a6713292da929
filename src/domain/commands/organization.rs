//! Organization commands: creation (admin API) and renaming / plan changes.

use serde::Deserialize;

use crate::domain::access::{caller_permissions, require, Caller};
use crate::domain::audit::{AuditAction, AuditDraft};
use crate::domain::commands::roles::system_roles;
use crate::domain::commands::{Change, Reply};
use crate::domain::error::ApiError;
use crate::domain::input::{non_null, Input};
use crate::domain::member::Membership;
use crate::domain::names::display_name;
use crate::domain::org_state::{Edit, OrgState};
use crate::domain::organization::{Organization, Plan};
use crate::domain::permissions::Permission;
use crate::domain::representation::representation;
use crate::domain::user::User;
use crate::ids::{OrgId, UserId};
use crate::time::Timestamp;

/// Body of `POST /admin/organizations`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateOrganizationBody {
    /// Display name.
    pub name: String,
    /// Initial plan.
    pub plan: Plan,
    /// The first Owner.
    pub owner_user_id: String,
}

impl CreateOrganizationBody {
    /// The owner's id: 400 when malformed.
    pub fn owner_id(&self) -> Result<UserId, ApiError> {
        UserId::parse(&self.owner_user_id)
            .ok_or_else(|| ApiError::invalid("owner_user_id", "must be a user id (UUID)"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateOrganizationBody {
    #[serde(default, deserialize_with = "non_null")]
    name: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    plan: Option<Plan>,
}

/// A new organization with its Owner and Member roles and its first Owner.
pub fn create_organization(
    body: &CreateOrganizationBody,
    owner: &User,
) -> Result<(OrgState, Change), ApiError> {
    let name = display_name("name", &body.name)?;
    let now = Timestamp::now();
    let org = Organization {
        id: OrgId::generate(),
        name,
        plan: body.plan,
        created_at: now,
        updated_at: now,
    };
    let (owner_role, member_role) = system_roles(org.id, now);
    let membership = Membership {
        role_expires_at: None,
        organization_id: org.id,
        user_id: owner.id,
        email: owner.email.clone(),
        role_id: owner_role.id,
        joined_at: now,
        updated_at: now,
    };
    let state = OrgState::new(
        org.clone(),
        vec![owner_role.clone(), member_role.clone()],
        vec![membership.clone()],
        None,
    );
    let change = Change {
        edits: vec![
            Edit::PutRole(owner_role),
            Edit::PutRole(member_role),
            Edit::PutMember(membership),
            Edit::PutOrg(org.clone()),
        ],
        audits: vec![AuditDraft {
            action: AuditAction::OrganizationCreated,
            target_type: "organization",
            target_id: org.id.to_string(),
            before: None,
            after: Some(representation(&org)?),
        }],
        events: Vec::new(),
        reply: Reply::Organization(org),
    };
    Ok((state, change))
}

/// `PATCH /organizations/{orgId}` and `PATCH /admin/organizations/{orgId}`:
/// `name` needs `org:settings:manage`, `plan` needs `org:billing:manage`.
pub fn update_organization(
    state: &OrgState,
    caller: Caller,
    input: &Input,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    let fields = input.object_keys();
    if fields.iter().any(|f| f == "name") {
        require(held, Permission::SettingsManage)?;
    }
    if fields.iter().any(|f| f == "plan") {
        require(held, Permission::BillingManage)?;
    }
    let body: UpdateOrganizationBody = input.parse()?;
    let mut org = state.org.clone();
    if let Some(name) = &body.name {
        org.name = display_name("name", name)?;
    }
    if let Some(plan) = body.plan {
        org.plan = plan;
    }
    if org == state.org {
        return Ok(Change::none(Reply::Organization(org)));
    }
    org.updated_at = Timestamp::now();
    let action = if org.plan != state.org.plan {
        AuditAction::OrganizationPlanChanged
    } else {
        AuditAction::OrganizationRenamed
    };
    Ok(Change {
        audits: vec![AuditDraft {
            action,
            target_type: "organization",
            target_id: org.id.to_string(),
            before: Some(representation(&state.org)?),
            after: Some(representation(&org)?),
        }],
        events: Vec::new(),
        reply: Reply::Organization(org.clone()),
        edits: vec![Edit::PutOrg(org)],
    })
}
