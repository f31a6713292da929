//! Storage: the seam between the service and its storage engines.
//!
//! The rest of the program sees one [`Store`] whose operations are async, so
//! that an engine reached over the network fits without blocking an HTTP
//! worker or an actor's thread. Writes arrive as domain values
//! ([`Write`]); each engine maps them to its own rows, keys and encodings,
//! and enforces the Owner/Member rules of seed 2.4 itself, inside the
//! transaction. Only the commit path (`crate::commit`) calls the write
//! operations.
//!
//! Two engines: sled, embedded, the default (`storage/sled/`, the only code
//! that knows sled and bincode), and PostgreSQL for installations that
//! outgrow one machine (`storage/postgres/`, the only code that knows SQL).

pub mod copy;
pub mod postgres;
mod sealed;
mod sled;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::domain::audit::AuditRecord;
use crate::domain::change::Write;
use crate::domain::delivery::{Job, LogRecord, Outcome};
use crate::domain::error::ApiError;
use crate::domain::idempotency;
use crate::domain::org_state::OrgState;
use crate::domain::resources::Resource;
use crate::domain::user::{TokenRecord, User};
use crate::ids::UserId;
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, ResourceId};
use crate::secrets::SealingKey;
use crate::time::Timestamp;

pub use self::postgres::{Import, PgStore};
pub use self::sealed::Rekeyed;
pub use self::sled::{SledStore, Tuning};

type Cause = Box<dyn std::error::Error + Send + Sync>;

