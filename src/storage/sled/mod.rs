//! The embedded engine: sled, with bincode values. The only code that knows
//! either.
//!
//! Writes reach it in two ways, encoded into row operations on the
//! writer's thread first. [`SledStore::commit`] hands them to the commit
//! thread ([`group_commit`]), which applies those of every request of its
//! round in one transaction and flushes once; a read-modify-write of a
//! resource ([`SledStore::update_resource`]) and a batch of delivery
//! results ([`SledStore::append`]) run their own transaction on the
//! caller's thread and ask the same thread only for the flush. Every
//! operation uses the database in service ([`engine::Slot`]), which an I/O
//! failure takes out of service until it is reopened.

mod answer_batches;
mod answered;
pub mod codec;
mod engine;
mod group_commit;
pub mod idempotency;
pub mod keys;
mod late;
mod read;
mod room;
mod spill;
mod write;

use std::path::Path;
use std::sync::Arc;

use ::sled::transaction::ConflictableTransactionError;
use ::sled::Transactional;

use crate::domain::audit::AuditRecord;
use crate::domain::change::Write;
use crate::domain::delivery::{Job, LogRecord};
use crate::domain::org_state::OrgState;
use crate::domain::resources::Resource;
use crate::domain::webhook::WebhookEndpoint;
use crate::ids::UserId;
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, ResourceId};
use crate::secrets::{SealingKey, Secret};
use crate::storage::sealed::Rekeyed;
use crate::storage::{Counts, Durability, Loaded, LogFilter, Page, Spilled, StoreError, Window};
use crate::time::Timestamp;
use codec::{decode, decode_head};
use engine::{Engine, Slot};
use group_commit::GroupCommit;
use keys::TreeName;
use late::LateRecords;
use room::Room;
use spill::Spills;
use write::{apply, commit_to, lift, lift_read, prepare, transaction, Aborted};

/// The storage layout this build reads and writes: tree names and value
/// encodings. A change gets a new number and a migration on open. Layout
/// 2 keys the outbox by organization (`outbox_v2`), so that each
/// organization's backlog is read in order, a window at a time. Layout 3
/// adds the spills tree: an older build would not see the jobs in a
/// backlog file. Layout 4 adds the delivery-log entries by delivery id
/// (`delivery_ids_v1`), which an older build would not keep up to date.
const LAYOUT: u8 = 5;

/// Performance settings of the database.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Page-cache size in MiB.
    pub cache_mb: u64,
    /// How long a flush waits to gather concurrent writers (see `group_commit`).
    pub commit_window: std::time::Duration,
    /// Free space kept on the disk, in MiB (at most a tenth of it; see `room`).
    pub min_free_mb: u64,
}

impl Tuning {
    /// The settings of `config`.
    pub fn of(config: &crate::config::StorageConfig) -> Self {
        Tuning {
            cache_mb: config.cache_mb,
            commit_window: std::time::Duration::from_micros(config.group_commit_window_us),
            min_free_mb: config.min_free_mb,
        }
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            cache_mb: 64,
            commit_window: std::time::Duration::from_millis(1),
            min_free_mb: 64,
        }
    }
}

/// The sled database in service and its commit thread.
#[derive(Clone)]
pub struct SledStore {
    slot: Arc<Slot>,
    committer: GroupCommit,
    room: Room,
    /// Long backlogs' files.
    spills: Spills,
    /// Seals webhook secrets at rest, when `storage.secret_key` is set.
    key: Option<SealingKey>,
    /// Which delivery-log records get an entry by delivery id.
    late: Arc<LateRecords>,
    /// Idempotency keys whose requests run now (one process has the
    /// directory: claims need not be written).
    claims: Arc<idempotency::Claims>,
    /// The idempotency scopes that may have a live answer stored.
    answered: Arc<answered::AnsweredScopes>,
}

impl SledStore {
    /// Opens (creating if needed, mode 0700) the database in `dir`. With
    /// `key`, webhook secrets are sealed at rest: stored ones in clear are
    /// sealed now; sealed ones must open with it.
    pub fn open(dir: &Path, tuning: Tuning, key: Option<SealingKey>) -> Result<Self, StoreError> {
        create_private_dir(dir)?;
        let engine = Engine::open(dir, tuning).map_err(|err| match err {
            // sled 0.34 says so only in its message.
            ::sled::Error::Io(io) if io.to_string().starts_with("could not acquire lock") => {
                StoreError::InUse(dir.to_owned())
            }
            // The I/O error itself, so that callers can tell a full disk.
            ::sled::Error::Io(io) => StoreError::engine(io),
            other => StoreError::engine(other),
        })?;
        check_layout(&engine)?;
        seal_stored_secrets(&engine, key.as_ref())?;
        let room = Room::new(dir, tuning.min_free_mb);
        let spills = Spills::open(dir, room.clone(), &engine)?;
        let answered = answered::AnsweredScopes::read(&engine, Timestamp::now())
            .map(Arc::new)
            .map_err(StoreError::engine)?;
        let slot = Slot::new(dir, tuning, engine);
        let committer = GroupCommit::start(
            slot.clone(),
            room.clone(),
            answered.clone(),
            tuning.commit_window,
        )?;
        Ok(SledStore {
            slot,
            committer,
            room,
            spills,
            key,
            late: Arc::default(),
            claims: Arc::default(),
            answered,
        })
    }

    /// Opens every stored webhook secret with `from` (or reads it in clear)
    /// and stores it sealed with `to` (or in clear): `rolecall admin rekey`,
    /// on a data directory no server has open. A secret that does not open
    /// refuses the whole change, unless `replace_unreadable` makes a new
    /// secret for it (the way out of a lost key).
    pub fn rekey(
        dir: &Path,
        from: Option<&SealingKey>,
        to: Option<&SealingKey>,
        replace_unreadable: Option<fn() -> Secret>,
    ) -> Result<Rekeyed, StoreError> {
        let engine = Engine::open(dir, Tuning::default()).map_err(StoreError::engine)?;
        check_layout(&engine)?;
        reseal(&engine, from, to, replace_unreadable)
    }

    /// Whether `dir` holds a database (opening one that does not would
    /// create it).
    pub fn exists_in(dir: &Path) -> bool {
        let db = engine::database_path(dir);
        db.join("conf").is_file() && db.join("db").is_file()
    }

    /// Runs `read` on the database in service; an I/O failure takes it out
    /// of service.
    fn read<T>(
        &self,
        read: impl FnOnce(&Engine) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let engine = self.slot.current()?;
        self.slot.check(read(&engine))
    }

