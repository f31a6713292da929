//! What PostgreSQL's errors mean to the service: the seed 2.4 guards of
//! the schema become the API's errors; a database that cannot be reached,
//! is shutting down, failing over or timing out is unavailable (503 with
//! Retry-After); anything else is an engine failure.

use crate::storage::StoreError;

/// SQLSTATEs raised by the schema's role guard (`roles_guard`).
const OWNER_IMMUTABLE: &str = "RC001";
const MEMBER_KEPT: &str = "RC002";
const KIND_KEPT: &str = "RC003";
/// SQLSTATE of the organization revision guard (`organizations_revision_guard`).
const STALE: &str = "RC004";
/// SQLSTATEs of a statement stopped for another's sake: a deadlock, a
/// serialization failure.
const DEADLOCK: &str = "40P01";
const SERIALIZATION: &str = "40001";

/// Maps a tokio-postgres error.
pub fn from_pg(err: tokio_postgres::Error) -> StoreError {
    let Some(db) = err.as_db_error() else {
        // No answer from the server: the connection failed or closed.
        return StoreError::Unavailable(format!(
            "PostgreSQL cannot be reached: {}",
            crate::telemetry::cause_chain(&err)
        ));
    };
    let code = db.code().code();
    match code {
        OWNER_IMMUTABLE => StoreError::RoleImmutable,
        MEMBER_KEPT => StoreError::SystemRole,
        KIND_KEPT => StoreError::SystemRoleCount,
        STALE => StoreError::Stale(db.message().to_owned()),
        DEADLOCK | SERIALIZATION => StoreError::Conflict(db.message().to_owned()),
        "23505" if db.constraint().is_some_and(|c| c.starts_with("roles_one_")) => {
            StoreError::SystemRoleCount
        }
        "23505" if db.constraint() == Some("users_email_folded_key") => StoreError::EmailTaken,
        // Connection exceptions, insufficient resources, operator
        // intervention (shutdown, a cancelled statement: the statement
        // timeout), a read-only standby after failover, and a server
        // that is starting up.
        _ if code.starts_with("08")
            || code.starts_with("53")
            || code.starts_with("57")
            || code == "25006" =>
        {
            StoreError::Unavailable(format!("PostgreSQL: {}", db.message()))
        }
        _ => StoreError::engine(err),
    }
}

/// Maps a pool error: no connection could be had in time.
pub fn from_pool(err: deadpool_postgres::PoolError) -> StoreError {
    match err {
        deadpool_postgres::PoolError::Backend(err) => from_pg(err),
        other => StoreError::Unavailable(format!("no PostgreSQL connection: {other}")),
    }
}

/// A round of statements that did not finish within the statement timeout.
pub fn timed_out(what: &str) -> StoreError {
    StoreError::Unavailable(format!("PostgreSQL did not answer {what} in time"))
}

/// The settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The URL does not parse.
    #[error("storage.postgres_url: {0}")]
    Url(String),
    /// The CA file named by `sslrootcert` cannot be read.
    #[error("storage.postgres_url sslrootcert {path}: {reason}")]
    RootCert {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl From<SettingsError> for StoreError {
    fn from(err: SettingsError) -> Self {
        StoreError::Config(err.to_string())
    }
}