/// What can go wrong below the domain.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The engine failed: I/O, a corrupt page, a closed database.
    #[error("the storage engine failed")]
    Engine(#[source] Cause),
    /// A stored value could not be encoded or decoded.
    #[error("a stored value could not be encoded or decoded")]
    Codec(#[source] Cause),
    /// A write would change or delete the Owner role.
    #[error("the Owner role is immutable")]
    RoleImmutable,
    /// A write would delete the Member role.
    #[error("the Member role cannot be deleted")]
    SystemRole,
    /// A user with this email exists (a node that had not seen it yet).
    #[error("a user with this email exists")]
    EmailTaken,
    /// A write would add a second Owner or Member row, or change a role's kind.
    #[error("an organization has exactly one Owner and one Member role")]
    SystemRoleCount,
    /// Making committed writes durable failed (the same cause for every
    /// writer of the round, hence shared).
    #[error("making the writes durable failed")]
    Flush(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// A write was sent, and its answer did not come back (the connection
    /// broke, or the answer was later than the timeout): it may have been
    /// committed.
    #[error("the store did not confirm the write: {0}")]
    Unconfirmed(String),
    /// The thread that commits has stopped: the store is closing.
    #[error("the store is closed")]
    Closed,
    /// The disk is too full to take the write and keep its reserve.
    #[error("the disk is full: {available_kib} KiB available, {needed_kib} KiB needed (free space in the data directory's filesystem)")]
    DiskFull {
        /// Available to this process, in KiB.
        available_kib: u64,
        /// Needed for the write and the reserve, in KiB.
        needed_kib: u64,
    },
    /// The change was decided on an organization state that another node
    /// has changed since: reload it and decide again.
    #[error("the organization changed meanwhile: {0}")]
    Stale(String),
    /// PostgreSQL stopped the statement as a deadlock or a serialization
    /// conflict with another one: it had no effect, and running it again
    /// may succeed (after the retries of [`postgres`] it is a 503).
    #[error("the database stopped the statement as a conflict with another: {0}")]
    Conflict(String),
    /// The store is out of service until it recovers (it is being reopened
    /// after a failure, or the database cannot be reached); says why.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// The data was written by a build with another storage layout.
    #[error(
        "the data directory has storage layout {found}, this build reads layout {expected}: \
         run the rolecall that wrote it, or restore a backup made for this version"
    )]
    Layout {
        /// The stored layout version.
        found: u8,
        /// The layout this build reads.
        expected: u8,
    },
    /// The data directory could not be prepared.
    #[error("the data directory could not be prepared")]
    Io(#[from] std::io::Error),
    /// Stored webhook secrets do not match `storage.secret_key`: sealed
    /// without a key configured, or with another key.
    #[error("{0}")]
    SecretKey(String),
    /// The storage settings cannot be used.
    #[error("{0}")]
    Config(String),
    /// Another process has the data directory's database open.
    #[error("the data directory {} is in use by another process (another `rolecall serve`?)", .0.display())]
    InUse(std::path::PathBuf),
    /// The database's schema is not one this build can use.
    #[error("{0}")]
    Schema(String),
    /// A webhook secret could not be sealed or opened.
    #[error("a webhook secret could not be sealed or opened")]
    Seal(#[from] crate::secrets::SealError),
}

impl StoreError {
    /// An engine failure, keeping its cause.
    pub fn engine(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Engine(Box::new(cause))
    }

    /// A codec failure, keeping its cause.
    pub fn codec(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Codec(Box::new(cause))
    }

    /// Whether waiting cures it: a disk with no room, or a database that
    /// cannot be reached now (unlike a corrupt file or a wrong layout).
    pub fn is_transient(&self) -> bool {
        self.is_out_of_space()
            || matches!(
                self,
                StoreError::Unavailable(_) | StoreError::Unconfirmed(_)
            )
    }

    /// Whether the disk had no room: what freeing space cures, unlike a
    /// corrupt file or a wrong layout.
    pub fn is_out_of_space(&self) -> bool {
        let full = |err: &std::io::Error| err.kind() == std::io::ErrorKind::StorageFull;
        match self {
            StoreError::DiskFull { .. } => true,
            StoreError::Io(err) => full(err),
            StoreError::Engine(cause) => cause.downcast_ref().is_some_and(full),
            _ => false,
        }
    }
}

/// Resolves once writes already committed are durable (see
/// [`Store::append`]); a flush that failed loses them.
pub struct Durability(Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>);

impl Durability {
    /// Durable once `flushed` resolves.
    pub fn after(flushed: impl Future<Output = Result<(), StoreError>> + Send + 'static) -> Self {
        Durability(Box::pin(flushed))
    }

    /// Waits until the writes are durable.
    pub async fn wait(self) -> Result<(), StoreError> {
        self.0.await
    }
}

impl From<StoreError> for ApiError {
    /// A store that cannot take the write or answer the read now is 503
    /// STORAGE_UNAVAILABLE (CONTRACT §9); a value it cannot decode, or a
    /// write breaking seed 2.4 that no command should have made, is a bug.
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::RoleImmutable => ApiError::RoleImmutable,
            StoreError::EmailTaken => ApiError::EmailTaken,
            StoreError::SystemRole => ApiError::SystemRole,
            StoreError::Engine(_)
            | StoreError::Closed
            | StoreError::Unavailable(_)
            | StoreError::Stale(_)
            | StoreError::Conflict(_)
            | StoreError::DiskFull { .. }
            | StoreError::Io(_) => ApiError::StorageUnavailable(Box::new(err)),
            // A flush that failed after its writes were applied: sled may
            // have written them before the failure, and then reads them back
            // when it is opened again.
            StoreError::Unconfirmed(_) | StoreError::Flush(_) => {
                ApiError::StorageUnconfirmed(Box::new(err))
            }
            other => ApiError::internal(other),
        }
    }
}

/// Everything the in-memory state is built from at start.
pub struct Loaded {
    /// Every organization's state.
    pub orgs: Vec<OrgState>,
    /// Every user.
    pub users: Vec<User>,
    /// Every live token.
    pub tokens: Vec<TokenRecord>,
}

/// The first unfinished deliveries of one organization, oldest first.
pub struct Window {
    /// The organization.
    pub org: OrgId,
    /// Its first jobs.
    pub jobs: Vec<Job>,
    /// Whether more wait after them.
    pub more: bool,
}

