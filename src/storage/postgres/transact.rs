//! Running statements: a connection from the pool within the timeout, and
//! the writes of a transaction sent as one statement, so that it costs one
//! round trip and one statement however many tables it writes. A
//! connection whose round failed or timed out is dropped, never handed to
//! the next caller in an unknown state.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{ClientWrapper, Object, Pool};
use tokio_postgres::Statement as Prepared;

use super::backends::{Backend, Backends};
use super::batch::{combined, Statement};
use super::connect::{self, Connector, IoThread, Settings, Share};
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
    /// The server process of each of its connections.
    pub backends: Arc<Backends>,
}

impl Database {
    /// A pool of `size` connections for `share` (see [`connect::pool`]).
    pub fn new(
        settings: &Settings,
        size: usize,
        share: Share,
        connector: &Connector,
        io: &Arc<IoThread>,
    ) -> Result<Self, StoreError> {
        let backends = Arc::default();
        Ok(Database {
            pool: connect::pool(settings, size, share, connector, io.clone(), &backends)?,
            timeout: settings.statement_timeout,
            backends,
        })
    }

    /// How long a round may take on our side: the statement timeout, and
    /// a margin for the server's own timer to answer first.
    pub fn round_limit(&self) -> Duration {
        self.timeout + MARGIN
    }

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
        self.with_traced(what, round)
            .await
            .map_err(|failed| failed.error)
    }

    /// [`Database::with`], naming the server process of a round that
    /// failed or timed out.
    pub async fn with_traced<T>(
        &self,
        what: &str,
        round: impl AsyncFnOnce(&Object) -> Result<T, StoreError>,
    ) -> Result<T, Failed> {
        let client = self.connection().await.map_err(Failed::from)?;
        // Its server process is looked up only if the round fails.
        let cache = client.statement_cache.clone();
        match self.round_on(client, self.round_limit(), round).await {
            Some(Ok(value)) => Ok(value),
            Some(Err(error)) => Err(Failed {
                unanswered: matches!(error, StoreError::Unconfirmed(_)),
                error,
                backend: self.backends.of(&cache),
            }),
            None => Err(Failed {
                error: timed_out(what),
                backend: self.backends.of(&cache),
                unanswered: true,
            }),
        }
    }

    /// Runs `round` on `client` within `limit` (`None` when it passed);
    /// drops the connection unless the round succeeded.
    async fn round_on<T>(
        &self,
        client: Object,
        limit: Duration,
        round: impl AsyncFnOnce(&Object) -> Result<T, StoreError>,
    ) -> Option<Result<T, StoreError>> {
        match tokio::time::timeout(limit, round(&client)).await {
            Ok(Ok(value)) => Some(Ok(value)),
            Ok(Err(err)) => {
                discard(client);
                Some(Err(err))
            }
            Err(_) => {
                discard(client);
                None
            }
        }
    }

    /// Runs one query (a transaction of its own) on a pooled connection
    /// within the timeout, again when PostgreSQL stopped it as a conflict.
    pub async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        again_after_conflicts(move || {
            self.with(what, async move |client| query(client, sql, params).await)
        })
        .await
    }

    /// Runs one small read on a pooled connection within `limit` (the wait
    /// for the connection included), shorter than the timeout: a healthy
    /// database answers it far sooner, so a silent connection costs the
    /// caller `limit`, and it can ask again on another one.
    pub async fn query_within(
        &self,
        limit: Duration,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let started = tokio::time::Instant::now();
        // Waiting for a connection counts too (nothing is taken when the
        // wait is cut short); a round runs to its own end within the rest.
        let client = tokio::time::timeout(limit, self.connection())
            .await
            .map_err(|_| timed_out(what))??;
        let rest = limit.saturating_sub(started.elapsed());
        self.round_on(client, rest, async move |client| {
            query(client, sql, params).await
        })
        .await
        .unwrap_or_else(|| Err(timed_out(what)))
    }

    /// Runs one read as [`Database::query`] does, in a transaction of its
    /// own that sets `session` for itself alone, in one round trip (after
    /// the statement's first preparation on the connection): for a
    /// request's read of a table that swings between empty and large, which
    /// a plan kept from an empty moment would read whole on every call (see
    /// [`super::connect::BACKGROUND_SESSION`]). A lost answer is only a
    /// failed read: nothing was changed.
    pub async fn query_planned_with(
        &self,
        what: &str,
        session: &[(&str, &str)],
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let begin: String = std::iter::once("BEGIN".to_owned())
            .chain(
                session
                    .iter()
                    .map(|(name, value)| format!("SET LOCAL {name} = {value}")),
            )
            .collect::<Vec<_>>()
            .join("; ");
        let begin = begin.as_str();
        again_after_conflicts(move || {
            self.with(what, async move |client| {
                // Planned when run, inside the transaction, with `session`.
                let statement = prepared(client, sql).await?;
                let (begun, rows, committed) = futures_util::join!(
                    client.batch_execute(begin),
                    client.query(&statement, params),
                    client.batch_execute("COMMIT")
                );
                begun.map_err(from_pg)?;
                let rows = rows.map_err(from_pg)?;
                committed.map_err(from_pg)?;
                Ok(rows)
            })
        })
        .await
    }

    /// Commits `statements` in one transaction, in one round trip, again
    /// when PostgreSQL stopped it as a conflict. One whose answer is later
    /// than the timeout may have been committed ([`StoreError::Unconfirmed`]).
    pub async fn transact(&self, statements: &[Statement]) -> Result<(), StoreError> {
        self.transact_traced(statements)
            .await
            .map_err(|failed| failed.error)
    }

    /// [`Database::transact`], naming the server process of a transaction
    /// whose answer was lost.
    pub async fn transact_traced(&self, statements: &[Statement]) -> Result<(), Failed> {
        if statements.is_empty() {
            return Ok(());
        }
        // The server process of the run whose answer was lost, looked up
        // only then.
        let last = std::sync::Mutex::new(None);
        let committed = again_after_conflicts(|| async {
            let client = self.connection().await?;
            let cache = client.statement_cache.clone();
            let ran = self
                .round_on(client, self.round_limit(), async |client| {
                    in_transaction(client, statements).await
                })
                .await
                .unwrap_or_else(|| {
                    Err(StoreError::Unconfirmed(
                        "PostgreSQL did not answer a transaction in time".into(),
                    ))
                });
            if let Err(StoreError::Unconfirmed(_)) = ran {
                *last.lock().unwrap_or_else(|p| p.into_inner()) = self.backends.of(&cache);
            }
            ran
        })
        .await;
        committed.map_err(|error| {
            let unanswered = matches!(error, StoreError::Unconfirmed(_));
            Failed {
                backend: match unanswered {
                    true => last.into_inner().unwrap_or_else(|p| p.into_inner()),
                    false => None,
                },
                error,
                unanswered,
            }
        })
    }
}

