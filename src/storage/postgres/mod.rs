//! The PostgreSQL engine (`storage.backend = "postgres"`): typed tables,
//! the seed 2.4 guards in the schema, migrations under an advisory lock.
//! The only code that knows SQL.
//!
//! Every change is one transaction of one statement. Concurrent
//! requests share transactions ([`group_commit`]), with one part per
//! table whatever the number of rows, the parts joined into one statement
//! ([`batch`]). A commit is durable when PostgreSQL answers it, so there
//! is no separate flush to wait for.

mod backends;
mod batch;
mod batcher;
mod channels;
mod checks;
mod connect;
mod error;
mod group_commit;
mod handed;
mod hedge;
mod idempotency;
mod idle_probe;
mod import;
mod leases;
mod listener;
mod lost_commits;
mod lost_reads;
pub mod migrate;
mod passed_tests;
mod read;
mod reseal;
mod rows;
mod tls;
mod transact;
mod upkeep;

use std::sync::Arc;

use crate::domain::change::Write;
use crate::domain::resources::Resource;
use crate::ids::{OrgId, ResourceId};
use crate::secrets::SealingKey;
use crate::storage::{Durability, Rekeyed, StoreError};
use batch::statements;
use connect::Share;
use error::from_pg;
use group_commit::GroupCommit;
use transact::{finish_transaction, prepared, Database, Failed};

pub use batch::{JOB_DELETES_SQL, RETRIES_SQL};
pub use checks::SQL as CHECK_SQL;
pub use connect::{with_database, Settings, BACKGROUND_SESSION};
pub use handed::{Handed, HANDED};
pub use idempotency::{
    ANSWER_SQL as IDEMPOTENCY_ANSWER_SQL, CLAIM_SQL as IDEMPOTENCY_CLAIM_SQL,
    FORGET_SQL as IDEMPOTENCY_FORGET_SQL, HELD_SQL as IDEMPOTENCY_HELD_SQL,
};
pub use import::Import;
pub use leases::{
    claim_jobs_sql, Claimed, HeldElsewhere, Lease, SharedQueue, CLAIM_JOBS_SESSION,
    CLAIM_SQL as LEASE_CLAIM_SQL,
};
pub use listener::{Listening, Wakeup};
pub use lost_reads::LostReads;
pub use migrate::Migrated;

/// Two pools of connections to one database, and its group commit.
#[derive(Clone)]
pub struct PgStore {
    /// Connections for requests: what a request waits for.
    database: Database,
    /// Connections for background work (delivery results, log upkeep,
    /// leases, the dispatcher's reads, sweeps, metrics), so that no amount
    /// of it can take the connections requests need (CONTRACT §9).
    background: Database,
    committer: GroupCommit,
    /// The per-request checks of several nodes, batched.
    checks: checks::Checks,
    /// Idempotency keys' claims and answers, batched.
    keys: idempotency::Keys,
    /// Delivery-log upkeep, batched, on the background connections.
    upkeep: upkeep::LogUpkeep,
    /// Seals webhook secrets at rest, when `storage.secret_key` is set.
    key: Option<SealingKey>,
    /// Makes connections of their own (for `LISTEN`).
    connector: Arc<connect::Connector>,
    /// Runs every connection's I/O; kept running while the store is in use.
    io: Arc<connect::IoThread>,
}

impl PgStore {
    /// Connects, brings the schema to this build's version and checks the
    /// stored webhook secrets against `key` (sealing those in clear when a
    /// key is set).
    pub async fn open(settings: &Settings, key: Option<SealingKey>) -> Result<Self, StoreError> {
        let store = PgStore::connect(settings, key).await?;
        let key = store.key.as_ref();
        let sealed = store.reseal(key, key, None).await?.changed;
        if sealed > 0 {
            tracing::info!(
                count = sealed,
                "sealed webhook secrets stored in clear with storage.secret_key"
            );
        }
        Ok(store)
    }

    /// Opens every stored webhook secret with `from` (or reads it in clear)
    /// and stores it sealed with `to` (or in clear), in one transaction:
    /// `rolecall admin rekey` on a database no node uses. A secret that
    /// does not open refuses the whole change, unless `replace_unreadable`
    /// makes a new secret for it.
    pub async fn rekey(
        settings: &Settings,
        from: Option<&SealingKey>,
        to: Option<&SealingKey>,
        replace_unreadable: Option<fn() -> crate::secrets::Secret>,
    ) -> Result<Rekeyed, StoreError> {
        let store = PgStore::connect(settings, None).await?;
        let rekeyed = store.reseal(from, to, replace_unreadable).await;
        store.close();
        rekeyed
    }

    /// Connects and brings the schema to this build's version.
    async fn connect(settings: &Settings, key: Option<SealingKey>) -> Result<Self, StoreError> {
        let io = Arc::new(connect::io_thread()?);
        let connector = Arc::new(connect::Connector::new(settings)?);
        let database = Database::new(settings, settings.pool, Share::Requests, &connector, &io)?;
        let background = Database::new(
            settings,
            settings.background_pool,
            Share::Background,
            &connector,
            &io,
        )?;
        {
            let client = database.connection().await?;
            let mut schema = deadpool_postgres::Object::take(client);
            migrate::migrate(&mut schema).await?;
        }
        // Half the pool for shared transactions, the rest for reads and
        // read-modify-writes.
        let in_flight = (settings.pool / 2).clamp(1, 8);
        let window = settings.batch_window;
        let committer = GroupCommit::start(&io, database.clone(), key.clone(), in_flight, window);
        let checks = checks::Checks::start(&io, database.clone(), window);
        let keys = idempotency::Keys::start(&io, database.clone(), background.clone(), window);
        let upkeep = upkeep::LogUpkeep::start(&io, background.clone());
        Ok(PgStore {
            database,
            background,
            committer,
            checks,
            keys,
            upkeep,
            key,
            connector,
            io,
        })
    }

