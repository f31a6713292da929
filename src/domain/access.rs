//! Who is calling, and the checks every command makes in the contract's
//! order: 404 membership, 404 resource, 403 permission, 402 plan, 412
//! precondition, 400 validation, 403 escalation/immutability, 409/422.

use std::collections::BTreeMap;

use crate::domain::error::ApiError;
use crate::domain::org_state::OrgState;
use crate::domain::organization::Plan;
use crate::domain::permissions::{Permission, PermissionSet};
use crate::ids::UserId;

/// The authenticated principal of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The operator's admin token: acts on any organization, holds every key.
    Admin,
    /// A user, through a session or API token.
    User(UserId),
}

impl Caller {
    /// The user id, `None` for the admin token.
    pub fn user_id(self) -> Option<UserId> {
        match self {
            Caller::Admin => None,
            Caller::User(id) => Some(id),
        }
    }
}

/// The caller's effective permissions in the organization; 404 when the
/// caller is not a member (existence is never leaked).
pub fn caller_permissions(state: &OrgState, caller: Caller) -> Result<PermissionSet, ApiError> {
    match caller {
        Caller::Admin => Ok(PermissionSet::ALL),
        Caller::User(user) => state
            .permissions_of(user)
            .ok_or(ApiError::NotFound("organization")),
    }
}

/// At most this many keys per batch check.
pub const CHECK_LIMIT: usize = 100;

/// The batch check: for each distinct key of `keys`, whether `user` holds
/// it, through [`OrgState::permissions_of`] like every request's check.
/// 404 when `user` is not a member, then 400 for an empty or too long list
/// or unknown keys.
pub fn check_keys(
    state: &OrgState,
    user: UserId,
    keys: &[String],
) -> Result<BTreeMap<&'static str, bool>, ApiError> {
    let held = state
        .permissions_of(user)
        .ok_or(ApiError::NotFound("member"))?;
    if keys.is_empty() || keys.len() > CHECK_LIMIT {
        return Err(ApiError::invalid(
            "permissions",
            format!("must list 1 to {CHECK_LIMIT} permission keys"),
        ));
    }
    let asked =
        PermissionSet::parse(keys).map_err(|unknown| ApiError::UnknownPermission(unknown.0))?;
    Ok(asked
        .iter()
        .map(|key| (key.key(), held.contains(key)))
        .collect())
}

/// 403 FORBIDDEN unless `held` contains `needed`.
pub fn require(held: PermissionSet, needed: Permission) -> Result<(), ApiError> {
    if held.contains(needed) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(needed))
    }
}

/// The keys an operation needs, as its route names them (the route table
/// in `http`); the command checks them at its step of the contract's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// Keys the caller must hold, all of them.
    pub keys: &'static [Permission],
    /// A member acting on their own membership needs none of them.
    pub or_self: bool,
}

impl Needs {
    /// Keys needed by everyone, oneself included.
    pub const fn keys(keys: &'static [Permission]) -> Self {
        Needs {
            keys,
            or_self: false,
        }
    }

    /// 403 FORBIDDEN naming the first key `held` lacks; none are needed when
    /// the route allows it and `caller` acts on the membership of `target`.
    pub fn check(
        self,
        held: PermissionSet,
        caller: Caller,
        target: Option<UserId>,
    ) -> Result<(), ApiError> {
        if self.or_self && target.is_some() && caller.user_id() == target {
            return Ok(());
        }
        self.keys.iter().try_for_each(|key| require(held, *key))
    }
}

/// 402 LICENSE_REQUIRED unless the organization is on Enterprise.
pub fn require_enterprise(state: &OrgState) -> Result<(), ApiError> {
    if state.org.plan == Plan::Enterprise {
        Ok(())
    } else {
        Err(ApiError::LicenseRequired)
    }
}

/// 403 PERMISSION_ESCALATION unless `held` covers every key of `granted`.
pub fn forbid_escalation(held: PermissionSet, granted: PermissionSet) -> Result<(), ApiError> {
    let missing = granted.difference(held);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ApiError::PermissionEscalation(missing.sorted_keys()))
    }
}

/// The values of an `If-Match` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: any current representation.
    Any,
    /// A list of strong entity tags.
    Tags(Vec<String>),
}

impl IfMatch {
    /// Parses a header value.
    pub fn parse(header: &str) -> IfMatch {
        if header.trim() == "*" {
            return IfMatch::Any;
        }
        IfMatch::Tags(header.split(',').map(|tag| tag.trim().to_owned()).collect())
    }
}

/// 412 PRECONDITION_FAILED unless `if_match` (when given) matches `etag`.
/// Weak tags never match (RFC 9110 strong comparison).
pub fn check_precondition(if_match: Option<&IfMatch>, etag: &str) -> Result<(), ApiError> {
    match if_match {
        None | Some(IfMatch::Any) => Ok(()),
        Some(IfMatch::Tags(tags)) if tags.iter().any(|t| t == etag) => Ok(()),
        Some(IfMatch::Tags(_)) => Err(ApiError::PreconditionFailed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preconditions() {
        let etag = "\"abc-1\"";
        assert!(check_precondition(None, etag).is_ok());
        assert!(check_precondition(Some(&IfMatch::parse("*")), etag).is_ok());
        assert!(check_precondition(Some(&IfMatch::parse("\"x\", \"abc-1\"")), etag).is_ok());
        assert!(check_precondition(Some(&IfMatch::parse("W/\"abc-1\"")), etag).is_err());
        assert!(check_precondition(Some(&IfMatch::parse("\"abc-2\"")), etag).is_err());
    }

    #[test]
    fn needs_name_the_first_missing_key_and_may_spare_oneself() {
        let (me, other) = (UserId::generate(), UserId::generate());
        let held: PermissionSet = [Permission::TeamRead].into_iter().collect();
        let needs = Needs::keys(&[Permission::TeamRead, Permission::TeamManage]);
        assert!(matches!(
            needs.check(held, Caller::User(me), None),
            Err(ApiError::Forbidden(Permission::TeamManage))
        ));
        assert!(needs
            .check(PermissionSet::ALL, Caller::User(me), None)
            .is_ok());
        let own = Needs {
            or_self: true,
            ..needs
        };
        assert!(own.check(held, Caller::User(me), Some(me)).is_ok());
        assert!(own.check(held, Caller::User(me), Some(other)).is_err());
        assert!(own.check(held, Caller::Admin, None).is_err());
        assert!(Needs::keys(&[])
            .check(PermissionSet::EMPTY, Caller::User(me), None)
            .is_ok());
    }

    #[test]
    fn escalation_reports_missing_keys() {
        let held: PermissionSet = [Permission::TeamRead].into_iter().collect();
        let granted: PermissionSet = [Permission::TeamRead, Permission::BillingManage]
            .into_iter()
            .collect();
        match forbid_escalation(held, granted) {
            Err(ApiError::PermissionEscalation(keys)) => {
                assert_eq!(keys, vec!["org:billing:manage"])
            }
            other => panic!("expected escalation, got {other:?}"),
        }
        assert!(forbid_escalation(PermissionSet::ALL, granted).is_ok());
    }
}
