//! Membership commands (CONTRACT §5): invite, change role, remove.

use serde::Deserialize;

use crate::domain::access::{caller_permissions, forbid_escalation, Caller, Needs};
use crate::domain::audit::{AuditAction, AuditDraft};
use crate::domain::commands::roles::referenced_role;
use crate::domain::commands::{Change, Reply};
use crate::domain::error::ApiError;
use crate::domain::event::{Event, EventKind};
use crate::domain::input::{non_null, Input};
use crate::domain::member::Membership;
use crate::domain::names::fold;
use crate::domain::org_state::{Edit, OrgState};
use crate::domain::representation::representation;
use crate::domain::role::Role;
use crate::domain::user::User;
use crate::ids::UserId;
use crate::time::Timestamp;

/// Finds users for invitations; implemented by the account directory.
pub trait UserLookup {
    /// The user with this id.
    fn user_by_id(&self, id: UserId) -> Option<User>;
    /// The user with this email, compared case-insensitively.
    fn user_by_email(&self, folded_email: &str) -> Option<User>;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddMemberBody {
    #[serde(default, deserialize_with = "non_null")]
    user_id: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    email: Option<String>,
    role_id: String,
    /// `null` and absent both mean "no expiry" here.
    #[serde(default)]
    role_expires_at: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeRoleBody {
    #[serde(default, deserialize_with = "non_null")]
    role_id: Option<String>,
    /// Absent: unchanged (or none, with a new role); `null`: cleared; a
    /// date-time: the new end. The one optional field where `null` means
    /// something, hence the nested option.
    #[serde(default, deserialize_with = "non_null")]
    role_expires_at: Option<Option<String>>,
}

/// How far ahead a role assignment may end.
pub const MAX_ROLE_TERM_MS: i64 = 365 * 24 * 60 * 60 * 1000;

const EXPIRY_FIELD: &str = "role_expires_at";

/// A client's `role_expires_at`: an RFC 3339 instant in the future, at most
/// a year ahead. Checked before the role is looked up (400 before 422).
fn role_expiry(text: &str, now: Timestamp) -> Result<Timestamp, ApiError> {
    let at = Timestamp::parse_client(text)
        .ok_or_else(|| ApiError::invalid(EXPIRY_FIELD, "must be an RFC 3339 date-time"))?;
    if at <= now {
        return Err(ApiError::invalid(EXPIRY_FIELD, "must be in the future"));
    }
    if at.millis() - now.millis() > MAX_ROLE_TERM_MS {
        return Err(ApiError::invalid(
            EXPIRY_FIELD,
            "must be at most one year ahead",
        ));
    }
    Ok(at)
}

/// Only a role other than the built-in two can expire: Owner never (so an
/// expiry cannot leave an organization without an Owner), and Member is
/// what an expired assignment falls back to.
fn may_expire(role: &Role) -> Result<(), ApiError> {
    if role.is_immutable {
        return Err(ApiError::invalid(
            EXPIRY_FIELD,
            "the Owner role cannot expire",
        ));
    }
    if role.is_system {
        return Err(ApiError::invalid(
            EXPIRY_FIELD,
            "the Member role is what an assignment falls back to; it cannot expire",
        ));
    }
    Ok(())
}

fn existing_member(state: &OrgState, user: UserId) -> Result<&Membership, ApiError> {
    state
        .members
        .get(&user)
        .map(|m| m.as_ref())
        .ok_or(ApiError::NotFound("member"))
}

/// A caller may not modify a member whose role holds keys the caller lacks
/// (so an admin cannot demote or remove an Owner), except themself.
fn forbid_acting_above(
    state: &OrgState,
    caller: Caller,
    held: crate::domain::permissions::PermissionSet,
    target: &Membership,
) -> Result<(), ApiError> {
    if caller.user_id() == Some(target.user_id) {
        return Ok(());
    }
    match state.roles.get(&target.role_id) {
        Some(role) => forbid_escalation(held, OrgState::role_permissions(role)),
        None => Ok(()),
    }
}

fn is_owner(state: &OrgState, member: &Membership) -> bool {
    state
        .roles
        .get(&member.role_id)
        .is_some_and(|r| r.is_immutable)
}

fn member_event(kind: EventKind, view: &serde_json::Value, now: Timestamp) -> Event {
    Event {
        kind,
        occurred_at: now,
        data: view.clone(),
    }
}

/// `POST /organizations/{orgId}/members`.
pub fn add_member(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    users: &dyn UserLookup,
    input: &Input,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    needs.check(held, caller, None)?;
    let body: AddMemberBody = input.parse()?;
    let user = match (&body.user_id, &body.email) {
        (Some(id), None) => {
            let id = UserId::parse(id)
                .ok_or_else(|| ApiError::invalid("user_id", "must be a user id (UUID)"))?;
            users.user_by_id(id)
        }
        (None, Some(email)) => users.user_by_email(&fold(email.trim())),
        _ => return Err(ApiError::malformed("give exactly one of user_id and email")),
    };
    let user = user.ok_or(ApiError::NotFound("user"))?;
    let now = Timestamp::now();
    let role_expires_at = body
        .role_expires_at
        .as_deref()
        .map(|text| role_expiry(text, now))
        .transpose()?;
    let role = referenced_role(state, "role_id", &body.role_id)?;
    if role_expires_at.is_some() {
        may_expire(role)?;
    }
    forbid_escalation(held, OrgState::role_permissions(role))?;
    if state.members.contains_key(&user.id) {
        return Err(ApiError::AlreadyMember);
    }

    let member = Membership {
        organization_id: state.id(),
        user_id: user.id,
        email: user.email,
        role_id: role.id,
        joined_at: now,
        updated_at: now,
        role_expires_at,
    };
    let view = member.view(&role.name);
    let data = representation(&view)?;
    Ok(Change {
        edits: vec![Edit::PutMember(member)],
        audits: vec![AuditDraft {
            action: AuditAction::MemberAdded,
            target_type: "member",
            target_id: user.id.to_string(),
            before: None,
            after: Some(data.clone()),
        }],
        events: vec![member_event(EventKind::MemberAdded, &data, now)],
        reply: Reply::Member(view),
    })
}

/// `PATCH /organizations/{orgId}/members/{userId}`.
pub fn change_member_role(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    target: UserId,
    input: &Input,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    let stored = existing_member(state, target)?;
    needs.check(held, caller, Some(target))?;
    let body: ChangeRoleBody = input.parse()?;
    let now = Timestamp::now();
    let new_expiry = match &body.role_expires_at {
        Some(Some(text)) => Some(Some(role_expiry(text, now)?)),
        Some(None) => Some(None),
        None => None,
    };
    // An assignment that ran out is Member's already, whatever is stored
    // (the organization's actor records the fall-back before this runs).
    let fallen = state.fallen_back(stored, now);
    let member = fallen.as_ref().unwrap_or(stored);
    let role = match &body.role_id {
        Some(raw) => referenced_role(state, "role_id", raw)?,
        None if body.role_expires_at.is_some() => state
            .roles
            .get(&member.role_id)
            .map(|r| r.as_ref())
            .ok_or(ApiError::UnknownRole)?,
        None => return Err(ApiError::malformed("give role_id, role_expires_at or both")),
    };
    let role_expires_at = match new_expiry {
        Some(Some(at)) => {
            may_expire(role)?;
            Some(at)
        }
        Some(None) => None,
        // A new role is a new assignment: it runs until changed.
        None if role.id != member.role_id => None,
        None => member.role_expires_at,
    };
    forbid_escalation(held, OrgState::role_permissions(role))?;
    forbid_acting_above(state, caller, held, member)?;
    if member.role_id == role.id && member.role_expires_at == role_expires_at {
        return Ok(Change::none(Reply::Member(state.member_view(member))));
    }
    if role.id != member.role_id && is_owner(state, member) && state.owner_count() <= 1 {
        return Err(ApiError::MustHaveOwner);
    }

    let mut updated = member.clone();
    updated.role_id = role.id;
    updated.role_expires_at = role_expires_at;
    updated.updated_at = now;
    let view = updated.view(&role.name);
    let data = representation(&view)?;
    // The event tells subscribers of a new role; an expiry set or cleared
    // changes no permission today, so only the audit log records it.
    let events = if role.id != member.role_id {
        vec![member_event(EventKind::MemberRoleChanged, &data, now)]
    } else {
        Vec::new()
    };
    Ok(Change {
        edits: vec![Edit::PutMember(updated)],
        audits: vec![AuditDraft {
            action: AuditAction::MemberRoleChanged,
            target_type: "member",
            target_id: target.to_string(),
            before: Some(representation(&member.view(role_name(state, member)))?),
            after: Some(data.clone()),
        }],
        events,
        reply: Reply::Member(view),
    })
}

/// The name of the role `member` holds.
fn role_name<'s>(state: &'s OrgState, member: &Membership) -> &'s str {
    state
        .roles
        .get(&member.role_id)
        .map(|r| r.name.as_str())
        .unwrap_or("")
}