    /// Applies the missing migrations, as `rolecall migrate` does.
    pub async fn migrate(settings: &Settings) -> Result<Migrated, StoreError> {
        let io = Arc::new(connect::io_thread()?);
        let connector = connect::Connector::new(settings)?;
        let pool = connect::pool(
            settings,
            1,
            Share::Requests,
            &connector,
            io,
            &Arc::default(),
        )?;
        let client = pool.get().await.map_err(error::from_pool)?;
        let mut schema = deadpool_postgres::Object::take(client);
        migrate::migrate(&mut schema).await
    }

    /// Where it connects, for the start-up log (no password).
    pub fn describe(settings: &Settings) -> String {
        connect::describe(settings)
    }

    /// See [`crate::storage::Store::commit`].
    pub async fn commit(&self, writes: Vec<Write>) -> Result<Vec<Write>, StoreError> {
        self.committer.commit(writes).await
    }

    /// See [`crate::storage::Store::append`]: its own transaction, durable
    /// when it answers.
    pub async fn append(&self, writes: &[Write]) -> Result<Durability, StoreError> {
        let statements = statements(writes.iter(), self.key.as_ref())?;
        self.background.transact(&statements).await?;
        Ok(Durability::after(async { Ok(()) }))
    }

    /// See [`crate::storage::Store::update_resource`]: the row is locked
    /// (`FOR UPDATE`) from the read to the commit.
    pub async fn update_resource<T, R, E>(
        &self,
        org: OrgId,
        id: ResourceId,
        decide: impl Fn(Option<T>) -> Result<(Vec<Write>, R), E>,
    ) -> Result<(Vec<Write>, R), E>
    where
        T: Resource,
        E: From<StoreError>,
    {
        let key = self.key.as_ref();
        let mut run = 0;
        loop {
            run += 1;
            // What the commit decided, once it was sent, and the row that
            // proves it landed, to look for if its answer is lost.
            let mut sent = None;
            let outcome = self
                .database
                .with_traced("a resource update", async |client| {
                    let select = prepared(
                        client,
                        "SELECT data::text AS data FROM resources \
                         WHERE organization_id = $1 AND kind = $2 AND id = $3 FOR UPDATE",
                    )
                    .await?;
                    let kind = T::KIND.name();
                    let begin = client.batch_execute("BEGIN");
                    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                        [&org.0, &kind, &id.0];
                    let read = client.query(&select, &params);
                    let (begun, read) = futures_util::join!(begin, read);
                    begun.map_err(from_pg)?;
                    let current = read
                        .map_err(from_pg)?
                        .first()
                        .map(rows::resource::<T>)
                        .transpose()?;
                    match decide(current) {
                        Ok((writes, outcome)) => {
                            let statements = statements(writes.iter(), key)?;
                            let marker = lost_commits::Marker::of(&writes);
                            sent = Some((writes, outcome, marker));
                            finish_transaction(client, &statements).await?;
                            Ok(None)
                        }
                        Err(refused) => {
                            client.batch_execute("ROLLBACK").await.map_err(from_pg)?;
                            Ok(Some(refused))
                        }
                    }
                })
                .await;
            let (failed, (writes, outcome, marker)) = match (outcome, sent) {
                (Ok(Some(refused)), _) => return Err(refused),
                (Ok(None), Some((writes, outcome, _))) => return Ok((writes, outcome)),
                // Sent, and no answer of the server's: the commit may have
                // been made (a timeout, or a connection that broke).
                (
                    Err(Failed {
                        error: StoreError::Unconfirmed(why) | StoreError::Unavailable(why),
                        backend,
                        unanswered: true,
                    }),
                    Some(decided),
                ) => ((why, backend), decided),
                (Err(failed), _) => return Err(E::from(failed.error)),
                (Ok(None), None) => {
                    return Err(E::from(StoreError::Unconfirmed(
                        "a resource update committed without a decision".into(),
                    )))
                }
            };
            let (why, backend) = failed;
            let settled = lost_commits::settle(&self.database, marker.as_ref(), backend).await;
            match settled.answer(run, why) {
                Some(Ok(())) => return Ok((writes, outcome)),
                Some(Err(err)) => return Err(E::from(err)),
                // Surely not made: read and decided again.
                None => {}
            }
        }
    }

    /// See [`crate::storage::Store::freshness`]: concurrent requests share
    /// one query.
    pub async fn freshness(
        &self,
        token: Option<&[u8; 32]>,
        org: Option<OrgId>,
    ) -> Result<crate::storage::Freshness, StoreError> {
        self.checks.check(token, org).await
    }

    /// This node's side of the delivery queue the nodes share, whose
    /// leases last `lease` unless renewed.
    pub fn shared_queue(&self, lease: std::time::Duration) -> SharedQueue {
        SharedQueue::new(
            self.background.clone(),
            self.connector.clone(),
            self.io.clone(),
            lease,
        )
    }

    /// Commits on PostgreSQL are durable when they answer.
    pub async fn durable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Closes the pools.
    pub fn close(self) {
        self.database.pool.close();
        self.background.pool.close();
    }
}