/// What one move of an organization's backlog out of the database's
/// memory did ([`Store::spill`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spilled {
    /// Jobs moved.
    pub moved: usize,
    /// Whether more could move: another move may follow at once.
    pub more: bool,
}

/// Most records a filtered page examines (CONTRACT §11: no request scans
/// more than one page's worth): a filter that few records pass answers a
/// short page, even an empty one, and a cursor to go on from.
pub const SCAN_LIMIT: usize = 1_000;

/// One page of a newest-first list, and whether more remain after it.
pub struct Page<T> {
    /// The records, newest first.
    pub items: Vec<T>,
    /// Whether older records remain after the last item.
    pub more: bool,
    /// When a filtered page stopped after examining [`SCAN_LIMIT`] records
    /// without filling up: the id of the last record examined, where the
    /// next page goes on from.
    pub scanned_to: Option<[u8; 16]>,
}

impl<T> Page<T> {
    /// A page that examined everything it needed.
    pub fn complete(items: Vec<T>, more: bool) -> Self {
        Page {
            items,
            more,
            scanned_to: None,
        }
    }
}

/// Which delivery-log records a page holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogFilter<'a> {
    /// Only records of this event id.
    pub event: Option<&'a str>,
    /// Only records with this outcome.
    pub outcome: Option<Outcome>,
}

/// How many records of each kind a store holds: what `rolecall storage
/// copy` checks on both sides.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Users.
    pub users: u64,
    /// API tokens.
    pub tokens: u64,
    /// Organizations.
    pub organizations: u64,
    /// Roles, system roles included.
    pub roles: u64,
    /// Memberships.
    pub memberships: u64,
    /// Webhook endpoints.
    pub webhooks: u64,
    /// Audit records.
    pub audit_records: u64,
    /// Workspace resources of every kind.
    pub resources: u64,
    /// Unfinished deliveries.
    pub deliveries: u64,
    /// Delivery-log records.
    pub log_records: u64,
    /// Whether an admin-token hash is stored (0 or 1).
    pub admin_tokens: u64,
}

impl Counts {
    /// Each kind's name and count, in the order of a report.
    pub fn named(&self) -> [(&'static str, u64); 11] {
        [
            ("users", self.users),
            ("tokens", self.tokens),
            ("organizations", self.organizations),
            ("roles", self.roles),
            ("memberships", self.memberships),
            ("webhook endpoints", self.webhooks),
            ("audit records", self.audit_records),
            ("workspace resources", self.resources),
            ("unfinished deliveries", self.deliveries),
            ("delivery-log records", self.log_records),
            ("admin tokens", self.admin_tokens),
        ]
    }

    /// Every record, whatever its kind.
    pub fn total(&self) -> u64 {
        self.named().iter().map(|(_, n)| n).sum()
    }
}

/// What a node checks on every authorized request when several nodes
/// share the store ([`Store::freshness`]).
#[derive(Clone, Debug, Default)]
pub struct Freshness {
    /// The token presented and its user; `None` when it is unknown or
    /// revoked.
    pub account: Option<(TokenRecord, User)>,
    /// The organization's revision as stored; `None` when no such
    /// organization exists (or no organization was asked about).
    pub revision: Option<u64>,
}

/// How a user is looked up.
#[derive(Clone, Copy, Debug)]
pub enum UserKey<'a> {
    /// By id.
    Id(crate::ids::UserId),
    /// By email, folded ([`crate::domain::names::fold`]).
    Email(&'a str),
}

/// The storage engines.
#[derive(Clone)]
pub enum Store {
    /// sled, embedded in this process.
    Sled(SledStore),
    /// PostgreSQL, over the network.
    Postgres(PgStore),
}

impl Store {
    /// Opens the engine `config` names; webhook secrets are sealed with
    /// `key` at rest when one is given.
    pub async fn open(
        config: &crate::config::StorageConfig,
        key: Option<SealingKey>,
    ) -> Result<Self, StoreError> {
        match config.backend {
            crate::config::Backend::Sled => {
                Store::open_sled(&config.data_dir, Tuning::of(config), key)
            }
            crate::config::Backend::Postgres => {
                let settings = postgres::Settings::of(config).map_err(StoreError::Config)?;
                PgStore::open(&settings, key).await.map(Store::Postgres)
            }
        }
    }

