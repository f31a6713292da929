//! Idempotency keys on PostgreSQL: one row per scope, claimed with an
//! insert that takes over only a row past its time, so that two requests
//! with one key, on any nodes, cannot both run.

use std::time::SystemTime;

use tokio_postgres::Row;

use super::rows::{self, stamp, time};
use super::PgStore;
use crate::storage::idempotency::{Begin, KeyRecord, KeyState, StoredAnswer};
use crate::storage::StoreError;
use crate::time::Timestamp;

impl PgStore {
    /// See [`crate::storage::Store::idempotency_begin`]: one statement,
    /// which claims the key unless a live row holds it, and then answers
    /// that row as it was.
    pub async fn idempotency_begin(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Begin, StoreError> {
        const SQL: &str = "WITH claimed AS ( \
               INSERT INTO idempotency_keys AS k \
                      (scope, fingerprint, answered, live_until, status, headers, body) \
               VALUES ($1, $2, false, $3, NULL, NULL, NULL) \
               ON CONFLICT (scope) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, \
                      answered = false, live_until = EXCLUDED.live_until, \
                      status = NULL, headers = NULL, body = NULL \
                WHERE k.live_until <= $4 \
               RETURNING 1) \
             SELECT (SELECT count(*) FROM claimed) AS claimed, k.fingerprint, k.answered, \
                    k.live_until, k.status, k.headers::text AS headers, k.body \
               FROM (SELECT 1) AS one \
               LEFT JOIN idempotency_keys k ON k.scope = $1";
        let rows = self
            .database
            .query(
                "an idempotency key",
                SQL,
                &[
                    &scope.as_slice(),
                    &fingerprint.as_slice(),
                    &time(until),
                    &time(now),
                ],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(Begin::Run);
        };
        if rows::get::<i64>(row, "claimed")? > 0 {
            return Ok(Begin::Run);
        }
        match record(row)? {
            Some(record) if record.live(now) => Ok(record.verdict(&fingerprint, now)),
            // Not there any more, or lapsed since: the next try claims it.
            _ => Ok(Begin::Running { for_ms: 1 }),
        }
    }

    /// See [`crate::storage::Store::idempotency_answer`].
    pub async fn idempotency_answer(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        answer: &StoredAnswer,
        expires: Timestamp,
    ) -> Result<(), StoreError> {
        let headers = serde_json::to_string(&answer.headers).map_err(StoreError::codec)?;
        self.database
            .query(
                "an idempotency key's answer",
                "UPDATE idempotency_keys SET answered = true, live_until = $3, status = $4, \
                 headers = $5::text::json, body = $6 WHERE scope = $1 AND fingerprint = $2",
                &[
                    &scope.as_slice(),
                    &fingerprint.as_slice(),
                    &time(expires),
                    &i32::from(answer.status),
                    &headers,
                    &answer.body,
                ],
            )
            .await
            .map(drop)
    }

    /// See [`crate::storage::Store::idempotency_forget`].
    pub async fn idempotency_forget(
        &self,
        scope: [u8; 32],
        fingerprint: &[u8; 32],
    ) -> Result<(), StoreError> {
        self.database
            .query(
                "forgetting an idempotency key",
                "DELETE FROM idempotency_keys WHERE scope = $1 AND fingerprint = $2 \
                 AND NOT answered",
                &[&scope.as_slice(), &fingerprint.as_slice()],
            )
            .await
            .map(drop)
    }

    /// See [`crate::storage::Store::idempotency_purge`]: on the background
    /// connections.
    pub async fn idempotency_purge(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .background
            .query(
                "purging idempotency keys",
                "WITH gone AS (DELETE FROM idempotency_keys WHERE scope IN \
                   (SELECT scope FROM idempotency_keys WHERE live_until <= $1 LIMIT $2) \
                   RETURNING 1) SELECT count(*) AS n FROM gone",
                &[&time(now), &limit],
            )
            .await?;
        let purged = match rows.first() {
            Some(row) => rows::get::<i64>(row, "n")?,
            None => 0,
        };
        Ok(usize::try_from(purged).unwrap_or(0))
    }
}

/// The record of a row, if the row is there.
fn record(row: &Row) -> Result<Option<KeyRecord>, StoreError> {
    let Some(fingerprint) = rows::get::<Option<Vec<u8>>>(row, "fingerprint")? else {
        return Ok(None);
    };
    let fingerprint = <[u8; 32]>::try_from(fingerprint.as_slice()).map_err(StoreError::codec)?;
    let until = stamp(rows::get::<SystemTime>(row, "live_until")?).millis();
    let state = if rows::get::<bool>(row, "answered")? {
        let headers: Option<String> = rows::get(row, "headers")?;
        let headers: Vec<(String, String)> = match headers {
            Some(text) => serde_json::from_str(&text).map_err(StoreError::codec)?,
            None => Vec::new(),
        };
        KeyState::Answered {
            answer: StoredAnswer {
                status: u16::try_from(rows::get::<Option<i32>>(row, "status")?.unwrap_or(500))
                    .unwrap_or(500),
                headers,
                body: rows::get::<Option<Vec<u8>>>(row, "body")?.unwrap_or_default(),
            },
            expires: until,
        }
    } else {
        KeyState::Running { until }
    };
    Ok(Some(KeyRecord { fingerprint, state }))
}