    /// Runs `read` on the database in service on a blocking thread: for
    /// reads that examine many records (pages, scans), which an HTTP worker
    /// must not wait for.
    async fn read_off_thread<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Engine) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.read(read))
            .await
            .map_err(StoreError::engine)?
    }

    /// See [`crate::storage::Store::commit`].
    pub async fn commit(&self, writes: Vec<Write>) -> Result<Vec<Write>, StoreError> {
        let ops = prepare(&writes, self.key.as_ref(), &self.late, &self.answered)?;
        self.committer.commit(ops).await?;
        Ok(writes)
    }

    /// See [`crate::storage::Store::append`].
    pub fn append(&self, writes: &[Write]) -> Result<Durability, StoreError> {
        let ops = prepare(writes, self.key.as_ref(), &self.late, &self.answered)?;
        self.room.check(write::size_of(&ops))?;
        self.read(|engine| commit_to(&engine.trees, &self.answered, ops.iter()))?;
        self.slot.wrote();
        Ok(Durability::after(self.committer.durable_soon()))
    }

    /// See [`crate::storage::Store::update_resource`]. The transaction covers
    /// the resources and what a resource change records: its events' jobs
    /// and skipped records.
    pub fn update_resource<T, R, E>(
        &self,
        org: OrgId,
        id: ResourceId,
        decide: impl Fn(Option<T>) -> Result<(Vec<Write>, R), E>,
    ) -> Result<(Vec<Write>, R), E>
    where
        T: Resource,
        E: From<StoreError>,
    {
        self.room.check(0)?;
        let engine = self.slot.current()?;
        let covered = [
            TreeName::Resources,
            TreeName::Outbox,
            TreeName::DeliveryLog,
            TreeName::DeliveryIds,
            // A keyed action's answer (`Write::KeyAnswer`), where
            // `answered` finds it.
            TreeName::AnswersByExpiry,
            TreeName::Idempotency,
        ];
        let key = keys::resource(org, T::KIND, id);
        let outcome = transaction(&engine.trees, covered, |views| {
            let resources = views.tree(TreeName::Resources).map_err(lift)?;
            let current = match resources.get(key.as_slice()).map_err(lift_read)? {
                Some(bytes) => Some(
                    decode::<T>(&bytes)
                        .map_err(|err| ConflictableTransactionError::Abort(Aborted::Store(err)))?,
                ),
                None => None,
            };
            let (writes, outcome) = decide(current)
                .map_err(|err| ConflictableTransactionError::Abort(Aborted::Decided(err)))?;
            let ops = prepare(&writes, self.key.as_ref(), &self.late, &self.answered)
                .map_err(|err| ConflictableTransactionError::Abort(Aborted::Store(err)))?;
            for op in &ops {
                apply(views, op).map_err(lift)?;
            }
            Ok((writes, outcome))
        });
        match outcome {
            Ok(done) => Ok(done),
            Err(Aborted::Decided(err)) => Err(err),
            Err(Aborted::Store(err)) => {
                self.slot.note(&err);
                Err(E::from(err))
            }
        }
    }

    /// Resolves once every commit made before the call is on disk.
    pub async fn durable(&self) -> Result<(), StoreError> {
        self.committer.durable().await
    }

    /// Whether the store takes writes now: in service (see
    /// [`Slot::ready`]) and with room on the disk.
    pub fn ready(&self) -> Result<(), StoreError> {
        self.room.check(0)?;
        self.slot.ready()
    }

    /// Flushes and releases the database (its file lock included).
    pub fn close(self) -> Result<(), StoreError> {
        let SledStore {
            slot, committer, ..
        } = self;
        committer.stop();
        slot.close()
    }

    /// Unfinished deliveries: the outbox tree's keys and the jobs in
    /// backlog files, counted off the caller's thread.
    pub async fn outbox_len(&self) -> Result<usize, StoreError> {
        let engine = self.slot.current()?;
        let counted = tokio::task::spawn_blocking(move || {
            let spilled = spill::queued(&engine)?;
            Ok::<_, StoreError>(engine.tree(TreeName::Outbox).len() + spilled as usize)
        });
        counted.await.map_err(StoreError::engine)?
    }

    /// The database's size on disk in bytes (a walk of its files).
    pub async fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.read_off_thread(|engine| engine.db.size_on_disk().map_err(StoreError::engine))
            .await
    }

    /// See [`crate::storage::Store::counts`]: a count of keys per tree.
    pub fn counts(&self) -> Result<Counts, StoreError> {
        self.read(Engine::counts)
    }

    /// The stored admin-token hash, if any.
    pub fn admin_token_hash(&self) -> Result<Option<[u8; 32]>, StoreError> {
        self.read(Engine::admin_token_hash)
    }

    /// Reads everything the in-memory state is built from.
    pub fn load(&self) -> Result<Loaded, StoreError> {
        self.read(|engine| engine.load(self.key.as_ref()))
    }

    /// See [`crate::storage::Store::org_state`].
    pub fn org_state(&self, org: OrgId) -> Result<Option<OrgState>, StoreError> {
        self.read(|engine| engine.org_state(org, self.key.as_ref()))
    }

    /// Whether webhook secrets are sealed at rest.
    pub fn seals_secrets(&self) -> bool {
        self.key.is_some()
    }

    /// Up to `limit` of `org`'s unfinished deliveries after `after`, oldest
    /// first, read off the caller's thread. Those read back from its
    /// backlog file move into the outbox tree (see [`spill`]), durably
    /// before they are returned: the next shared flush.
    pub async fn outbox_after(
        &self,
        org: OrgId,
        after: Option<DeliveryId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let store = self.clone();
        let (jobs, read_back) = tokio::task::spawn_blocking(move || {
            store.read(|engine| store.spills.read_after(engine, org, after, limit))
        })
        .await
        .map_err(StoreError::engine)??;
        if read_back {
            self.committer.durable().await?;
        }
        Ok(jobs)
    }

    /// Each organization's first `limit` unfinished deliveries, and whether
    /// more wait; durable like [`SledStore::outbox_after`]'s.
    pub async fn outbox_windows(&self, limit: usize) -> Result<Vec<Window>, StoreError> {
        let store = self.clone();
        let (windows, read_back) =
            tokio::task::spawn_blocking(move || store.read(|engine| store.windows(engine, limit)))
                .await
                .map_err(StoreError::engine)??;
        if read_back {
            self.committer.durable().await?;
        }
        Ok(windows)
    }

    fn windows(&self, engine: &Engine, limit: usize) -> Result<(Vec<Window>, bool), StoreError> {
        let mut orgs = engine.outbox_orgs()?;
        orgs.extend(spill::orgs(engine)?);
        orgs.sort_unstable();
        orgs.dedup();
        let (mut windows, mut read_back) = (Vec::with_capacity(orgs.len()), false);
        for org in orgs {
            match self.spills.read_after(engine, org, None, limit + 1) {
                Ok((mut jobs, moved)) => {
                    read_back |= moved;
                    let more = jobs.len() > limit;
                    jobs.truncate(limit);
                    windows.push(Window { org, jobs, more });
                }
                // One organization's unreadable backlog holds up only its own.
                Err(err) if !engine::is_io_failure(&err) => tracing::error!(
                    organization_id = %org, error = %crate::telemetry::cause_chain(&err),
                    "reading this organization's outbox failed; its deliveries wait for the next start"
                ),
                Err(err) => return Err(err),
            }
        }
        Ok((windows, read_back))
    }

    /// `org`'s jobs in the outbox tree as it stands, oldest first (none from
    /// a backlog file): what a commit has just written.
    #[cfg(test)]
    pub fn outbox_tree(&self, org: OrgId) -> Result<Vec<Job>, StoreError> {
        self.read(|engine| engine.outbox_after(org, None, None, usize::MAX))
    }

    /// See [`crate::storage::Store::spill`]: at most `max` of `org`'s jobs
    /// after `after`, past the next `keep`, move to its backlog file.
    pub fn spill(
        &self,
        org: OrgId,
        after: Option<DeliveryId>,
        keep: usize,
        max: usize,
    ) -> Result<Spilled, StoreError> {
        self.read(|engine| self.spills.spill(engine, org, after, keep, max))
    }

    /// A workspace resource of `org`: one lookup by key, on the caller's
    /// thread (moved to a blocking thread, the hand-off cost a fifth of
    /// the read throughput in paired runs; see BENCHMARKS.md).
    pub fn resource<T: Resource>(
        &self,
        org: OrgId,
        id: ResourceId,
    ) -> Result<Option<T>, StoreError> {
        self.read(|engine| engine.resource(org, id))
    }

    /// One page of `org`'s resources of kind `T`, newest first.
    pub async fn resource_page<T: Resource>(
        &self,
        org: OrgId,
        before: Option<ResourceId>,
        limit: usize,
        parent: Option<ResourceId>,
    ) -> Result<Page<T>, StoreError> {
        self.read_off_thread(move |engine| engine.resource_page(org, before, limit, parent))
            .await
    }

    /// One page of an organization's audit log, newest first.
    pub async fn audit_page(
        &self,
        org: OrgId,
        before: Option<AuditId>,
        limit: usize,
        action: Option<&str>,
    ) -> Result<Page<AuditRecord>, StoreError> {
        let action = action.map(str::to_owned);
        self.read_off_thread(move |engine| engine.audit_page(org, before, limit, action.as_deref()))
            .await
    }

    /// Every (organization, member) whose role assignment ended by `now`.
    pub fn due_role_expiries(&self, now: Timestamp) -> Result<Vec<(OrgId, UserId)>, StoreError> {
        self.read(|engine| engine.due_role_expiries(now))
    }

    /// One page of an organization's delivery log, newest first.
    pub async fn delivery_log_page(
        &self,
        org: OrgId,
        before: Option<LogId>,
        limit: usize,
        filter: LogFilter<'_>,
    ) -> Result<Page<LogRecord>, StoreError> {
        let (event, outcome) = (filter.event.map(str::to_owned), filter.outcome);
        self.read_off_thread(move |engine| {
            let filter = LogFilter {
                event: event.as_deref(),
                outcome,
            };
            engine.delivery_log_page(org, before, limit, filter)
        })
        .await
    }

    /// See [`crate::storage::Store::find_delivery`].
    pub async fn find_delivery(
        &self,
        org: OrgId,
        delivery: DeliveryId,
    ) -> Result<Option<LogRecord>, StoreError> {
        self.read_off_thread(move |engine| engine.find_delivery(org, delivery))
            .await
    }

    /// Deletes all but the newest `keep` delivery-log records of `org` (a
    /// scan of the whole log, off the caller's thread); returns how many
    /// remain.
    pub async fn prune_delivery_log(&self, org: OrgId, keep: usize) -> Result<usize, StoreError> {
        let log = LogTrees::of(&*self.slot.current()?);
        let pruned = tokio::task::spawn_blocking(move || {
            let total = log.records.scan_prefix(org.as_bytes()).keys().count();
            let excess = total.saturating_sub(keep);
            if excess == 0 {
                return Ok(total);
            }
            log.remove_oldest(org, excess)?;
            Ok(keep)
        })
        .await
        .map_err(StoreError::engine)?;
        self.slot.check(pruned)
    }

    /// Deletes the `count` oldest delivery-log records of `org` (reading
    /// only those, off the caller's thread); returns how many it deleted.
    pub async fn trim_delivery_log(&self, org: OrgId, count: usize) -> Result<usize, StoreError> {
        let log = LogTrees::of(&*self.slot.current()?);
        let trimmed = tokio::task::spawn_blocking(move || log.remove_oldest(org, count))
            .await
            .map_err(StoreError::engine)?;
        self.slot.check(trimmed)
    }
}