    /// Opens (creating if needed, mode 0700) the embedded database in `dir`;
    /// webhook secrets are sealed with `key` at rest when one is given.
    pub fn open_sled(
        dir: &std::path::Path,
        tuning: Tuning,
        key: Option<SealingKey>,
    ) -> Result<Self, StoreError> {
        SledStore::open(dir, tuning, key).map(Store::Sled)
    }

    /// Commits `writes` in one transaction and waits until they are
    /// durable; gives them back. Concurrent callers may share the
    /// transaction and the flush; a refused write fails its caller alone.
    pub async fn commit(&self, writes: Vec<Write>) -> Result<Vec<Write>, StoreError> {
        match self {
            Store::Sled(store) => store.commit(writes).await,
            Store::Postgres(store) => store.commit(writes).await,
        }
    }

    /// Reads the current value of one of `org`'s resources and commits
    /// what `decide` makes of it, in one transaction, so that concurrent
    /// changes of one resource cannot both succeed. `decide` may run more
    /// than once (on conflict), so it must not have effects. Not yet
    /// durable: await [`Store::durable`].
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
        match self {
            Store::Sled(store) => store.update_resource(org, id, decide),
            Store::Postgres(store) => store.update_resource(org, id, decide).await,
        }
    }

    /// Commits `writes` in one transaction of their own, after every
    /// `append` before it, and answers once they are committed; the
    /// [`Durability`] resolves once they are durable, with the next flush
    /// others cause (or soon after). For delivery results, which no request
    /// waits on: the caller can append the next batch meanwhile.
    pub async fn append(&self, writes: &[Write]) -> Result<Durability, StoreError> {
        match self {
            Store::Sled(store) => store.append(writes),
            Store::Postgres(store) => store.append(writes).await,
        }
    }

    /// Whether the store takes writes now (`GET /readyz`).
    pub async fn ready(&self) -> Result<(), StoreError> {
        match self {
            Store::Sled(store) => store.ready(),
            Store::Postgres(store) => store.ready().await,
        }
    }

    /// Claims the idempotency key `scope` until `until` for a request of
    /// `fingerprint`, whose answer would be kept until `expires`, unless a
    /// live record holds it at `now`: then what that record says (replay
    /// its answer, wait for its request, or refuse another).
    pub async fn idempotency_begin(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        until: crate::time::Timestamp,
        expires: crate::time::Timestamp,
        now: crate::time::Timestamp,
    ) -> Result<idempotency::Begin, StoreError> {
        match self {
            Store::Sled(store) => store.idempotency_begin(scope, fingerprint, until, expires, now),
            Store::Postgres(store) => {
                store
                    .idempotency_begin(scope, fingerprint, until, expires, now)
                    .await
            }
        }
    }

    /// Records `answer`, kept until `expires`, of the request of
    /// `fingerprint` that claimed `scope`: durable when it returns.
    pub async fn idempotency_answer(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        answer: idempotency::StoredAnswer,
        expires: crate::time::Timestamp,
    ) -> Result<(), StoreError> {
        match self {
            Store::Sled(store) => {
                store
                    .idempotency_answer(scope, fingerprint, answer, expires)
                    .await
            }
            Store::Postgres(store) => {
                store
                    .idempotency_answer(scope, fingerprint, answer, expires)
                    .await
            }
        }
    }

