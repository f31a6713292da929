//! Who is calling, and the checks every command makes in the contract's
//! order: 404 membership, 404 resource, 403 permission, 402 plan, 412
//! precondition, 400 validation, 403 escalation/immutability, 409/422.

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

/// 403 FORBIDDEN unless `held` contains `needed`.
pub fn require(held: PermissionSet, needed: Permission) -> Result<(), ApiError> {
    if held.contains(needed) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(needed))
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