/// The delivery log's trees: its records, and their entries by delivery.
struct LogTrees {
    records: ::sled::Tree,
    by_delivery: ::sled::Tree,
}

impl LogTrees {
    fn of(engine: &Engine) -> Self {
        LogTrees {
            records: engine.tree(TreeName::DeliveryLog).clone(),
            by_delivery: engine.tree(TreeName::DeliveryIds).clone(),
        }
    }

    /// Deletes the `count` oldest records of `org` and their entries by
    /// delivery, in one transaction; returns how many it deleted. Reads
    /// keys only: an entry's last 16 bytes are its record's id, and few
    /// records have one (see `late`).
    fn remove_oldest(&self, org: OrgId, count: usize) -> Result<usize, StoreError> {
        let (mut records, mut entries) = (::sled::Batch::default(), ::sled::Batch::default());
        let mut removed = 0;
        let mut newest_removed = None;
        for key in self.records.scan_prefix(org.as_bytes()).keys().take(count) {
            let key = key.map_err(StoreError::engine)?;
            records.remove(key.clone());
            newest_removed = Some(key);
            removed += 1;
        }
        if let Some(newest) = newest_removed.as_ref().and_then(|k| k.get(16..32)) {
            for key in self.by_delivery.scan_prefix(org.as_bytes()).keys() {
                let key = key.map_err(StoreError::engine)?;
                if key.get(32..).is_some_and(|id| id <= newest) {
                    entries.remove(key);
                }
            }
        }
        if removed > 0 {
            (&self.records, &self.by_delivery)
                .transaction(|(records_view, entries_view)| {
                    records_view.apply_batch(&records)?;
                    entries_view.apply_batch(&entries)?;
                    Ok::<_, ConflictableTransactionError<StoreError>>(())
                })
                .map_err(|err| match err {
                    ::sled::transaction::TransactionError::Abort(err) => err,
                    ::sled::transaction::TransactionError::Storage(err) => StoreError::engine(err),
                })?;
        }
        Ok(removed)
    }
}

/// Refuses a database of a layout this build does not know; migrates
/// layouts 1 and 2; stamps a new one with this build's.
fn check_layout(engine: &Engine) -> Result<(), StoreError> {
    let meta = engine.tree(TreeName::Meta);
    let stamp = || -> Result<(), StoreError> {
        meta.insert(keys::LAYOUT_VERSION, &[LAYOUT])
            .map_err(StoreError::engine)?;
        engine.db.flush().map_err(StoreError::engine)?;
        Ok(())
    };
    match meta
        .get(keys::LAYOUT_VERSION)
        .map_err(StoreError::engine)?
        .as_deref()
    {
        None => stamp(),
        Some([version]) if *version == LAYOUT => drop_old_outbox(engine),
        Some([4]) => {
            endpoint_status(engine)?;
            stamp()
        }
        // Layout 2 lacks the spills tree too, which opening created empty.
        Some([2 | 3]) => {
            index_deliveries(engine)?;
            endpoint_status(engine)?;
            stamp()
        }
        Some([1]) => {
            migrate_outbox(engine)?;
            index_deliveries(engine)?;
            endpoint_status(engine)?;
            stamp()?;
            drop_old_outbox(engine)
        }
        Some(other) => Err(StoreError::Layout {
            found: other.first().copied().unwrap_or(0),
            expected: LAYOUT,
        }),
    }
}

/// Layouts 1–4 → 5: every webhook endpoint gains its status (enabled,
/// with no failing run). A record already rewritten is left as it is, so
/// doing it again after a crash is harmless.
fn endpoint_status(engine: &Engine) -> Result<(), StoreError> {
    /// The endpoint as layouts 1–4 stored it.
    #[derive(serde::Deserialize)]
    struct Before {
        organization_id: crate::ids::OrgId,
        url: String,
        events: crate::domain::webhook::EventSet,
        #[serde(with = "crate::secrets::plaintext")]
        secret: crate::secrets::Secret,
        created_at: crate::time::Timestamp,
        updated_at: crate::time::Timestamp,
    }
    let tree = engine.tree(TreeName::Webhooks);
    let rewritten = rows_into(tree, tree, |value| {
        if decode::<WebhookEndpoint>(value).is_ok() {
            return Ok(None);
        }
        let before: Before = decode(value)?;
        let endpoint = WebhookEndpoint {
            organization_id: before.organization_id,
            url: before.url,
            events: before.events,
            secret: before.secret,
            created_at: before.created_at,
            updated_at: before.updated_at,
            disabled: None,
            failing_since: None,
        };
        let key = endpoint.organization_id.as_bytes().to_vec();
        Ok(Some((key, codec::encode(&endpoint)?)))
    })?;
    engine.db.flush().map_err(StoreError::engine)?;
    if rewritten > 0 {
        tracing::info!(
            endpoints = rewritten,
            "storage layout 5: webhook endpoints have a status"
        );
    }
    Ok(())
}