    /// Drops `claim` (its request's answer is not kept: a retry may run
    /// again), unless the key is answered or claimed anew since. On
    /// PostgreSQL a failed drop is tried again in the background, so that
    /// a retry does not wait for the claim to lapse.
    pub async fn idempotency_forget(&self, claim: idempotency::KeyClaim) -> Result<(), StoreError> {
        match self {
            Store::Sled(store) => {
                store.idempotency_forget(claim);
                Ok(())
            }
            Store::Postgres(store) => store.idempotency_forget(claim).await,
        }
    }

    /// The request of `fingerprint` that claimed `scope` had its answer
    /// recorded with its change ([`Write::KeyAnswer`]): its claim is over.
    /// Only sled keeps claims apart from answers (in memory); on
    /// PostgreSQL the answer replaced the claim's row.
    pub fn idempotency_answered(&self, scope: [u8; 32], fingerprint: &[u8; 32]) {
        if let Store::Sled(store) = self {
            store.idempotency_answered(scope, fingerprint);
        }
    }

    /// Deletes up to `limit` idempotency records past their time at `now`;
    /// how many went.
    pub async fn idempotency_purge(
        &self,
        now: crate::time::Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError> {
        match self {
            Store::Sled(store) => {
                let store = store.clone();
                tokio::task::spawn_blocking(move || store.idempotency_purge(now, limit))
                    .await
                    .map_err(StoreError::engine)?
            }
            Store::Postgres(store) => store.idempotency_purge(now, limit).await,
        }
    }

    /// Resolves once every commit made before the call is durable.
    pub async fn durable(&self) -> Result<(), StoreError> {
        match self {
            Store::Sled(store) => store.durable().await,
            Store::Postgres(store) => store.durable().await,
        }
    }

    /// Deletes all but the newest `keep` delivery-log records of `org`;
    /// returns how many remain.
    pub async fn prune_delivery_log(&self, org: OrgId, keep: usize) -> Result<usize, StoreError> {
        match self {
            Store::Sled(store) => store.prune_delivery_log(org, keep).await,
            Store::Postgres(store) => store.prune_delivery_log(org, keep).await,
        }
    }

    /// Deletes the `count` oldest delivery-log records of `org`; returns how
    /// many it deleted.
    pub async fn trim_delivery_log(&self, org: OrgId, count: usize) -> Result<usize, StoreError> {
        match self {
            Store::Sled(store) => store.trim_delivery_log(org, count).await,
            Store::Postgres(store) => store.trim_delivery_log(org, count).await,
        }
    }

    /// Which of `records` the delivery log holds already. sled's writes of
    /// outcomes are idempotent (a record's key is its id), so it answers
    /// none; PostgreSQL's insert would fail on a record a write whose
    /// answer was lost had landed.
    pub async fn logged_already(
        &self,
        records: &[(OrgId, crate::ids::LogId)],
    ) -> Result<Vec<(OrgId, crate::ids::LogId)>, StoreError> {
        match self {
            Store::Sled(_) => Ok(Vec::new()),
            Store::Postgres(store) => store.logged_already(records).await,
        }
    }

    /// Reads everything the in-memory state is built from.
    pub async fn load(&self) -> Result<Loaded, StoreError> {
        match self {
            Store::Sled(store) => store.load(),
            Store::Postgres(store) => store.load().await,
        }
    }

    /// Whether other nodes change what this node holds in memory: then
    /// memory is a cache, and a request checks its token and organization
    /// against the store first ([`Store::freshness`]).
    pub fn shared(&self) -> bool {
        matches!(self, Store::Postgres(_))
    }

    /// This node's side of the delivery queue other nodes share, with
    /// leases of `lease`; `None` on a store no other node shares, where
    /// this node delivers everything in its outbox.
    pub fn shared_queue(&self, lease: std::time::Duration) -> Option<postgres::SharedQueue> {
        match self {
            Store::Sled(_) => None,
            Store::Postgres(store) => Some(store.shared_queue(lease)),
        }
    }

    /// The live token whose SHA-256 is `token` (when one is given), with
    /// its user, and the stored revision of `org`: in one round trip, which
    /// concurrent callers share. `None` on a store no other node shares,
    /// where memory is the truth.
    pub async fn freshness(
        &self,
        token: Option<&[u8; 32]>,
        org: Option<OrgId>,
    ) -> Result<Option<Freshness>, StoreError> {
        match self {
            Store::Sled(_) => Ok(None),
            Store::Postgres(store) => store.freshness(token, org).await.map(Some),
        }
    }

    /// A user as stored, on a shared store (`None` on sled, whose users
    /// are all in memory).
    pub async fn user(&self, by: UserKey<'_>) -> Result<Option<User>, StoreError> {
        match self {
            Store::Sled(_) => Ok(None),
            Store::Postgres(store) => store.user(by).await,
        }
    }

    /// The organizations `user` belongs to as stored, with their
    /// revisions, on a shared store (empty on sled).
    pub async fn orgs_of(&self, user: crate::ids::UserId) -> Result<Vec<(OrgId, u64)>, StoreError> {
        match self {
            Store::Sled(_) => Ok(Vec::new()),
            Store::Postgres(store) => store.orgs_of(user).await,
        }
    }

    /// A token record as stored, on a shared store (`None` on sled).
    pub async fn token(&self, id: crate::ids::TokenId) -> Result<Option<TokenRecord>, StoreError> {
        match self {
            Store::Sled(_) => Ok(None),
            Store::Postgres(store) => store.token(id).await,
        }
    }

    /// One organization's state as stored now (webhook secret opened), for
    /// a node whose snapshot is behind the database's.
    pub async fn org_state(&self, org: OrgId) -> Result<Option<OrgState>, StoreError> {
        match self {
            Store::Sled(store) => store.org_state(org),
            Store::Postgres(store) => store.org_state(org).await,
        }
    }

    /// Up to `limit` of `org`'s unfinished deliveries after `after`, oldest
    /// first: the next part of its backlog.
    pub async fn outbox_after(
        &self,
        org: OrgId,
        after: Option<DeliveryId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        match self {
            Store::Sled(store) => store.outbox_after(org, after, limit).await,
            Store::Postgres(store) => store.outbox_after(org, after, limit).await,
        }
    }

    /// Whether a long backlog should be moved out of the database's memory
    /// ([`Store::spill`]): on sled, whose page table and cache grow with
    /// the outbox tree, not on PostgreSQL, whose memory is its server's.
    pub fn spills(&self) -> bool {
        matches!(self, Store::Sled(_))
    }

    /// Moves at most `max` of `org`'s unfinished deliveries after `after`,
    /// past the next `keep`, out of the database's memory, to be read back
    /// in order by [`Store::outbox_after`]. No job after `after` may be
    /// held for delivery, nor read meanwhile.
    pub async fn spill(
        &self,
        org: OrgId,
        after: Option<DeliveryId>,
        keep: usize,
        max: usize,
    ) -> Result<Spilled, StoreError> {
        match self {
            Store::Sled(store) => {
                let store = store.clone();
                let moving =
                    tokio::task::spawn_blocking(move || store.spill(org, after, keep, max));
                moving.await.map_err(StoreError::engine)?
            }
            Store::Postgres(_) => Ok(Spilled::default()),
        }
    }

    /// Each organization's first `limit` unfinished deliveries, and whether
    /// more wait: what the dispatcher holds at start.
    pub async fn outbox_windows(&self, limit: usize) -> Result<Vec<Window>, StoreError> {
        match self {
            Store::Sled(store) => store.outbox_windows(limit).await,
            Store::Postgres(store) => store.outbox_windows(limit).await,
        }
    }

    /// The stored admin-token hash, if any.
    pub async fn admin_token_hash(&self) -> Result<Option<[u8; 32]>, StoreError> {
        match self {
            Store::Sled(store) => store.admin_token_hash(),
            Store::Postgres(store) => store.admin_token_hash().await,
        }
    }

    /// A workspace resource of `org`.
    pub async fn resource<T: Resource>(
        &self,
        org: OrgId,
        id: ResourceId,
    ) -> Result<Option<T>, StoreError> {
        match self {
            Store::Sled(store) => store.resource(org, id),
            Store::Postgres(store) => store.resource(org, id).await,
        }
    }

    /// One page of `org`'s resources of kind `T`, newest first, strictly
    /// before `before` when given; only those belonging to `parent` when
    /// given (see [`Resource::parent`]).
    pub async fn resource_page<T: Resource>(
        &self,
        org: OrgId,
        before: Option<ResourceId>,
        limit: usize,
        parent: Option<ResourceId>,
    ) -> Result<Page<T>, StoreError> {
        match self {
            Store::Sled(store) => store.resource_page(org, before, limit, parent).await,
            Store::Postgres(store) => store.resource_page(org, before, limit, parent).await,
        }
    }

    /// Every (organization, member) whose role assignment ended by `now`:
    /// what the expiry sweep records as fall-backs (perhaps not all at once).
    pub async fn due_role_expiries(
        &self,
        now: Timestamp,
    ) -> Result<Vec<(OrgId, UserId)>, StoreError> {
        match self {
            Store::Sled(store) => store.due_role_expiries(now),
            Store::Postgres(store) => store.due_role_expiries(now).await,
        }
    }

    /// One page of an organization's audit log, newest first, strictly
    /// before the record `before` when given; only `action` when given.
    pub async fn audit_page(
        &self,
        org: OrgId,
        before: Option<AuditId>,
        limit: usize,
        action: Option<&str>,
    ) -> Result<Page<AuditRecord>, StoreError> {
        match self {
            Store::Sled(store) => store.audit_page(org, before, limit, action).await,
            Store::Postgres(store) => store.audit_page(org, before, limit, action).await,
        }
    }

    /// One page of an organization's delivery log, newest first, strictly
    /// before the record `before` when given.
    pub async fn delivery_log_page(
        &self,
        org: OrgId,
        before: Option<LogId>,
        limit: usize,
        filter: LogFilter<'_>,
    ) -> Result<Page<LogRecord>, StoreError> {
        match self {
            Store::Sled(store) => store.delivery_log_page(org, before, limit, filter).await,
            Store::Postgres(store) => store.delivery_log_page(org, before, limit, filter).await,
        }
    }

    /// The newest delivery-log record of `delivery` in `org`, if any: looked
    /// up by (organization, delivery id), whatever the log's length.
    pub async fn find_delivery(
        &self,
        org: OrgId,
        delivery: DeliveryId,
    ) -> Result<Option<LogRecord>, StoreError> {
        match self {
            Store::Sled(store) => store.find_delivery(org, delivery).await,
            Store::Postgres(store) => store.find_delivery(org, delivery).await,
        }
    }

    /// Unfinished deliveries in the outbox (for metrics).
    pub async fn outbox_len(&self) -> Result<usize, StoreError> {
        match self {
            Store::Sled(store) => store.outbox_len().await,
            Store::Postgres(store) => store.outbox_len().await,
        }
    }

    /// How many records of each kind the store holds.
    pub async fn counts(&self) -> Result<Counts, StoreError> {
        match self {
            Store::Sled(store) => store.counts(),
            Store::Postgres(store) => store.counts().await,
        }
    }

    /// The database's size on disk in bytes (for metrics).
    pub async fn size_on_disk(&self) -> Result<u64, StoreError> {
        match self {
            Store::Sled(store) => store.size_on_disk().await,
            Store::Postgres(store) => store.size_on_disk().await,
        }
    }

    /// Makes everything durable and releases the database (its file lock
    /// included), for a process that opened it only to write and must hand
    /// it to a server.
    pub async fn close(self) -> Result<(), StoreError> {
        match self {
            Store::Sled(store) => store.close(),
            Store::Postgres(store) => {
                store.close();
                Ok(())
            }
        }
    }
}
