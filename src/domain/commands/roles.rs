//! Role catalog commands (seed 4.1, CONTRACT §4).

use serde::Deserialize;

use crate::domain::access::{
    caller_permissions, check_precondition, forbid_escalation, require_enterprise, Caller, IfMatch,
    Needs,
};
use crate::domain::audit::{AuditAction, AuditDraft};
use crate::domain::commands::{Change, Reply};
use crate::domain::error::ApiError;
use crate::domain::input::{non_null, Input};
use crate::domain::names::{bounded_text, RoleName, ROLE_DESCRIPTION_MAX};
use crate::domain::org_state::{Edit, OrgState};
use crate::domain::permissions::PermissionSet;
use crate::domain::representation::representation;
use crate::domain::role::Role;
use crate::ids::RoleId;
use crate::time::Timestamp;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRoleBody {
    name: String,
    #[serde(default, deserialize_with = "non_null")]
    description: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    permissions: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    copy_permissions_from: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateRoleBody {
    #[serde(default, deserialize_with = "non_null")]
    name: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    description: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    permissions: Option<Vec<String>>,
}

/// Parses a list of keys: 400 UNKNOWN_PERMISSION naming the unknown ones.
pub fn parse_permissions(keys: &[String]) -> Result<PermissionSet, ApiError> {
    PermissionSet::parse(keys).map_err(|unknown| ApiError::UnknownPermission(unknown.0))
}

/// Looks up a role id given in a body: 400 when malformed, 422 when it is
/// not a role of this organization.
pub fn referenced_role<'a>(
    state: &'a OrgState,
    field: &str,
    raw: &str,
) -> Result<&'a Role, ApiError> {
    let id =
        RoleId::parse(raw).ok_or_else(|| ApiError::invalid(field, "must be a role id (UUID)"))?;
    state
        .roles
        .get(&id)
        .map(|r| r.as_ref())
        .ok_or(ApiError::UnknownRole)
}

fn existing_role(state: &OrgState, role_id: RoleId) -> Result<&Role, ApiError> {
    state
        .roles
        .get(&role_id)
        .map(|r| r.as_ref())
        .ok_or(ApiError::NotFound("role"))
}

fn ensure_unique_name(
    state: &OrgState,
    name: &RoleName,
    except: Option<RoleId>,
) -> Result<(), ApiError> {
    match state.role_named(&name.folded()) {
        Some(other) if Some(other.id) != except => {
            Err(ApiError::NameConflict(name.as_str().to_owned()))
        }
        _ => Ok(()),
    }
}

fn role_reply(state: &OrgState, role: &Role) -> Reply {
    Reply::Role(state.role_view(role), role.etag())
}

/// The Owner and Member rows of a new organization.
pub fn system_roles(state_org: crate::ids::OrgId, now: Timestamp) -> (Role, Role) {
    let owner = Role {
        id: RoleId::generate(),
        organization_id: state_org,
        name: "Owner".into(),
        description: "Full access to the organization, always.".into(),
        permissions: PermissionSet::ALL,
        is_immutable: true,
        is_system: true,
        revision: 1,
        created_at: now,
        updated_at: now,
    };
    let member = Role {
        id: RoleId::generate(),
        organization_id: state_org,
        name: "Member".into(),
        description: "Standard access: everything but deleting and managing.".into(),
        permissions: PermissionSet::member_default(),
        is_immutable: false,
        is_system: true,
        revision: 1,
        created_at: now,
        updated_at: now,
    };
    (owner, member)
}

/// `POST /organizations/{orgId}/roles`.
pub fn create_role(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    input: &Input,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    needs.check(held, caller, None)?;
    require_enterprise(state)?;
    let body: CreateRoleBody = input.parse()?;
    let name = RoleName::parse(&body.name)?;
    let description = bounded_text(
        "description",
        body.description.as_deref().unwrap_or(""),
        ROLE_DESCRIPTION_MAX,
    )?;
    let mut permissions = parse_permissions(body.permissions.as_deref().unwrap_or_default())?;
    if let Some(source) = &body.copy_permissions_from {
        let source = referenced_role(state, "copy_permissions_from", source)?;
        permissions = permissions.union(OrgState::role_permissions(source));
    }
    forbid_escalation(held, permissions)?;
    ensure_unique_name(state, &name, None)?;

    let now = Timestamp::now();
    let role = Role {
        id: RoleId::generate(),
        organization_id: state.id(),
        name: name.into_string(),
        description,
        permissions,
        is_immutable: false,
        is_system: false,
        revision: 1,
        created_at: now,
        updated_at: now,
    };
    Ok(Change {
        audits: vec![AuditDraft {
            action: AuditAction::RoleCreated,
            target_type: "role",
            target_id: role.id.to_string(),
            before: None,
            after: Some(representation(&role.view(0))?),
        }],
        events: Vec::new(),
        reply: Reply::Role(role.view(0), role.etag()),
        edits: vec![Edit::PutRole(role)],
    })
}