/// Layout 1 → 2: copies every job of `outbox_v1` (keyed by delivery id)
/// into the outbox keyed by organization, in batches. Copying again after
/// a crash is harmless: the layout is stamped only once all are copied.
fn migrate_outbox(engine: &Engine) -> Result<(), StoreError> {
    let old = engine
        .db
        .open_tree(keys::OUTBOX_V1)
        .map_err(StoreError::engine)?;
    let moved = rows_into(&old, engine.tree(TreeName::Outbox), |value| {
        let job: crate::domain::delivery::Job = decode(value)?;
        let key = keys::job(job.organization_id, job.delivery_id).to_vec();
        Ok(Some((key, codec::encode(&job)?)))
    })?;
    engine.db.flush().map_err(StoreError::engine)?;
    if moved > 0 {
        tracing::info!(
            jobs = moved,
            "storage layout 1 → 2: the outbox is now kept by organization"
        );
    }
    Ok(())
}

/// Layouts 1–3 → 4: an entry by delivery id for every delivery-log record.
/// Doing it again after a crash is harmless: the layout is stamped only
/// once all are written.
fn index_deliveries(engine: &Engine) -> Result<(), StoreError> {
    let log = engine.tree(TreeName::DeliveryLog);
    let indexed = rows_into(log, engine.tree(TreeName::DeliveryIds), |value| {
        // A record that does not decode is kept, unread, as pruning would.
        let Ok((id, org, delivery)) = decode_head::<(LogId, OrgId, DeliveryId)>(value) else {
            tracing::warn!(
                "a delivery-log record does not decode; it gets no entry by delivery id"
            );
            return Ok(None);
        };
        Ok(Some((
            keys::delivery_id_entry(org, delivery, id).to_vec(),
            Vec::new(),
        )))
    })?;
    engine.db.flush().map_err(StoreError::engine)?;
    if indexed > 0 {
        tracing::info!(
            records = indexed,
            "storage layout 4: delivery-log records are now found by delivery id"
        );
    }
    Ok(())
}