/// A round that failed, and the server process that ran it, if known.
#[derive(Debug)]
pub struct Failed {
    pub error: StoreError,
    pub backend: Option<Backend>,
    /// Whether the server's answer never came (the round timed out, or its
    /// connection broke): what it was sent may have been done. An error the
    /// server answered is not so.
    pub unanswered: bool,
}

impl From<StoreError> for Failed {
    fn from(error: StoreError) -> Self {
        Failed {
            error,
            backend: None,
            unanswered: false,
        }
    }
}

/// Runs of a transaction that PostgreSQL stopped as a deadlock or a
/// serialization conflict, at most: such a transaction had no effect, and
/// the one it conflicted with goes on, so running it again succeeds.
const RUNS_AFTER_CONFLICTS: usize = 4;

/// Runs `transaction` until it ends other than as a conflict, at most
/// [`RUNS_AFTER_CONFLICTS`] times.
async fn again_after_conflicts<T, F>(transaction: impl Fn() -> F) -> Result<T, StoreError>
where
    F: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut runs = 1;
    loop {
        match transaction().await {
            Err(StoreError::Conflict(why)) if runs < RUNS_AFTER_CONFLICTS => {
                tracing::debug!(%why, "PostgreSQL stopped a transaction as a conflict; running it again");
                runs += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Time the server's own statement timeout gets to answer first.
const MARGIN: Duration = Duration::from_millis(500);

/// Takes a connection out of the pool for good.
pub fn discard(client: Object) {
    drop(Object::take(client));
}

/// Runs one query on `client`.
pub async fn query(
    client: &ClientWrapper,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, StoreError> {
    let statement = prepared(client, sql).await?;
    client.query(&statement, params).await.map_err(from_pg)
}

/// Prepares `sql` (once per connection).
pub async fn prepared(client: &ClientWrapper, sql: &str) -> Result<Prepared, StoreError> {
    client.prepare_cached(sql).await.map_err(from_pg)
}

/// `statements` as the one statement of a transaction of its own (a
/// single statement is atomic without BEGIN and COMMIT).
async fn in_transaction(client: &Object, statements: &[Statement]) -> Result<(), StoreError> {
    run_in_transaction(client, statements).await
}

/// `statements` and COMMIT, sent together, in a transaction already begun.
/// A statement that fails turns the COMMIT into a rollback, so nothing of
/// a failed transaction stays. The statement is prepared before the COMMIT
/// is sent: sent beside a preparation, the COMMIT would reach the server
/// first, end the transaction (and its row locks) and leave the statement
/// to run on its own.
pub async fn finish_transaction(
    client: &Object,
    statements: &[Statement],
) -> Result<(), StoreError> {
    let Some((sql, params)) = combined(statements) else {
        return client.batch_execute("COMMIT").await.map_err(sent_and_lost);
    };
    let prepared = prepared(client, &sql).await?;
    let (ran, committed) = futures_util::join!(
        client.execute(&prepared, &params),
        client.batch_execute("COMMIT")
    );
    ran.map_err(sent_and_lost)?;
    committed.map_err(sent_and_lost)
}

/// `statements`, as one statement (see [`combined`]), in the transaction
/// open on `client`, if any.
pub async fn run_in_transaction(
    client: &ClientWrapper,
    statements: &[Statement],
) -> Result<(), StoreError> {
    let Some((sql, params)) = combined(statements) else {
        return Ok(());
    };
    let prepared = prepared(client, &sql).await?;
    client
        .execute(&prepared, &params)
        .await
        .map(drop)
        .map_err(sent_and_lost)
}

/// An error of a write already sent: without an answer of the server's
/// (the connection broke), the write may have been committed.
fn sent_and_lost(err: tokio_postgres::Error) -> StoreError {
    if err.as_db_error().is_some() {
        return from_pg(err);
    }
    match from_pg(err) {
        StoreError::Unavailable(why) => StoreError::Unconfirmed(why),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_transaction_stopped_as_a_conflict_runs_again_and_no_other_failure_does() {
        let runs = Cell::new(0);
        let succeeds_third = again_after_conflicts(|| {
            runs.set(runs.get() + 1);
            let run = runs.get();
            async move {
                if run < 3 {
                    Err(StoreError::Conflict("deadlock detected".into()))
                } else {
                    Ok(run)
                }
            }
        })
        .await;
        assert_eq!(succeeds_third.ok(), Some(3));

        runs.set(0);
        let always: Result<(), _> = again_after_conflicts(|| {
            runs.set(runs.get() + 1);
            async { Err(StoreError::Conflict("deadlock detected".into())) }
        })
        .await;
        assert!(matches!(always, Err(StoreError::Conflict(_))));
        assert_eq!(runs.get(), RUNS_AFTER_CONFLICTS, "a bounded number of runs");

        runs.set(0);
        let unavailable: Result<(), _> = again_after_conflicts(|| {
            runs.set(runs.get() + 1);
            async { Err(StoreError::Unavailable("down".into())) }
        })
        .await;
        assert!(matches!(unavailable, Err(StoreError::Unavailable(_))));
        assert_eq!(runs.get(), 1, "only conflicts run again");
    }
}