/// `PATCH /organizations/{orgId}/roles/{roleId}`.
pub fn update_role(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    role_id: RoleId,
    if_match: Option<&IfMatch>,
    input: &Input,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    let role = existing_role(state, role_id)?;
    needs.check(held, caller, None)?;
    require_enterprise(state)?;
    check_precondition(if_match, &role.etag())?;
    let body: UpdateRoleBody = input.parse()?;
    let name = body.name.as_deref().map(RoleName::parse).transpose()?;
    let description = body
        .description
        .as_deref()
        .map(|d| bounded_text("description", d, ROLE_DESCRIPTION_MAX))
        .transpose()?;
    let permissions = body
        .permissions
        .as_deref()
        .map(parse_permissions)
        .transpose()?;
    if role.is_immutable {
        return Err(ApiError::RoleImmutable);
    }
    // Changing a role's keys needs every key it holds before and after:
    // otherwise an edit could demote members who hold more than the caller
    // (CONTRACT §11), which acting on them directly may not.
    if let Some(permissions) = permissions.filter(|p| *p != role.permissions) {
        forbid_escalation(held, permissions.union(role.permissions))?;
    }
    if let Some(name) = &name {
        ensure_unique_name(state, name, Some(role.id))?;
    }

    let mut updated = role.clone();
    if let Some(name) = name {
        updated.name = name.into_string();
    }
    if let Some(description) = description {
        updated.description = description;
    }
    if let Some(permissions) = permissions {
        updated.permissions = permissions;
    }
    if updated == *role {
        return Ok(Change::none(role_reply(state, role)));
    }
    updated.revision += 1;
    updated.updated_at = Timestamp::now();
    Ok(Change {
        audits: vec![AuditDraft {
            action: AuditAction::RoleUpdated,
            target_type: "role",
            target_id: role.id.to_string(),
            before: Some(representation(&state.role_view(role))?),
            after: Some(representation(&state.role_view(&updated))?),
        }],
        events: Vec::new(),
        reply: role_reply(state, &updated),
        edits: vec![Edit::PutRole(updated)],
    })
}