/// Writes the row `row` makes of each value of `from` (if any) into
/// `into`, 10,000 at a time (a migration); returns how many it wrote.
fn rows_into(
    from: &::sled::Tree,
    into: &::sled::Tree,
    row: impl Fn(&[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>, StoreError>,
) -> Result<usize, StoreError> {
    let mut batch = ::sled::Batch::default();
    let mut written = 0usize;
    for value in from.iter().values() {
        let Some((key, value)) = row(&value.map_err(StoreError::engine)?)? else {
            continue;
        };
        batch.insert(key, value);
        written += 1;
        if written % 10_000 == 0 {
            into.apply_batch(std::mem::take(&mut batch))
                .map_err(StoreError::engine)?;
        }
    }
    into.apply_batch(batch).map_err(StoreError::engine)?;
    Ok(written)
}

/// Removes the layout-1 outbox once its jobs are in the new one.
fn drop_old_outbox(engine: &Engine) -> Result<(), StoreError> {
    let exists = engine
        .db
        .tree_names()
        .iter()
        .any(|name| name.as_ref() == keys::OUTBOX_V1.as_bytes());
    if exists {
        engine
            .db
            .drop_tree(keys::OUTBOX_V1)
            .map_err(StoreError::engine)?;
    }
    Ok(())
}

/// Stores every webhook secret sealed with `key` (or in clear) with the
/// same key it was opened with: at start, to seal an installation that was
/// in clear; refuses when a secret does not open.
fn seal_stored_secrets(engine: &Engine, key: Option<&SealingKey>) -> Result<usize, StoreError> {
    reseal(engine, key, key, None).map(|rekeyed| rekeyed.changed)
}

/// Stores every webhook secret sealed with `to` (or in clear), opening it
/// with `from` (or reading it in clear) first; leaves a row already so as it
/// is. A secret that does not open is replaced by `replace_unreadable`, or
/// refuses the whole change. All rows change in one batch, or none.
fn reseal(
    engine: &Engine,
    from: Option<&SealingKey>,
    to: Option<&SealingKey>,
    replace_unreadable: Option<fn() -> Secret>,
) -> Result<Rekeyed, StoreError> {
    let webhooks = engine.tree(TreeName::Webhooks);
    let mut batch = ::sled::Batch::default();
    let mut rekeyed = Rekeyed::default();
    for entry in webhooks.iter() {
        let (row, bytes) = entry.map_err(StoreError::engine)?;
        let stored: WebhookEndpoint = decode(&bytes)?;
        if let Some(endpoint) = rekeyed.reseal(stored, from, to, replace_unreadable)? {
            batch.insert(row, codec::encode(&endpoint)?);
        }
    }
    if rekeyed.changed > 0 {
        webhooks.apply_batch(batch).map_err(StoreError::engine)?;
        engine.db.flush().map_err(StoreError::engine)?;
    }
    Ok(rekeyed)
}

/// Creates `dir` (and parents) readable by the owner only.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::commands::roles::system_roles;
    use crate::domain::org_state::Edit;
    use crate::domain::organization::{Organization, Plan};
    use crate::domain::role::Role;
    use crate::domain::user::User;
    use crate::time::Timestamp;

    /// A new temporary directory for a store.
    fn temp_dir() -> tempfile::TempDir {
        let Some(dir) = tempfile::tempdir().ok() else {
            panic!("no temp dir");
        };
        dir
    }

    /// Opens `dir`, waiting out a moment in which a database dropped just
    /// before still holds its lock (sled's flusher thread lets go of it
    /// asynchronously).
    pub(super) fn open(dir: &Path) -> SledStore {
        let mut tries = 0;
        loop {
            match SledStore::open(dir, Tuning::default(), None) {
                Ok(store) => return store,
                Err(err) if tries >= 50 => panic!("storage did not open: {err}"),
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }

    /// A JSON answer of `status` with `body`, as the middleware keeps one.
    fn json_answer(status: u16, body: &[u8]) -> crate::domain::idempotency::StoredAnswer {
        crate::domain::idempotency::StoredAnswer {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_vec(),
        }
    }

    /// When a claim made at `now` lapses (a minute on), and when its answer
    /// expires (an hour on).
    fn claim_and_expiry(now: Timestamp) -> (Timestamp, Timestamp) {
        (
            Timestamp(now.millis() + 60_000),
            Timestamp(now.millis() + 3_600_000),
        )
    }

    fn new_org(storage: &SledStore) -> (Organization, Role, Role) {
        let now = Timestamp::now();
        let org = Organization {
            id: OrgId::generate(),
            name: "A".into(),
            plan: Plan::Free,
            created_at: now,
            updated_at: now,
        };
        let (owner, member) = system_roles(org.id, now);
        let writes = [
            Write::Edit(Edit::PutRole(owner.clone())),
            Write::Edit(Edit::PutRole(member.clone())),
            Write::Edit(Edit::PutOrg(org.clone())),
        ];
        assert!(storage.append(&writes).is_ok());
        (org, owner, member)
    }

    /// An answer stored before a restart is replayed after it, found in
    /// its batch, which the opening read noted; a key never seen is then
    /// not looked up at all. Answers of earlier versions, on their own by
    /// their second of expiry or under their scope alone (also one the
    /// table had no room for), are found there, the latter until it expires.
    #[tokio::test]
    async fn a_stored_answer_is_replayed_after_a_restart_and_a_new_key_is_not_looked_up() {
        use crate::domain::idempotency::{Begin, KeyRecord};
        use answered::Lookups;
        let dir = temp_dir();
        let now = Timestamp::now();
        let (until, expires) = claim_and_expiry(now);
        let (scope, fingerprint) = ([7; 32], [8; 32]);
        let answer = json_answer(201, b"{}");
        let storage = open(dir.path());
        let begun = storage.idempotency_begin(scope, fingerprint, until, expires, now);
        assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        let answered = storage.idempotency_answer(scope, fingerprint, answer.clone(), expires);
        assert!(answered.await.is_ok());
        let count = |storage: &SledStore, tree| storage.read(|engine| Ok(engine.tree(tree).len()));
        assert_eq!(count(&storage, TreeName::AnswerBatches).ok(), Some(1));
        let placed = storage.answered.lookups(&scope, now).expiring;
        assert!(placed.is_some_and(|place| place.batch != answered::ALONE));
        // Earlier versions' answers: on its own by its second of expiry,
        // and under its scope alone.
        let (by_second, by_scope) = ([3; 32], [5; 32]);
        let old_answer = KeyRecord::answered([4; 32], answer.clone(), expires);
        let written = storage.read(|engine| {
            let bytes = codec::encode(&old_answer)?;
            let key = keys::answer(answered::second(expires), &by_second);
            let trees = [
                (TreeName::AnswersByExpiry, key.to_vec()),
                (TreeName::Idempotency, by_scope.to_vec()),
            ];
            for (tree, key) in trees {
                engine
                    .tree(tree)
                    .insert(key, bytes.clone())
                    .map_err(StoreError::engine)?;
            }
            Ok(())
        });
        assert!(written.is_ok());
        assert!(storage.close().is_ok());

        let storage = open(dir.path());
        assert_eq!(
            storage.answered.lookups(&scope, now),
            Lookups {
                expiring: placed,
                by_scope: true
            },
            "noted by the opening read, and an answer by scope is live"
        );
        assert_eq!(
            storage.answered.lookups(&by_second, now).expiring,
            Some(answered::Place {
                second: answered::second(expires),
                batch: answered::ALONE
            }),
        );
        let begun = storage.idempotency_begin(scope, fingerprint, until, expires, now);
        assert!(
            matches!(&begun, Ok(Begin::Replay(a)) if *a == answer),
            "{begun:?}"
        );
        let begun = storage.idempotency_begin(by_second, [4; 32], until, expires, now);
        assert!(
            matches!(&begun, Ok(Begin::Replay(a)) if *a == answer),
            "the earlier version's answer by its second: {begun:?}"
        );
        let begun = storage.idempotency_begin(scope, [9; 32], until, expires, now);
        assert!(matches!(begun, Ok(Begin::Reused)), "{begun:?}");
        let begun = storage.idempotency_begin(by_scope, [4; 32], until, expires, now);
        assert!(
            matches!(&begun, Ok(Begin::Replay(a)) if *a == answer),
            "the earlier version's answer by scope: {begun:?}"
        );
        let after = Timestamp(expires.millis() + 1);
        assert_eq!(
            storage.answered.lookups(&by_scope, after),
            Lookups::default(),
            "past the last answer by scope, nothing is looked up"
        );
        let new = [6; 32];
        assert_eq!(
            storage.answered.lookups(&new, after),
            Lookups::default(),
            "never seen: not looked up"
        );
        let begun = storage.idempotency_begin(new, fingerprint, until, expires, now);
        assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        assert_eq!(
            storage.answered.lookups(&new, now).expiring,
            Some(answered::Place {
                second: answered::second(expires),
                batch: answered::ALONE
            }),
            "noted when claimed"
        );
        let begun = storage.idempotency_begin(new, fingerprint, until, expires, now);
        assert!(matches!(begun, Ok(Begin::Running { .. })), "{begun:?}");
        // Past their time, all are purged, each from its own tree: the
        // batch and its index entry, and the earlier versions' two.
        let purged = storage.idempotency_purge(Timestamp(expires.millis() + 1000), 10);
        assert_eq!(purged.ok(), Some(4));
        assert!(storage.close().is_ok());
    }

    /// Answers committed with their changes by concurrent requests share
    /// their group commit's batch: each is replayed from it, before and
    /// after a restart (the opening read notes each scope's batch), a later
    /// batch gets a higher number, and the batch goes once past its second.
    #[tokio::test]
    async fn answers_committed_together_are_one_batch_replayed_before_and_after_a_restart() {
        use crate::domain::idempotency::{Begin, KeyAnswer};
        let dir = temp_dir();
        let storage = open(dir.path());
        let now = Timestamp::now();
        let (until, expires) = claim_and_expiry(now);
        let answer = |n: u8| json_answer(201, format!("{{\"n\":{n}}}").as_bytes());
        let scope = |n: u8| [n; 32];
        let write = |n: u8| {
            Write::KeyAnswer(Box::new(KeyAnswer {
                scope: scope(n),
                fingerprint: [n; 32],
                answer: answer(n),
                expires,
            }))
        };
        for n in 1..=8 {
            let begun = storage.idempotency_begin(scope(n), [n; 32], until, expires, now);
            assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        }
        let commits = (1..=6).map(|n| storage.commit(vec![write(n)]));
        let committed = futures_util::future::join_all(commits).await;
        assert!(committed.iter().all(Result::is_ok), "{committed:?}");
        let count = |storage: &SledStore, tree| storage.read(|engine| Ok(engine.tree(tree).len()));
        assert_eq!(count(&storage, TreeName::AnswersByExpiry).ok(), Some(0));
        let batches = count(&storage, TreeName::AnswerBatches).ok().unwrap_or(0);
        assert!((1..6).contains(&batches), "{batches} batches of 6 answers");
        let replayed = |storage: &SledStore, n: u8| {
            let begun = storage.idempotency_begin(scope(n), [n; 32], until, expires, now);
            matches!(&begun, Ok(Begin::Replay(a)) if *a == answer(n))
        };
        assert!((1..=6).all(|n| replayed(&storage, n)));
        let place = |storage: &SledStore, n: u8| storage.answered.lookups(&scope(n), now).expiring;
        let before = place(&storage, 6).map(|place| place.batch);
        assert!(before.is_some_and(|batch| batch != answered::ALONE));
        assert!(storage.close().is_ok());

        let storage = open(dir.path());
        assert!((1..=6).all(|n| replayed(&storage, n)), "after a restart");
        assert_eq!(place(&storage, 6).map(|place| place.batch), before);
        for n in 7..=8 {
            let begun = storage.idempotency_begin(scope(n), [n; 32], until, expires, now);
            assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        }
        assert!(storage.commit(vec![write(7), write(8)]).await.is_ok());
        assert!(replayed(&storage, 7) && replayed(&storage, 8));
        let after = place(&storage, 7).map(|place| place.batch);
        assert!(after > before, "{after:?} after {before:?}");
        let past = Timestamp(expires.millis() + 1000);
        let purged = storage.idempotency_purge(past, 100).ok();
        assert_eq!(
            purged,
            Some(2 * (batches + 1)),
            "each batch and its index entry"
        );
        assert_eq!(count(&storage, TreeName::AnswerBatches).ok(), Some(0));
        assert!(storage.close().is_ok());
    }

    /// When one writer of a group commit's round breaks a rule, each is
    /// committed on its own: a keyed answer of the same round is then
    /// written in a batch of its own, and found there.
    #[tokio::test]
    async fn an_answer_whose_round_failed_together_is_batched_on_its_own_and_found() {
        use crate::domain::idempotency::{Begin, KeyAnswer};
        let dir = temp_dir();
        let tuning = Tuning {
            commit_window: std::time::Duration::from_millis(200),
            ..Tuning::default()
        };
        let Ok(storage) = SledStore::open(dir.path(), tuning, None) else {
            panic!("storage did not open");
        };
        let (_, owner, _) = new_org(&storage);
        let now = Timestamp::now();
        let (until, expires) = claim_and_expiry(now);
        let (scope, fingerprint) = ([21; 32], [22; 32]);
        let answer = json_answer(201, b"{}");
        let begun = storage.idempotency_begin(scope, fingerprint, until, expires, now);
        assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        let mut renamed = owner.clone();
        renamed.name = "Boss".into();
        let keyed = Write::KeyAnswer(Box::new(KeyAnswer {
            scope,
            fingerprint,
            answer: answer.clone(),
            expires,
        }));
        let (refused, answered) = tokio::join!(
            storage.commit(vec![Write::Edit(Edit::PutRole(renamed))]),
            storage.commit(vec![keyed]),
        );
        assert!(
            matches!(refused, Err(StoreError::RoleImmutable)),
            "{refused:?}"
        );
        assert!(answered.is_ok(), "{answered:?}");
        let batches = storage.read(|engine| Ok(engine.tree(TreeName::AnswerBatches).len()));
        assert_eq!(batches.ok(), Some(1));
        let begun = storage.idempotency_begin(scope, fingerprint, until, expires, now);
        assert!(
            matches!(&begun, Ok(Begin::Replay(a)) if *a == answer),
            "{begun:?}"
        );
        assert!(storage.close().is_ok());
    }

    /// A request that outlived its claim, taken over meanwhile by a retry
    /// of the same request, drops only its own claim when it fails: the
    /// retry's holds until the retry drops it.
    #[test]
    fn a_failed_request_drops_its_own_claim_not_a_retrys() {
        use crate::domain::idempotency::{Begin, KeyClaim};
        let dir = temp_dir();
        let storage = open(dir.path());
        let now = Timestamp::now();
        let expires = Timestamp(now.millis() + 3_600_000);
        let (scope, fingerprint) = ([11; 32], [12; 32]);
        let first = KeyClaim {
            scope,
            fingerprint,
            until: Timestamp(now.millis() - 1),
        };
        let retry = KeyClaim {
            until: Timestamp(now.millis() + 60_000),
            ..first
        };
        for claim in [first, retry] {
            let begun = storage.idempotency_begin(scope, fingerprint, claim.until, expires, now);
            assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        }
        storage.idempotency_forget(first);
        let begun = storage.idempotency_begin(scope, fingerprint, retry.until, expires, now);
        assert!(
            matches!(begun, Ok(Begin::Running { .. })),
            "the retry's claim holds: {begun:?}"
        );
        storage.idempotency_forget(retry);
        let begun = storage.idempotency_begin(scope, fingerprint, retry.until, expires, now);
        assert!(matches!(begun, Ok(Begin::Run)), "dropped: {begun:?}");
        assert!(storage.close().is_ok());
    }

    /// A request whose claim lapsed and was taken over by a retry (with a
    /// later expiry) may still record its answer: it is stored under its
    /// scope alone, since the table now names the retry's second, and is
    /// found there; the retry's own answer is then found by its second.
    #[tokio::test]
    async fn a_late_answer_of_a_lapsed_claim_is_stored_by_scope_and_found() {
        use crate::domain::idempotency::Begin;
        let dir = temp_dir();
        let storage = open(dir.path());
        let now = Timestamp::now();
        let lapsed = Timestamp(now.millis() - 1);
        let (first, retry) = (
            Timestamp(now.millis() + 3_600_000),
            Timestamp(now.millis() + 3_700_000),
        );
        let until = Timestamp(now.millis() + 60_000);
        let scope = [3; 32];
        let answer = |status| json_answer(status, b"{}");
        let begun = storage.idempotency_begin(scope, [1; 32], lapsed, first, now);
        assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        let begun = storage.idempotency_begin(scope, [2; 32], until, retry, now);
        assert!(
            matches!(begun, Ok(Begin::Run)),
            "the lapsed claim taken over: {begun:?}"
        );
        let late = storage.idempotency_answer(scope, [1; 32], answer(201), first);
        assert!(late.await.is_ok());
        let in_tree = |tree, key: Vec<u8>| {
            storage.read(|engine| engine.tree(tree).get(key).map_err(StoreError::engine))
        };
        assert!(matches!(
            in_tree(TreeName::Idempotency, scope.to_vec()),
            Ok(Some(_))
        ));
        let by_second = storage.read(|engine| {
            let trees = [TreeName::AnswersByExpiry, TreeName::AnswerBatches];
            Ok(trees.map(|tree| engine.tree(tree).len()))
        });
        assert_eq!(by_second.ok(), Some([0, 0]), "not stored by its second");
        let begun = storage.idempotency_begin(scope, [1; 32], until, retry, now);
        assert!(
            matches!(&begun, Ok(Begin::Replay(a)) if a.status == 201),
            "the late answer, found by scope: {begun:?}"
        );
        let answered = storage.idempotency_answer(scope, [2; 32], answer(202), retry);
        assert!(answered.await.is_ok());
        let Some(place) = storage.answered.lookups(&scope, now).expiring else {
            panic!("the retry's answer is noted");
        };
        assert_eq!(place.second, answered::second(retry));
        assert_ne!(place.batch, answered::ALONE);
        let batch = answer_batches::key(place).to_vec();
        assert!(matches!(
            in_tree(TreeName::AnswerBatches, batch),
            Ok(Some(_))
        ));
        let begun = storage.idempotency_begin(scope, [2; 32], until, retry, now);
        assert!(
            matches!(&begun, Ok(Begin::Replay(a)) if a.status == 202),
            "the retry's answer, found by its second: {begun:?}"
        );
        assert!(storage.close().is_ok());
    }

    /// Lapsed claims (requests whose client went away) are swept once
    /// more than `SWEEP_PAST` are held, and many claims running at once
    /// are not swept on every new one: the next sweep waits for twice
    /// what the last one left.
    #[test]
    fn lapsed_claims_are_swept_and_running_ones_kept() {
        use crate::domain::idempotency::Begin;
        let dir = temp_dir();
        let storage = open(dir.path());
        let now = Timestamp::now();
        let (lapsed, running) = (
            Timestamp(now.millis() - 1),
            Timestamp(now.millis() + 60_000),
        );
        let expires = Timestamp(now.millis() + 3_600_000);
        let scope = |n: u32| {
            let mut scope = [0; 32];
            scope[..4].copy_from_slice(&n.to_le_bytes());
            scope
        };
        for n in 0..1500 {
            let until = if n < 1000 { lapsed } else { running };
            let begun = storage.idempotency_begin(scope(n), [1; 32], until, expires, now);
            assert!(matches!(begun, Ok(Begin::Run)), "{begun:?}");
        }
        // Swept at the 1,024th: 1,000 lapsed went, 500 running stayed.
        assert_eq!(storage.claims.lock().len(), 500);
        let begun = storage.idempotency_begin(scope(1200), [1; 32], running, expires, now);
        assert!(matches!(begun, Ok(Begin::Running { .. })), "{begun:?}");
        let begun = storage.idempotency_begin(scope(5), [1; 32], running, expires, now);
        assert!(
            matches!(begun, Ok(Begin::Run)),
            "a lapsed claim is taken over: {begun:?}"
        );
        assert!(storage.close().is_ok());
    }

    #[test]
    fn a_data_directory_of_another_layout_is_refused() {
        let dir = temp_dir();
        let storage = open(dir.path());
        let Ok(engine) = storage.slot.current() else {
            panic!("no database in service")
        };
        let meta = engine.tree(TreeName::Meta);
        assert!(meta.insert(keys::LAYOUT_VERSION, &[LAYOUT + 1]).is_ok());
        drop(engine);
        assert!(storage.close().is_ok());
        let err = SledStore::open(dir.path(), Tuning::default(), None).err();
        assert!(
            matches!(err, Some(StoreError::Layout { found, expected }) if found == LAYOUT + 1 && expected == LAYOUT),
            "{err:?}"
        );
    }

    /// A data directory of layout 1 (the outbox keyed by delivery id) opens
    /// as layout 2: its jobs are kept, now by organization, the old tree is
    /// gone, and the layout is stamped.
    #[tokio::test]
    async fn a_layout_1_outbox_is_moved_to_layout_2() {
        use crate::domain::event::EventKind;
        let dir = temp_dir();
        let (org, other) = (OrgId::generate(), OrgId::generate());
        let jobs: Vec<Job> = [org, other, org]
            .iter()
            .map(|o| Job::new(*o, EventKind::TaskCreated, b"{}".to_vec()))
            .collect();
        {
            let Ok(db) = ::sled::open(dir.path().join("db")) else {
                panic!("sled did not open")
            };
            let (Ok(old), Ok(meta)) = (
                db.open_tree(keys::OUTBOX_V1),
                db.open_tree(TreeName::Meta.name()),
            ) else {
                panic!("trees did not open")
            };
            for job in &jobs {
                let value = codec::encode(job).unwrap_or_default();
                assert!(old.insert(job.delivery_id.as_bytes(), value).is_ok());
            }
            assert!(meta.insert(keys::LAYOUT_VERSION, &[1u8]).is_ok());
            assert!(db.flush().is_ok());
        }
        let storage = open(dir.path());
        let mine = storage
            .outbox_after(org, None, 10)
            .await
            .unwrap_or_default();
        assert_eq!(mine, vec![jobs[0].clone(), jobs[2].clone()]);
        let windows = storage.outbox_windows(1).await.unwrap_or_default();
        let summary: Vec<(OrgId, usize, bool)> = windows
            .iter()
            .map(|w| (w.org, w.jobs.len(), w.more))
            .collect();
        let mut expected = vec![(org, 1, true), (other, 1, false)];
        expected.sort_by_key(|(o, ..)| *o.as_bytes());
        assert_eq!(summary, expected);
        let Ok(engine) = storage.slot.current() else {
            panic!("no database in service")
        };
        let names = engine.db.tree_names();
        assert!(!names
            .iter()
            .any(|n| n.as_ref() == keys::OUTBOX_V1.as_bytes()));
        let layout = engine
            .tree(TreeName::Meta)
            .get(keys::LAYOUT_VERSION)
            .ok()
            .flatten();
        assert_eq!(layout.as_deref(), Some(&[LAYOUT][..]));
    }

    /// A data directory of layout 4 (endpoints without a status) opens as
    /// layout 5: every endpoint is enabled, with no failing run, and keeps
    /// its other fields; one already rewritten (a crash mid-way) is kept.
    #[test]
    fn a_layout_4_endpoint_opens_enabled() {
        #[derive(serde::Serialize)]
        struct Before<'a> {
            organization_id: OrgId,
            url: &'a str,
            events: crate::domain::webhook::EventSet,
            secret: &'a str,
            created_at: Timestamp,
            updated_at: Timestamp,
        }
        let dir = temp_dir();
        let (old, done) = (OrgId::generate(), OrgId::generate());
        let events = crate::domain::webhook::EventSet::parse(&["task.created".to_owned()])
            .unwrap_or_default();
        let rewritten = WebhookEndpoint {
            organization_id: done,
            url: "https://b.example/hook".into(),
            events,
            secret: Secret::new("whsec_b".into()),
            created_at: Timestamp(3),
            updated_at: Timestamp(4),
            disabled: Some(crate::domain::webhook::Disabled {
                at: Timestamp(5),
                reason: crate::domain::webhook::DisabledReason::Gone,
            }),
            failing_since: None,
        };
        {
            let Ok(db) = ::sled::open(dir.path().join("db")) else {
                panic!("sled did not open")
            };
            let (Ok(hooks), Ok(meta)) = (
                db.open_tree(TreeName::Webhooks.name()),
                db.open_tree(TreeName::Meta.name()),
            ) else {
                panic!("trees did not open")
            };
            let before = Before {
                organization_id: old,
                url: "https://a.example/hook",
                events,
                secret: "whsec_a",
                created_at: Timestamp(1),
                updated_at: Timestamp(2),
            };
            let value = codec::encode(&before).unwrap_or_default();
            assert!(hooks.insert(old.as_bytes(), value).is_ok());
            let value = codec::encode(&rewritten).unwrap_or_default();
            assert!(hooks.insert(done.as_bytes(), value).is_ok());
            assert!(meta.insert(keys::LAYOUT_VERSION, &[4u8]).is_ok());
            assert!(db.flush().is_ok());
        }
        let storage = open(dir.path());
        let Ok(engine) = storage.slot.current() else {
            panic!("no database in service")
        };
        let read = |org: OrgId| -> Option<WebhookEndpoint> {
            let bytes = engine.tree(TreeName::Webhooks).get(org.as_bytes()).ok()??;
            decode(&bytes).ok()
        };
        let migrated = read(old);
        assert_eq!(
            migrated,
            Some(WebhookEndpoint {
                organization_id: old,
                url: "https://a.example/hook".into(),
                events,
                secret: Secret::new("whsec_a".into()),
                created_at: Timestamp(1),
                updated_at: Timestamp(2),
                disabled: None,
                failing_since: None,
            })
        );
        assert_eq!(read(done), Some(rewritten));
        let layout = engine
            .tree(TreeName::Meta)
            .get(keys::LAYOUT_VERSION)
            .ok()
            .flatten();
        assert_eq!(layout.as_deref(), Some(&[LAYOUT][..]));
    }

    /// A data directory of layout 3 (delivery-log records without entries
    /// by delivery id) opens as layout 4: every record is found by its
    /// delivery, the newest of several; pruning removes the entries with
    /// their records.
    #[tokio::test]
    async fn a_layout_3_log_gets_its_entries_by_delivery() {
        use crate::domain::event::EventKind;
        let dir = temp_dir();
        let org = OrgId::generate();
        let records: Vec<LogRecord> = (0..5)
            .map(|n| LogRecord::skipped(org, EventKind::TaskCreated, vec![n], None))
            .collect();
        let mut again = LogRecord::skipped(org, EventKind::TaskCreated, vec![9], None);
        again.delivery_id = records[1].delivery_id;
        {
            let Ok(db) = ::sled::open(dir.path().join("db")) else {
                panic!("sled did not open")
            };
            let (Ok(log), Ok(meta)) = (
                db.open_tree(TreeName::DeliveryLog.name()),
                db.open_tree(TreeName::Meta.name()),
            ) else {
                panic!("trees did not open")
            };
            for record in records.iter().chain([&again]) {
                let value = codec::encode(record).unwrap_or_default();
                let key = keys::delivery_log(org, record.id);
                assert!(log.insert(key, value).is_ok());
            }
            assert!(meta.insert(keys::LAYOUT_VERSION, &[3u8]).is_ok());
            assert!(db.flush().is_ok());
        }
        let storage = open(dir.path());
        let found = |delivery| {
            let storage = storage.clone();
            async move {
                storage
                    .find_delivery(org, delivery)
                    .await
                    .ok()
                    .flatten()
                    .map(|r| r.envelope)
            }
        };
        assert_eq!(found(records[0].delivery_id).await, Some(vec![0]));
        assert_eq!(
            found(records[1].delivery_id).await,
            Some(vec![9]),
            "the newest"
        );
        assert_eq!(found(DeliveryId::generate()).await, None);
        // Pruning to the newest two drops the others' entries with them.
        assert_eq!(storage.prune_delivery_log(org, 2).await.ok(), Some(2));
        assert_eq!(found(records[0].delivery_id).await, None);
        assert_eq!(found(records[4].delivery_id).await, Some(vec![4]));
        assert_eq!(found(records[1].delivery_id).await, Some(vec![9]));
        let Ok(engine) = storage.slot.current() else {
            panic!("no database in service")
        };
        assert_eq!(engine.tree(TreeName::DeliveryIds).len(), 2);
    }

    /// A delivery whose record is made soon after it is queued is found by
    /// reading forward from that instant, without an entry; one whose
    /// record comes after many others gets an entry and is found by it.
    #[tokio::test]
    async fn deliveries_are_found_whether_their_records_came_soon_or_late() {
        use crate::domain::event::EventKind;
        use crate::storage::SCAN_LIMIT;
        let dir = temp_dir();
        let storage = open(dir.path());
        let org = OrgId::generate();
        let record = |n: u8| LogRecord::skipped(org, EventKind::TaskCreated, vec![n], None);
        // The organization's first record starts its count.
        assert!(storage.append(&[Write::Log(record(0))]).is_ok());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let early = DeliveryId::generate();
        let soon = record(1);
        assert!(storage.append(&[Write::Log(soon.clone())]).is_ok());
        let others: Vec<Write> = (0..SCAN_LIMIT + 10)
            .map(|_| Write::Log(record(2)))
            .collect();
        assert!(storage.append(&others).is_ok());
        let mut late = record(3);
        late.delivery_id = early;
        assert!(storage.append(&[Write::Log(late)]).is_ok());

        let found = |delivery| {
            let storage = storage.clone();
            async move {
                let found = storage.find_delivery(org, delivery).await.ok().flatten();
                found.map(|r| r.envelope)
            }
        };
        assert_eq!(found(soon.delivery_id).await, Some(vec![1]));
        assert_eq!(found(early).await, Some(vec![3]));
        assert_eq!(found(DeliveryId::generate()).await, None);
        // An id from long ago: at most SCAN_LIMIT records are read, none is it.
        let ancient = DeliveryId::first_at(1);
        assert_eq!(found(ancient).await, None);
        let Ok(engine) = storage.slot.current() else {
            panic!("no database in service")
        };
        let entries = engine.tree(TreeName::DeliveryIds);
        let of = |delivery| {
            entries
                .scan_prefix(keys::delivery_ids(org, delivery))
                .count()
        };
        assert_eq!(of(early), 1, "the late record has an entry");
        assert_eq!(of(soon.delivery_id), 0, "the soon one needs none");
    }

    #[test]
    fn storage_refuses_to_alter_owner_or_delete_member() {
        let dir = temp_dir();
        let storage = open(dir.path());
        let (org, owner, member) = new_org(&storage);

        let mut renamed = owner.clone();
        renamed.name = "Boss".into();
        let err = storage.append(&[Write::Edit(Edit::PutRole(renamed))]).err();
        assert!(matches!(err, Some(StoreError::RoleImmutable)));
        let err = storage
            .append(&[Write::Edit(Edit::DeleteRole(org.id, owner.id))])
            .err();
        assert!(matches!(err, Some(StoreError::RoleImmutable)));
        let err = storage
            .append(&[Write::Edit(Edit::DeleteRole(org.id, member.id))])
            .err();
        assert!(matches!(err, Some(StoreError::SystemRole)));

        let (second_owner, _) = system_roles(org.id, Timestamp::now());
        let err = storage
            .append(&[Write::Edit(Edit::PutRole(second_owner))])
            .err();
        assert!(matches!(err, Some(StoreError::SystemRoleCount)));

        let mut demoted = member.clone();
        demoted.is_system = false;
        let err = storage.append(&[Write::Edit(Edit::PutRole(demoted))]).err();
        assert!(matches!(err, Some(StoreError::SystemRoleCount)));

        // A refused write leaves the transaction's other writes unapplied too.
        let mut edited_member = member.clone();
        edited_member.name = "Staff".into();
        let writes = [
            Write::Edit(Edit::PutRole(edited_member)),
            Write::Edit(Edit::DeleteRole(org.id, owner.id)),
        ];
        assert!(storage.append(&writes).is_err());
        let loaded = storage.load().ok().map(|l| l.orgs);
        let names: Vec<String> = loaded
            .iter()
            .flatten()
            .flat_map(|o| o.roles.values().map(|r| r.name.clone()))
            .collect();
        assert!(names.contains(&"Member".to_string()) && names.contains(&"Owner".to_string()));
    }

    fn user_write(email: &str) -> Write {
        let user = User {
            id: crate::ids::UserId::generate(),
            email: email.into(),
            name: None,
            created_at: Timestamp::now(),
        };
        Write::PutUser(user)
    }

    #[test]
    fn a_refused_request_fails_alone_in_a_shared_commit() {
        let dir = tempfile::tempdir().ok();
        // A long window puts the three requests below in one round.
        let tuning = Tuning {
            commit_window: std::time::Duration::from_millis(200),
            ..Tuning::default()
        };
        let Some(storage) = dir
            .as_ref()
            .and_then(|d| SledStore::open(d.path(), tuning, None).ok())
        else {
            panic!("storage did not open");
        };
        let (org, _, member) = new_org(&storage);
        let mut renamed_member = member.clone();
        renamed_member.name = "Staff".into();
        let refused = vec![
            Write::Edit(Edit::PutRole(renamed_member)),
            Write::Edit(Edit::DeleteRole(org.id, member.id)),
        ];
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            panic!("no runtime");
        };
        let (first, second, third) = runtime.block_on(futures_util::future::join3(
            storage.commit(vec![user_write("a@example.test")]),
            storage.commit(refused),
            storage.commit(vec![user_write("b@example.test")]),
        ));
        assert!(
            matches!(&first, Ok(writes) if writes.len() == 1),
            "{first:?}"
        );
        assert!(matches!(second, Err(StoreError::SystemRole)), "{second:?}");
        assert!(
            matches!(&third, Ok(writes) if writes.len() == 1),
            "{third:?}"
        );
        let Ok(loaded) = storage.load() else {
            panic!("load failed");
        };
        let mut emails: Vec<String> = loaded.users.iter().map(|u| u.email.clone()).collect();
        emails.sort();
        assert_eq!(emails, ["a@example.test", "b@example.test"]);
        let names: Vec<String> = loaded
            .orgs
            .iter()
            .flat_map(|o| o.roles.values().map(|r| r.name.clone()))
            .collect();
        assert!(names.contains(&"Member".to_string()), "{names:?}");
    }
}
