//! The schema: versioned SQL embedded in the binary, applied in order
//! under an advisory lock (so nodes starting at once apply each step
//! once), at start and by `rolecall migrate`. A database migrated by a
//! newer release is refused, naming both versions.

use tokio_postgres::Client;

use crate::storage::StoreError;

/// The steps, in order; step `n` takes the schema to version `n + 1`.
/// Released steps never change: a new one is added instead.
const STEPS: &[(&str, &str)] = &[
    (
        "the whole single-node service",
        include_str!("migrations/0001_schema.sql"),
    ),
    (
        "organization revisions, for several nodes",
        include_str!("migrations/0002_revisions.sql"),
    ),
    (
        "delivery leases, for one queue shared by several nodes",
        include_str!("migrations/0003_delivery_leases.sql"),
    ),
    (
        "role assignments that expire",
        include_str!("migrations/0004_role_expiry.sql"),
    ),
    (
        "delivery-log counts, for log upkeep that does not scan the logs",
        include_str!("migrations/0005_log_counts.sql"),
    ),
    (
        "the read that marked each outbox row, for reads whose answer was lost; room for marks on outbox pages",
        include_str!("migrations/0006_claim_reads.sql"),
    ),
    (
        "idempotency keys",
        include_str!("migrations/0007_idempotency_keys.sql"),
    ),
    (
        "endpoint status: disabled (gone or failing), and the failing run's start",
        include_str!("migrations/0008_endpoint_status.sql"),
    ),
    (
        "jobs handed to the lease holder in their commit's notification",
        include_str!("migrations/0009_handed_jobs.sql"),
    ),
];

/// The schema version this build reads and writes.
pub const VERSION: i32 = STEPS.len() as i32;

/// The advisory lock every node takes to migrate ("rolecall" in ASCII).
pub const LOCK: i64 = 0x726f_6c65_6361_6c6c;

/// What [`migrate`] found and did.
#[derive(Debug, PartialEq, Eq)]
pub struct Migrated {
    /// The version found.
    pub from: i32,
    /// The version left.
    pub to: i32,
}

/// Brings the schema to [`VERSION`]: creates it on an empty database,
/// applies the missing steps each in its own transaction, and refuses a
/// newer schema.
pub async fn migrate(client: &mut Client) -> Result<Migrated, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK])
        .await
        .map_err(super::error::from_pg)?;
    let outcome = apply(client).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK])
        .await
        .map_err(super::error::from_pg);
    let migrated = outcome?;
    unlocked?;
    Ok(migrated)
}

async fn apply(client: &mut Client) -> Result<Migrated, StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS rolecall_schema (
                 version     integer PRIMARY KEY,
                 description text NOT NULL,
                 applied_at  timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .map_err(super::error::from_pg)?;
    let from = found(client).await?;
    if from > VERSION {
        return Err(newer(from));
    }
    for (index, (description, sql)) in STEPS.iter().enumerate().skip(from.max(0) as usize) {
        let version = index as i32 + 1;
        let step = client.transaction().await.map_err(super::error::from_pg)?;
        step.batch_execute(sql)
            .await
            .map_err(super::error::from_pg)?;
        step.execute(
            "INSERT INTO rolecall_schema (version, description) VALUES ($1, $2)",
            &[&version, description],
        )
        .await
        .map_err(super::error::from_pg)?;
        step.commit().await.map_err(super::error::from_pg)?;
        tracing::info!(
            version,
            "PostgreSQL schema: applied step {version}: {description}"
        );
    }
    Ok(Migrated { from, to: VERSION })
}

/// The schema version of the database (0: none yet).
pub async fn found(client: &Client) -> Result<i32, StoreError> {
    let exists = client
        .query_one("SELECT to_regclass('rolecall_schema') IS NOT NULL", &[])
        .await
        .map_err(super::error::from_pg)?;
    if !exists.try_get::<_, bool>(0).map_err(StoreError::codec)? {
        return Ok(0);
    }
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM rolecall_schema", &[])
        .await
        .map_err(super::error::from_pg)?;
    row.try_get(0).map_err(StoreError::codec)
}

/// The refusal of a schema newer than this build's.
pub fn newer(found: i32) -> StoreError {
    StoreError::Schema(format!(
        "the PostgreSQL schema is at version {found}, and this build of rolecall knows versions up \
         to {VERSION}: run a rolecall at least as new as the one that migrated it"
    ))
}
