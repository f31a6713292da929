//! Filling a database in one transaction (`rolecall storage copy`): all of
//! the copy or none of it, so that a copy that fails leaves the database
//! as empty as it found it, ready for the next try.

use deadpool_postgres::Object;

use super::batch::statements;
use super::error::from_pg;
use super::migrate::LOCK;
use super::read::counts;
use super::transact::run_in_transaction;
use super::PgStore;
use crate::domain::change::Write;
use crate::secrets::SealingKey;
use crate::storage::{Counts, StoreError};

/// How long one statement of the copy may run: the count at the end and
/// the commit's deferred checks cover every row, which the request
/// timeout was never meant for.
const STATEMENT_TIMEOUT: &str = "15min";

/// An open transaction that writes arrive in.
pub struct Import {
    /// Out of the pool for good: its transaction is the copy's.
    client: deadpool_postgres::ClientWrapper,
    key: Option<SealingKey>,
}

impl PgStore {
    /// Begins a transaction that holds the migration lock, so that no
    /// node migrates or starts while it is open, and that may idle while
    /// the copy reads its source between writes. Dropping the [`Import`]
    /// without [`Import::commit`] leaves nothing behind.
    pub async fn import(&self) -> Result<Import, StoreError> {
        let client = Object::take(self.database.connection().await?);
        client
            .batch_execute(&format!(
                "BEGIN; SET LOCAL statement_timeout = '{STATEMENT_TIMEOUT}'; \
                 SET LOCAL idle_in_transaction_session_timeout = 0; \
                 SELECT pg_advisory_xact_lock({LOCK})"
            ))
            .await
            .map_err(from_pg)?;
        Ok(Import {
            client,
            key: self.key.clone(),
        })
    }
}

impl Import {
    /// Writes `writes` within the transaction (secrets sealed with the
    /// store's key).
    pub async fn write(&self, writes: &[Write]) -> Result<(), StoreError> {
        let statements = statements(writes.iter(), self.key.as_ref())?;
        run_in_transaction(&self.client, &statements).await
    }

    /// How many records of each kind the database holds, as the
    /// transaction sees them.
    pub async fn counts(&self) -> Result<Counts, StoreError> {
        counts(&self.client).await
    }

    /// Commits everything written.
    pub async fn commit(self) -> Result<(), StoreError> {
        self.client.batch_execute("COMMIT").await.map_err(from_pg)
    }
}
