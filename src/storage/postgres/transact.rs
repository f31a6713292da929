//! Running statements: a connection from the pool within the timeout, and
//! a transaction sent as one pipeline (BEGIN, the statements, COMMIT), so
//! that it costs one round trip however many statements it holds. A
//! connection whose round failed or timed out is dropped, never handed to
//! the next caller in an unknown state.

use std::time::Duration;

use deadpool_postgres::{ClientWrapper, Object, Pool};
use futures_util::future::join_all;
use tokio_postgres::Statement as Prepared;

use super::batch::Statement;
use super::error::{from_pg, from_pool, timed_out};
use crate::storage::StoreError;

/// The pool, and how long a round may take.
#[derive(Clone)]
pub struct Database {
    /// The connections.
    pub pool: Pool,
    /// The statement timeout, which also bounds each round on our side (a
    /// database that stops answering does not run the server's timer).
    pub timeout: Duration,
}

impl Database {
    /// A connection, or 503 once the wait is over.
    pub async fn connection(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(from_pool)
    }

    /// Runs `round` on a pooled connection within the timeout; a
    /// connection whose round failed or timed out is dropped.
    pub async fn with<T>(
        &self,
        what: &str,
        round: impl AsyncFnOnce(&Object) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let client = self.connection().await?;
        match tokio::time::timeout(self.timeout + MARGIN, round(&client)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                discard(client);
                Err(err)
            }
            Err(_) => {
                discard(client);
                Err(timed_out(what))
            }
        }
    }

    /// Commits `statements` in one transaction, in one round trip.
    pub async fn transact(&self, statements: &[Statement]) -> Result<(), StoreError> {
        if statements.is_empty() {
            return Ok(());
        }
        self.with("a transaction", async |client| {
            in_transaction(client, statements).await
        })
        .await
    }
}

/// Time the server's own statement timeout gets to answer first.
const MARGIN: Duration = Duration::from_millis(500);

/// Takes a connection out of the pool for good.
pub fn discard(client: Object) {
    drop(Object::take(client));
}

/// Prepares `sql` (once per connection).
pub async fn prepared(client: &ClientWrapper, sql: &str) -> Result<Prepared, StoreError> {
    client.prepare_cached(sql).await.map_err(from_pg)
}

/// BEGIN, `statements`, COMMIT, sent together; the first error, if any.
/// A statement that fails turns the COMMIT into a rollback, so nothing of
/// a failed transaction stays.
async fn in_transaction(client: &Object, statements: &[Statement]) -> Result<(), StoreError> {
    let prepared = prepare_all(client, statements).await?;
    let (begun, committed) = futures_util::join!(
        client.batch_execute("BEGIN"),
        run_and_commit(client, statements, &prepared)
    );
    begun.map_err(from_pg)?;
    committed
}

/// `statements` and COMMIT, sent together, in a transaction already begun.
pub async fn finish_transaction(
    client: &Object,
    statements: &[Statement],
) -> Result<(), StoreError> {
    let prepared = prepare_all(client, statements).await?;
    run_and_commit(client, statements, &prepared).await
}

/// Prepares every statement (once per connection; pipelined).
async fn prepare_all(
    client: &ClientWrapper,
    statements: &[Statement],
) -> Result<Vec<Prepared>, StoreError> {
    join_all(statements.iter().map(|s| client.prepare_cached(s.sql)))
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(from_pg)
}

/// `statements`, sent together, in a transaction already begun, which
/// stays open.
pub async fn run_in_transaction(
    client: &ClientWrapper,
    statements: &[Statement],
) -> Result<(), StoreError> {
    let prepared = prepare_all(client, statements).await?;
    let params: Vec<_> = statements.iter().map(Statement::params).collect();
    executions(client, &prepared, &params).await
}

/// Sends the executions, then COMMIT, without waiting in between.
async fn run_and_commit(
    client: &Object,
    statements: &[Statement],
    prepared: &[Prepared],
) -> Result<(), StoreError> {
    let params: Vec<_> = statements.iter().map(Statement::params).collect();
    let (ran, committed) = futures_util::join!(
        executions(client, prepared, &params),
        client.batch_execute("COMMIT")
    );
    ran?;
    committed.map_err(from_pg)
}

/// Runs every prepared statement with its parameters, pipelined; the first
/// error, if any.
async fn executions(
    client: &ClientWrapper,
    prepared: &[Prepared],
    params: &[Vec<&(dyn tokio_postgres::types::ToSql + Sync)>],
) -> Result<(), StoreError> {
    let runs = join_all(
        prepared
            .iter()
            .zip(params)
            .map(|(statement, params)| client.execute(statement, params)),
    );
    for result in runs.await {
        result.map_err(from_pg)?;
    }
    Ok(())
}
