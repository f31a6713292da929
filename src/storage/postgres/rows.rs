//! Rows and values: how domain values become typed columns and come back.
//! Times are `timestamptz` (the service keeps milliseconds, which
//! PostgreSQL's microseconds hold exactly); small enums are their API
//! names; permission and event sets are `text[]` of their keys.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_postgres::Row;

use crate::domain::audit::AuditRecord;
use crate::domain::delivery::{Job, LogRecord};
use crate::domain::member::Membership;
use crate::domain::organization::Organization;
use crate::domain::permissions::PermissionSet;
use crate::domain::role::Role;
use crate::domain::user::{TokenRecord, User};
use crate::domain::webhook::{Disabled, DisabledReason, EventSet, WebhookEndpoint};
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, RoleId, TokenId, UserId};
use crate::secrets::Secret;
use crate::storage::StoreError;
use crate::time::Timestamp;

/// A column's value as PostgreSQL takes it.
pub fn time(at: Timestamp) -> SystemTime {
    let millis = at.millis();
    let offset = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH + offset
    } else {
        UNIX_EPOCH - offset
    }
}

/// A `timestamptz` as the service keeps it.
pub fn stamp(at: SystemTime) -> Timestamp {
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => Timestamp(after.as_millis() as i64),
        Err(before) => Timestamp(-(before.duration().as_millis() as i64)),
    }
}

/// Text PostgreSQL stores: it refuses NUL, which only a subscriber's reply
/// or an error message can hold (the API refuses control characters), so
/// NUL becomes U+FFFD, as in a lossy decoding.
pub fn text(value: &str) -> Cow<'_, str> {
    if value.contains('\0') {
        Cow::Owned(value.replace('\0', "\u{fffd}"))
    } else {
        Cow::Borrowed(value)
    }
}

/// An owned [`text`].
pub fn owned_text(value: &str) -> String {
    text(value).into_owned()
}

/// A small enum's API name (`"free"`, `"api"`, `"succeeded"`).
pub fn name_of<T: Serialize>(value: &T) -> Result<String, StoreError> {
    match serde_json::to_value(value).map_err(StoreError::codec)? {
        serde_json::Value::String(name) => Ok(name),
        other => Err(StoreError::codec(NotAName(other.to_string()))),
    }
}

/// A small enum from its API name.
fn named<T: DeserializeOwned>(name: String) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(name)).map_err(StoreError::codec)
}

#[derive(Debug, thiserror::Error)]
#[error("expected a name, got {0}")]
struct NotAName(String);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unknown(String);

/// The text of a `json` column, as bytes.
fn bytes(row: &Row, column: &str) -> Result<Vec<u8>, StoreError> {
    Ok(get::<String>(row, column)?.into_bytes())
}

/// One column of a row.
pub fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    column: &str,
) -> Result<T, StoreError> {
    row.try_get(column).map_err(StoreError::codec)
}

fn at(row: &Row, column: &str) -> Result<Timestamp, StoreError> {
    get::<SystemTime>(row, column).map(stamp)
}

/// Columns of `users`, as selected.
pub const USER: &str = "id, email, name, created_at";

/// A user from [`USER`].
pub fn user(row: &Row) -> Result<User, StoreError> {
    Ok(User {
        id: UserId(get(row, "id")?),
        email: get(row, "email")?,
        name: get(row, "name")?,
        created_at: at(row, "created_at")?,
    })
}

/// A token and its user, from the columns of `tokens` and the user's
/// `email`, `user_name` and `user_created_at`.
pub fn account(row: &Row) -> Result<(TokenRecord, User), StoreError> {
    let token = token(row)?;
    let user = User {
        id: token.user_id,
        email: get(row, "email")?,
        name: get(row, "user_name")?,
        created_at: at(row, "user_created_at")?,
    };
    Ok((token, user))
}

/// Columns of `tokens`.
pub const TOKEN: &str = "id, user_id, kind, name, sha256, created_at";