/// The fall-back of `user`'s expired role assignment to the Member role, as
/// one change: the membership, the audit record `member.role_expired`, and
/// the `member.role_changed` event. Nothing when the assignment has not
/// expired (or was changed meanwhile, perhaps on another node).
pub fn expire_role(state: &OrgState, user: UserId, now: Timestamp) -> Result<Change, ApiError> {
    let stored = existing_member(state, user)?;
    let Some(fallen) = state.fallen_back(stored, now) else {
        if stored.role_expires_at.is_some_and(|at| at <= now) {
            // An Owner's expiry, left by a build that did not know them:
            // Owner never expires, so the stale date is dropped, nothing else.
            let mut kept = stored.clone();
            kept.role_expires_at = None;
            return Ok(Change {
                edits: vec![Edit::PutMember(kept)],
                ..Change::none(Reply::Member(state.member_view(stored)))
            });
        }
        return Ok(Change::none(Reply::Member(state.member_view(stored))));
    };
    let view = fallen.view(role_name(state, &fallen));
    let data = representation(&view)?;
    Ok(Change {
        edits: vec![Edit::PutMember(fallen.clone())],
        audits: vec![AuditDraft {
            action: AuditAction::MemberRoleExpired,
            target_type: "member",
            target_id: user.to_string(),
            before: Some(representation(&stored.view(role_name(state, stored)))?),
            after: Some(data.clone()),
        }],
        events: vec![member_event(
            EventKind::MemberRoleChanged,
            &data,
            fallen.updated_at,
        )],
        reply: Reply::Member(view),
    })
}

/// `DELETE /organizations/{orgId}/members/{userId}`.
/// Anyone may leave: the route spares oneself (`or_self`).
pub fn remove_member(
    state: &OrgState,
    caller: Caller,
    needs: Needs,
    target: UserId,
) -> Result<Change, ApiError> {
    let held = caller_permissions(state, caller)?;
    let member = existing_member(state, target)?;
    needs.check(held, caller, Some(target))?;
    forbid_acting_above(state, caller, held, member)?;
    if is_owner(state, member) && state.owner_count() <= 1 {
        return Err(ApiError::MustHaveOwner);
    }
    let data = representation(&state.member_view(member))?;
    Ok(Change {
        edits: vec![Edit::DeleteMember(state.id(), target)],
        audits: vec![AuditDraft {
            action: AuditAction::MemberRemoved,
            target_type: "member",
            target_id: target.to_string(),
            before: Some(data.clone()),
            after: None,
        }],
        events: vec![member_event(
            EventKind::MemberRemoved,
            &data,
            Timestamp::now(),
        )],
        reply: Reply::Deleted,
    })
}