/// `DELETE /organizations/{orgId}/roles/{roleId}`.
pub fn delete_role(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    role_id: RoleId,
    if_match: Option<&IfMatch>,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    let role = existing_role(state, role_id)?;
    needs.check(held, caller, None)?;
    require_enterprise(state)?;
    check_precondition(if_match, &role.etag())?;
    if role.is_immutable {
        return Err(ApiError::RoleImmutable);
    }
    if role.is_system {
        return Err(ApiError::SystemRole);
    }
    let members = state.member_count(role.id);
    if members > 0 {
        return Err(ApiError::RoleInUse(members));
    }
    Ok(Change {
        edits: vec![Edit::DeleteRole(state.id(), role.id)],
        audits: vec![AuditDraft {
            action: AuditAction::RoleDeleted,
            target_type: "role",
            target_id: role.id.to_string(),
            before: Some(representation(&state.role_view(role))?),
            after: None,
        }],
        events: Vec::new(),
        reply: Reply::Deleted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::member::Membership;
    use crate::domain::organization::{Organization, Plan};
    use crate::domain::permissions::Permission;
    use crate::ids::{OrgId, UserId};

    /// What the role routes need.
    const MANAGE: Needs = Needs::keys(&[Permission::SettingsManage]);

    fn org_with(plan: Plan) -> (OrgState, UserId, UserId) {
        let now = Timestamp::now();
        let org_id = OrgId::generate();
        let (owner, member) = system_roles(org_id, now);
        let (owner_user, member_user) = (UserId::generate(), UserId::generate());
        let membership = |user: UserId, role: RoleId| Membership {
            role_expires_at: None,
            organization_id: org_id,
            user_id: user,
            email: format!("{user}@example.test"),
            role_id: role,
            joined_at: now,
            updated_at: now,
        };
        let members = vec![
            membership(owner_user, owner.id),
            membership(member_user, member.id),
        ];
        let org = Organization {
            id: org_id,
            name: "Acme".into(),
            plan,
            created_at: now,
            updated_at: now,
        };
        (
            OrgState::new(org, vec![owner, member], members, None),
            owner_user,
            member_user,
        )
    }

    fn body(text: &str) -> Input {
        Input::Json(bytes::Bytes::copy_from_slice(text.as_bytes()))
    }

    fn code(result: Result<Change, ApiError>) -> &'static str {
        match result {
            Ok(_) => "OK",
            Err(err) => err.code(),
        }
    }

    #[test]
    fn check_order_for_create() {
        let (enterprise, owner, member) = org_with(Plan::Enterprise);
        let (pro, pro_owner, pro_member) = org_with(Plan::Pro);
        let stranger = Caller::User(UserId::generate());
        let broken = body("{");
        // 404 before everything else.
        assert_eq!(
            code(create_role(&enterprise, stranger, MANAGE, &broken)),
            "NOT_FOUND"
        );
        // 403 before 402 and 400.
        assert_eq!(
            code(create_role(&pro, Caller::User(pro_member), MANAGE, &broken)),
            "FORBIDDEN"
        );
        // 402 before 400.
        assert_eq!(
            code(create_role(&pro, Caller::User(pro_owner), MANAGE, &broken)),
            "LICENSE_REQUIRED"
        );
        assert_eq!(
            code(create_role(
                &pro,
                Caller::User(pro_owner),
                MANAGE,
                &Input::NotJson
            )),
            "LICENSE_REQUIRED"
        );
        // 400 before 409.
        assert_eq!(
            code(create_role(
                &enterprise,
                Caller::User(owner),
                MANAGE,
                &body(r#"{"name":"owner","x":1}"#)
            )),
            "VALIDATION_FAILED"
        );
        assert_eq!(
            code(create_role(
                &enterprise,
                Caller::User(owner),
                MANAGE,
                &body(r#"{"name":"OWNER"}"#)
            )),
            "NAME_CONFLICT"
        );
        assert_eq!(
            code(create_role(
                &enterprise,
                Caller::User(member),
                MANAGE,
                &body("{}")
            )),
            "FORBIDDEN"
        );
    }

    #[test]
    fn check_order_for_update_and_delete() {
        let (state, owner, member) = org_with(Plan::Enterprise);
        let owner_role = state
            .owner_role()
            .map(|r| r.id)
            .unwrap_or(RoleId::generate());
        let missing = RoleId::generate();
        // 404 resource before 403.
        assert_eq!(
            code(update_role(
                &state,
                Caller::User(member),
                MANAGE,
                missing,
                None,
                &body("{}")
            )),
            "NOT_FOUND"
        );
        assert_eq!(
            code(update_role(
                &state,
                Caller::User(member),
                MANAGE,
                owner_role,
                None,
                &body("{}")
            )),
            "FORBIDDEN"
        );
        // 412 before 400 and 403 immutability.
        let stale = IfMatch::parse("\"nope\"");
        assert_eq!(
            code(update_role(
                &state,
                Caller::User(owner),
                MANAGE,
                owner_role,
                Some(&stale),
                &body("{")
            )),
            "PRECONDITION_FAILED"
        );
        // 400 before immutability.
        assert_eq!(
            code(update_role(
                &state,
                Caller::User(owner),
                MANAGE,
                owner_role,
                None,
                &body("{")
            )),
            "VALIDATION_FAILED"
        );
        assert_eq!(
            code(update_role(
                &state,
                Caller::User(owner),
                MANAGE,
                owner_role,
                None,
                &body("{}")
            )),
            "ROLE_IMMUTABLE"
        );
        assert_eq!(
            code(delete_role(
                &state,
                Caller::User(owner),
                MANAGE,
                owner_role,
                None
            )),
            "ROLE_IMMUTABLE"
        );
    }

    #[test]
    fn no_op_patch_changes_nothing() {
        let (state, owner, _) = org_with(Plan::Enterprise);
        let member_role = state
            .roles
            .values()
            .find(|r| r.is_system && !r.is_immutable)
            .map(|r| r.id);
        let change = update_role(
            &state,
            Caller::User(owner),
            MANAGE,
            member_role.unwrap_or(RoleId::generate()),
            None,
            &body(r#"{"name":"Member"}"#),
        );
        assert!(
            matches!(change, Ok(Change { ref edits, ref audits, .. }) if edits.is_empty() && audits.is_empty())
        );
    }
}