/// A token record from [`TOKEN`].
pub fn token(row: &Row) -> Result<TokenRecord, StoreError> {
    let sha256: Vec<u8> = get(row, "sha256")?;
    Ok(TokenRecord {
        id: TokenId(get(row, "id")?),
        user_id: UserId(get(row, "user_id")?),
        kind: named(get(row, "kind")?)?,
        name: get(row, "name")?,
        sha256: sha256
            .try_into()
            .map_err(|_| StoreError::codec(Unknown("a token hash is not 32 bytes".into())))?,
        created_at: at(row, "created_at")?,
    })
}

/// Columns of `organizations`.
pub const ORGANIZATION: &str = "id, name, plan, created_at, updated_at";

/// An organization from [`ORGANIZATION`].
pub fn organization(row: &Row) -> Result<Organization, StoreError> {
    Ok(Organization {
        id: OrgId(get(row, "id")?),
        name: get(row, "name")?,
        plan: named(get(row, "plan")?)?,
        created_at: at(row, "created_at")?,
        updated_at: at(row, "updated_at")?,
    })
}

/// Columns of `roles`.
pub const ROLE: &str = "id, organization_id, name, description, permissions, is_immutable, \
                        is_system, revision, created_at, updated_at";

/// The keys of a permission set, as stored.
pub fn permission_keys(set: PermissionSet) -> Vec<&'static str> {
    set.sorted_keys()
}

/// A role from [`ROLE`].
pub fn role(row: &Row) -> Result<Role, StoreError> {
    let keys: Vec<String> = get(row, "permissions")?;
    let permissions = PermissionSet::parse(&keys).map_err(|unknown| {
        StoreError::codec(Unknown(format!(
            "unknown permissions stored: {:?}",
            unknown.0
        )))
    })?;
    Ok(Role {
        id: RoleId(get(row, "id")?),
        organization_id: OrgId(get(row, "organization_id")?),
        name: get(row, "name")?,
        description: get(row, "description")?,
        permissions,
        is_immutable: get(row, "is_immutable")?,
        is_system: get(row, "is_system")?,
        revision: get::<i64>(row, "revision")? as u64,
        created_at: at(row, "created_at")?,
        updated_at: at(row, "updated_at")?,
    })
}

/// Columns of `memberships`.
pub const MEMBERSHIP: &str =
    "organization_id, user_id, email, role_id, joined_at, updated_at, role_expires_at";

/// A membership from [`MEMBERSHIP`].
pub fn membership(row: &Row) -> Result<Membership, StoreError> {
    Ok(Membership {
        organization_id: OrgId(get(row, "organization_id")?),
        user_id: UserId(get(row, "user_id")?),
        email: get(row, "email")?,
        role_id: RoleId(get(row, "role_id")?),
        joined_at: at(row, "joined_at")?,
        updated_at: at(row, "updated_at")?,
        role_expires_at: get::<Option<SystemTime>>(row, "role_expires_at")?.map(stamp),
    })
}

/// Columns of `webhooks`.
pub const WEBHOOK: &str = "organization_id, url, events, secret, created_at, updated_at, \
                           disabled_at, disabled_reason, failing_since";

/// A webhook endpoint from [`WEBHOOK`], its secret as stored.
pub fn webhook(row: &Row) -> Result<WebhookEndpoint, StoreError> {
    let events: Vec<String> = get(row, "events")?;
    Ok(WebhookEndpoint {
        organization_id: OrgId(get(row, "organization_id")?),
        url: get(row, "url")?,
        events: EventSet::parse(&events).map_err(|_| {
            StoreError::codec(Unknown(format!("unknown events stored: {events:?}")))
        })?,
        secret: Secret::new(get(row, "secret")?),
        created_at: at(row, "created_at")?,
        updated_at: at(row, "updated_at")?,
        disabled: disabled(row)?,
        failing_since: get::<Option<SystemTime>>(row, "failing_since")?.map(stamp),
    })
}

