//! Passed webhook tests on a database that several nodes share: the test
//! may reach one node and the save another. Saving takes the row
//! (`DELETE … RETURNING`), so a test is used once even when two nodes
//! race to save it.

use std::time::{Duration, Instant, SystemTime};

use tokio_postgres::Row;

use super::rows;
use super::PgStore;
use crate::domain::webhook::{EventSet, PassedTest};
use crate::ids::{OrgId, TestId};
use crate::secrets::Secret;
use crate::storage::StoreError;

/// Columns of `webhook_tests`, with the test's age.
const COLUMNS: &str = "organization_id, url, events, candidate_secret, \
                       extract(epoch FROM now() - passed_at)::float8 AS age_s";

impl PgStore {
    /// Keeps a passed test (and drops the expired ones).
    pub async fn put_passed_test(
        &self,
        id: TestId,
        test: &PassedTest,
        validity: Duration,
    ) -> Result<(), StoreError> {
        let secret = match (&test.candidate_secret, &self.key) {
            (Some(secret), Some(key)) => Some(key.seal(test.organization_id.as_bytes(), secret)?),
            (Some(secret), None) => Some(secret.expose().to_owned()),
            (None, _) => None,
        };
        let events: Vec<String> = test.events.ids().iter().map(|e| (*e).to_owned()).collect();
        let passed_at = SystemTime::now()
            .checked_sub(test.passed_at.elapsed())
            .unwrap_or_else(SystemTime::now);
        let expired = validity.as_secs_f64();
        self.database
            .query(
                "saving a webhook test",
                "WITH expired AS (DELETE FROM webhook_tests \
                     WHERE passed_at < now() - make_interval(secs => $7)) \
                     INSERT INTO webhook_tests \
                     (id, organization_id, url, events, candidate_secret, passed_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id.0,
                    &test.organization_id.0,
                    &test.url,
                    &events,
                    &secret,
                    &passed_at,
                    &expired,
                ],
            )
            .await
            .map(drop)
    }

    /// `org`'s test `id`, when it is stored and younger than `validity`;
    /// taken (`take`) or left in place.
    pub async fn passed_test(
        &self,
        org: OrgId,
        id: TestId,
        validity: Duration,
        take: bool,
    ) -> Result<Option<PassedTest>, StoreError> {
        let sql = if take {
            format!(
                "DELETE FROM webhook_tests WHERE id = $1 AND organization_id = $2 RETURNING {COLUMNS}"
            )
        } else {
            format!("SELECT {COLUMNS} FROM webhook_tests WHERE id = $1 AND organization_id = $2")
        };
        let found = self
            .database
            .query("reading a webhook test", &sql, &[&id.0, &org.0])
            .await?;
        let Some(row) = found.first() else {
            return Ok(None);
        };
        let test = self.passed(row)?;
        Ok(test.filter(|test| test.passed_at.elapsed() < validity))
    }

    /// A test from a row of [`COLUMNS`], its secret opened; `None` when
    /// the secret does not open (sealed with a key since changed): the
    /// test is no use, and another one is quickly made.
    fn passed(&self, row: &Row) -> Result<Option<PassedTest>, StoreError> {
        let org = OrgId(rows::get(row, "organization_id")?);
        let events: Vec<String> = rows::get(row, "events")?;
        let stored: Option<String> = rows::get(row, "candidate_secret")?;
        let candidate_secret = match stored {
            Some(text) if crate::secrets::SealingKey::is_sealed(&text) => {
                let opened = self.key.as_ref().map(|key| key.open(org.as_bytes(), &text));
                match opened {
                    Some(Ok(secret)) => Some(secret),
                    _ => return Ok(None),
                }
            }
            Some(clear) => Some(Secret::new(clear)),
            None => None,
        };
        let age = rows::get::<f64>(row, "age_s")?.max(0.0);
        let passed_at = Instant::now()
            .checked_sub(Duration::from_secs_f64(age))
            .unwrap_or_else(Instant::now);
        Ok(Some(PassedTest {
            organization_id: org,
            url: rows::get(row, "url")?,
            events: EventSet::parse(&events).map_err(|_| {
                StoreError::codec(std::io::Error::other(format!(
                    "unknown events stored: {events:?}"
                )))
            })?,
            candidate_secret,
            passed_at,
        }))
    }
}