/// The endpoint's `disabled_at` and `disabled_reason`, set together.
fn disabled(row: &Row) -> Result<Option<Disabled>, StoreError> {
    let at = get::<Option<SystemTime>>(row, "disabled_at")?.map(stamp);
    let reason = match get::<Option<String>>(row, "disabled_reason")?.as_deref() {
        None => None,
        Some("gone") => Some(DisabledReason::Gone),
        Some("failing") => Some(DisabledReason::Failing),
        Some(other) => {
            return Err(StoreError::codec(Unknown(format!(
                "unknown disabled_reason stored: {other:?}"
            ))))
        }
    };
    Ok(at.zip(reason).map(|(at, reason)| Disabled { at, reason }))
}

/// Columns of `audit_log`.
pub const AUDIT: &str = "id, organization_id, actor_user_id, action, target_type, target_id, \
                         before::text AS before, after::text AS after, request_id, occurred_at";

/// An audit record from [`AUDIT`].
pub fn audit(row: &Row) -> Result<AuditRecord, StoreError> {
    Ok(AuditRecord {
        id: AuditId(get(row, "id")?),
        organization_id: OrgId(get(row, "organization_id")?),
        actor_user_id: get::<Option<uuid::Uuid>>(row, "actor_user_id")?.map(UserId),
        action: get(row, "action")?,
        target_type: get(row, "target_type")?,
        target_id: get(row, "target_id")?,
        before: get(row, "before")?,
        after: get(row, "after")?,
        request_id: get(row, "request_id")?,
        occurred_at: at(row, "occurred_at")?,
    })
}

/// Columns of `outbox`.
pub const JOB: &str =
    "delivery_id, organization_id, event, body::text AS body, attempts_made, due_at, created_at";

/// A job from [`JOB`].
pub fn job(row: &Row) -> Result<Job, StoreError> {
    Ok(Job {
        delivery_id: DeliveryId(get(row, "delivery_id")?),
        organization_id: OrgId(get(row, "organization_id")?),
        event: get(row, "event")?,
        body: bytes(row, "body")?,
        attempts_made: get::<i16>(row, "attempts_made")? as u8,
        due_at: at(row, "due_at")?,
        created_at: at(row, "created_at")?,
        held_under: None,
        holder_told: None,
    })
}

/// Columns of `delivery_log`.
pub const LOG: &str = "id, organization_id, delivery_id, event, attempt, outcome, response_code, \
                       response_body, latency_ms, error, attempted_at, envelope::text AS envelope";

/// A delivery-log record from [`LOG`].
pub fn log(row: &Row) -> Result<LogRecord, StoreError> {
    Ok(LogRecord {
        id: LogId(get(row, "id")?),
        organization_id: OrgId(get(row, "organization_id")?),
        delivery_id: DeliveryId(get(row, "delivery_id")?),
        event: get(row, "event")?,
        attempt: get::<Option<i16>>(row, "attempt")?.map(|a| a as u8),
        outcome: named(get(row, "outcome")?)?,
        response_code: get::<Option<i32>>(row, "response_code")?.map(|c| c as u16),
        response_body: get(row, "response_body")?,
        latency_ms: get::<Option<i64>>(row, "latency_ms")?.map(|l| l as u64),
        error: get(row, "error")?,
        attempted_at: at(row, "attempted_at")?,
        envelope: bytes(row, "envelope")?,
    })
}

/// A resource from its `data::text AS data` column.
pub fn resource<T: DeserializeOwned>(row: &Row) -> Result<T, StoreError> {
    let data: &str = get(row, "data")?;
    serde_json::from_str(data).map_err(StoreError::codec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_their_milliseconds_both_sides_of_the_epoch() {
        for millis in [0, 1, 1_795_000_000_123, -1, -86_400_001] {
            assert_eq!(stamp(time(Timestamp(millis))), Timestamp(millis));
        }
    }

    #[test]
    fn nul_is_the_one_character_replaced() {
        assert_eq!(text("ok\ttab"), "ok\ttab");
        assert_eq!(text("a\0b"), "a\u{fffd}b");
        assert!(matches!(text("plain"), Cow::Borrowed(_)));
    }
}
