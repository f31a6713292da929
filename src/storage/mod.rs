//! Storage: the only module that knows sled and bincode.
//!
//! Every mutation is a list of [`Write`]s applied atomically: either by
//! [`Storage::commit`] (one sled transaction across the trees it touches;
//! durability asked for separately with [`Storage::durable`]) or by
//! [`Storage::commit_durably`], which shares one transaction and one flush
//! with the writers committing at the same time. The Owner/Member rules of
//! seed 2.4 are enforced here, inside the transaction, so no code path can
//! alter Owner or delete Member.

pub mod codec;
mod group_commit;
pub mod keys;

use std::path::Path;

use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use sled::Transactional;

use crate::domain::audit::AuditRecord;
use crate::domain::delivery::{Job, LogRecord};
use crate::domain::member::Membership;
use crate::domain::org_state::{Edit, OrgState};
use crate::domain::organization::Organization;
use crate::domain::role::Role;
use crate::domain::user::{TokenRecord, User};
use crate::domain::webhook::WebhookEndpoint;
use crate::ids::{AuditId, DeliveryId, LogId, OrgId, ResourceId, RoleId};
use codec::{decode, encode};
use group_commit::GroupCommit;
use keys::TreeName;

/// What can go wrong below the domain.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// sled failed.
    #[error("storage engine: {0}")]
    Engine(#[from] sled::Error),
    /// A value could not be encoded or decoded.
    #[error("codec: {0}")]
    Codec(String),
    /// A write would change or delete the Owner role.
    #[error("the Owner role is immutable")]
    RoleImmutable,
    /// A write would delete the Member role.
    #[error("the Member role cannot be deleted")]
    SystemRole,
    /// A write would add a second Owner or Member row, or change a role's kind.
    #[error("an organization has exactly one Owner and one Member role")]
    SystemRoleCount,
    /// Flushing to disk failed.
    #[error("flush: {0}")]
    Flush(String),
    /// The data was written by a build with another storage layout.
    #[error(
        "the data directory has storage layout {found}, this build reads layout {LAYOUT}: \
         run the rolecall that wrote it, or restore a backup made for this version"
    )]
    Layout {
        /// The stored layout version.
        found: u8,
    },
    /// The data directory could not be prepared.
    #[error("data directory: {0}")]
    Io(#[from] std::io::Error),
}

/// One write of a transaction.
#[derive(Clone, Debug)]
pub enum Write {
    /// An organization-state edit.
    Edit(Edit),
    /// Insert a user and its email index entry.
    PutUser(User, String),
    /// Insert a token and its id index entry.
    PutToken(TokenRecord),
    /// Remove a token and its id index entry.
    DeleteToken(TokenRecord),
    /// Append an audit record.
    Audit(AuditRecord),
    /// Insert or replace an outbox job.
    PutJob(Job),
    /// Remove a finished outbox job.
    DeleteJob(DeliveryId),
    /// Append a delivery-log record.
    Log(LogRecord),
    /// Insert or replace a workspace resource (value already encoded).
    PutResource {
        /// Owner.
        org: OrgId,
        /// Resource kind tag.
        kind: u8,
        /// Resource id.
        id: ResourceId,
        /// Encoded value ([`codec::encode`]).
        value: Vec<u8>,
    },
    /// Remove a workspace resource.
    DeleteResource {
        /// Owner.
        org: OrgId,
        /// Resource kind tag.
        kind: u8,
        /// Resource id.
        id: ResourceId,
    },
}

/// Everything loaded at start.
pub struct Loaded {
    /// Every organization's state.
    pub orgs: Vec<OrgState>,
    /// Every user.
    pub users: Vec<User>,
    /// Every live token.
    pub tokens: Vec<TokenRecord>,
    /// Every unfinished delivery, oldest first.
    pub jobs: Vec<Job>,
}

/// Performance settings of the database.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Page-cache size in MiB.
    pub cache_mb: u64,
    /// How long a flush waits to gather concurrent writers (see `group_commit`).
    pub commit_window: std::time::Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            cache_mb: 64,
            commit_window: std::time::Duration::from_millis(1),
        }
    }
}

/// The sled database and its trees.
#[derive(Clone)]
pub struct Storage {
    db: sled::Db,
    trees: Vec<sled::Tree>,
    committer: GroupCommit,
}

/// The storage layout this build reads and writes: tree names and value
/// encodings. A change gets a new number and a migration on open.
const LAYOUT: u8 = 1;

type TxResult<T> = Result<T, ConflictableTransactionError<StorageError>>;

fn abort<T>(err: StorageError) -> TxResult<T> {
    Err(ConflictableTransactionError::Abort(err))
}

fn enc<T: serde::Serialize>(value: &T) -> TxResult<Vec<u8>> {
    encode(value).map_err(ConflictableTransactionError::Abort)
}

impl Storage {
    /// Opens (creating if needed, mode 0700) the database in `dir`, with the
    /// default page cache.
    pub fn open(dir: &Path) -> Result<Self, StorageError> {
        Storage::open_tuned(dir, Tuning::default())
    }

    /// Opens the database in `dir` with a page cache of `cache_mb` MiB.
    pub fn open_tuned(dir: &Path, tuning: Tuning) -> Result<Self, StorageError> {
        let Tuning {
            cache_mb,
            commit_window,
        } = tuning;
        create_private_dir(dir)?;
        let db = sled::Config::new()
            .path(dir.join("db"))
            .cache_capacity(cache_mb.max(1) * 1024 * 1024)
            .mode(sled::Mode::HighThroughput)
            .open()?;
        let trees = TreeName::ALL
            .iter()
            .map(|t| db.open_tree(t.name()))
            .collect::<Result<Vec<_>, _>>()?;
        let committer = GroupCommit::start(db.clone(), trees.clone(), commit_window)?;
        let storage = Storage {
            db,
            trees,
            committer,
        };
        let meta = storage.tree(TreeName::Meta);
        match meta.get(keys::LAYOUT_VERSION)?.as_deref() {
            None => {
                meta.insert(keys::LAYOUT_VERSION, &[LAYOUT])?;
            }
            Some([version]) if *version == LAYOUT => {}
            Some(other) => {
                return Err(StorageError::Layout {
                    found: other.first().copied().unwrap_or(0),
                })
            }
        }
        Ok(storage)
    }

    fn tree(&self, name: TreeName) -> &sled::Tree {
        &self.trees[name.index()]
    }

    /// Applies `writes` atomically. Not yet durable: await [`Storage::durable`].
    /// A request that answers only once its writes are durable should use
    /// [`Storage::commit_durably`], which shares the transaction too.
    pub fn commit(&self, writes: &[Write]) -> Result<(), StorageError> {
        commit_to(&self.trees, writes.iter())
    }

    /// Runs `decide` inside one transaction: it reads what it needs through
    /// the [`TxReader`] and returns the writes to apply with a result. sled
    /// may run it more than once (on conflict), so it must not have effects.
    pub fn transact<R, E: From<StorageError>>(
        &self,
        decide: impl Fn(&TxReader<'_>) -> Result<(Vec<Write>, R), E>,
    ) -> Result<R, E> {
        // A resource change reads and writes resources and records events.
        let covered = [TreeName::Resources, TreeName::Outbox, TreeName::DeliveryLog];
        let mut slot = [None; TreeName::ALL.len()];
        for (position, name) in covered.iter().enumerate() {
            slot[name.index()] = Some(position);
        }
        let trees: Vec<sled::Tree> = covered
            .iter()
            .map(|name| self.tree(*name).clone())
            .collect();
        let result = trees
            .as_slice()
            .transaction(|views: &Vec<TransactionalTree>| {
                let views = Views { trees: views, slot };
                let reader = TxReader { views: &views };
                let (writes, outcome) = decide(&reader)
                    .map_err(|err| ConflictableTransactionError::Abort(Aborted::Decided(err)))?;
                for write in &writes {
                    apply(&views, write).map_err(|err| match err {
                        ConflictableTransactionError::Abort(err) => {
                            ConflictableTransactionError::Abort(Aborted::Storage(err))
                        }
                        ConflictableTransactionError::Conflict => {
                            ConflictableTransactionError::Conflict
                        }
                        ConflictableTransactionError::Storage(err) => {
                            ConflictableTransactionError::Storage(err)
                        }
                    })?;
                }
                Ok(outcome)
            });
        result.map_err(|err| match err {
            TransactionError::Abort(Aborted::Decided(err)) => err,
            TransactionError::Abort(Aborted::Storage(err)) => E::from(err),
            TransactionError::Storage(err) => E::from(StorageError::Engine(err)),
        })
    }

    /// A workspace resource of `org`, outside any transaction.
    pub fn resource<T: serde::de::DeserializeOwned>(
        &self,
        org: OrgId,
        kind: u8,
        id: ResourceId,
    ) -> Result<Option<T>, StorageError> {
        match self
            .tree(TreeName::Resources)
            .get(keys::resource(org, kind, id))?
        {
            Some(bytes) => decode(&bytes).map(Some),
            None => Ok(None),
        }
    }

    /// One page of `org`'s resources of `kind`, newest first, strictly
    /// before `before` when given.
    pub fn resource_page<T: serde::de::DeserializeOwned>(
        &self,
        org: OrgId,
        kind: u8,
        before: Option<ResourceId>,
        limit: usize,
        filter: impl Fn(&T) -> bool,
    ) -> Result<(Vec<T>, bool), StorageError> {
        let prefix = keys::resource_prefix(org, kind);
        let before = before.map(|id| keys::resource(org, kind, id));
        self.newest_first(
            TreeName::Resources,
            &prefix,
            before.as_ref().map(|k| k.as_slice()),
            limit,
            filter,
        )
    }

    /// Resolves once every commit made before the call is on disk.
    pub async fn durable(&self) -> Result<(), StorageError> {
        self.committer.durable().await
    }

    /// Flushes and releases the database (its file lock included), for a
    /// process that opened it only to write and must hand it to a server.
    pub fn close(self) -> Result<(), StorageError> {
        self.db.flush()?;
        let Storage {
            db,
            trees,
            committer,
        } = self;
        drop(trees);
        drop(db);
        committer.stop();
        Ok(())
    }

    /// Commits `writes` atomically and waits for durability: what every 2xx
    /// answer needs. Concurrent callers share one transaction and one flush
    /// (see `group_commit`); the writes are given back.
    pub async fn commit_durably(&self, writes: Vec<Write>) -> Result<Vec<Write>, StorageError> {
        self.committer.commit(writes).await
    }

    /// Unfinished deliveries in the outbox (counts keys: a scan, for metrics).
    pub fn outbox_len(&self) -> usize {
        self.tree(TreeName::Outbox).len()
    }

    /// The database's size on disk in bytes (0 if it cannot be read).
    pub fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }

    /// The stored admin-token hash, if any.
    pub fn admin_token_hash(&self) -> Result<Option<[u8; 32]>, StorageError> {
        let value = self.tree(TreeName::Meta).get(keys::ADMIN_TOKEN_SHA256)?;
        Ok(value.and_then(|v| <[u8; 32]>::try_from(v.as_ref()).ok()))
    }

    /// Stores the admin-token hash durably.
    pub fn set_admin_token_hash(&self, hash: &[u8; 32]) -> Result<(), StorageError> {
        self.tree(TreeName::Meta)
            .insert(keys::ADMIN_TOKEN_SHA256, hash.as_slice())?;
        self.db.flush()?;
        Ok(())
    }

    /// Reads everything the in-memory state is built from.
    pub fn load(&self) -> Result<Loaded, StorageError> {
        let users = self.values::<User>(TreeName::Users)?;
        let tokens = self.values::<TokenRecord>(TreeName::Tokens)?;
        let mut orgs = Vec::new();
        for org in self.values::<Organization>(TreeName::Orgs)? {
            let prefix = org.id.as_bytes().to_vec();
            let roles = self.prefixed::<Role>(TreeName::Roles, &prefix)?;
            let members = self.prefixed::<Membership>(TreeName::Members, &prefix)?;
            let webhook = match self.tree(TreeName::Webhooks).get(&prefix)? {
                Some(bytes) => Some(decode::<WebhookEndpoint>(&bytes)?),
                None => None,
            };
            orgs.push(OrgState::new(org, roles, members, webhook));
        }
        let jobs = self.values::<Job>(TreeName::Outbox)?;
        Ok(Loaded {
            orgs,
            users,
            tokens,
            jobs,
        })
    }

    /// One page of an organization's audit log, newest first, starting
    /// strictly before the record `before` when given.
    pub fn audit_page(
        &self,
        org: OrgId,
        before: Option<AuditId>,
        limit: usize,
        filter: impl Fn(&AuditRecord) -> bool,
    ) -> Result<(Vec<AuditRecord>, bool), StorageError> {
        let before = before.map(|id| keys::audit(org, id));
        self.newest_first(
            TreeName::Audit,
            org.as_bytes(),
            before.as_ref().map(|k| k.as_slice()),
            limit,
            filter,
        )
    }

    /// One page of an organization's delivery log, newest first, starting
    /// strictly before the record `before` when given.
    pub fn delivery_log_page(
        &self,
        org: OrgId,
        before: Option<LogId>,
        limit: usize,
        filter: impl Fn(&LogRecord) -> bool,
    ) -> Result<(Vec<LogRecord>, bool), StorageError> {
        let before = before.map(|id| keys::delivery_log(org, id));
        self.newest_first(
            TreeName::DeliveryLog,
            org.as_bytes(),
            before.as_ref().map(|k| k.as_slice()),
            limit,
            filter,
        )
    }

    /// The newest delivery-log record of `delivery` in `org`, if any.
    pub fn find_delivery(
        &self,
        org: OrgId,
        delivery: DeliveryId,
    ) -> Result<Option<LogRecord>, StorageError> {
        let (found, _) = self.delivery_log_page(org, None, 1, |r| r.delivery_id == delivery)?;
        Ok(found.into_iter().next())
    }

    /// Deletes all but the newest `keep` delivery-log records of `org`;
    /// returns how many remain.
    pub fn prune_delivery_log(&self, org: OrgId, keep: usize) -> Result<usize, StorageError> {
        let tree = self.tree(TreeName::DeliveryLog);
        let total = self.delivery_log_len(org);
        let excess = total.saturating_sub(keep);
        if excess == 0 {
            return Ok(total);
        }
        let mut batch = sled::Batch::default();
        for key in tree.scan_prefix(org.as_bytes()).keys().take(excess) {
            batch.remove(key?);
        }
        tree.apply_batch(batch)?;
        Ok(keep)
    }

    /// Deletes the `count` oldest delivery-log records of `org` (reading
    /// only those); returns how many it deleted.
    pub fn trim_delivery_log(&self, org: OrgId, count: usize) -> Result<usize, StorageError> {
        let tree = self.tree(TreeName::DeliveryLog);
        let mut batch = sled::Batch::default();
        let mut removed = 0;
        for key in tree.scan_prefix(org.as_bytes()).keys().take(count) {
            batch.remove(key?);
            removed += 1;
        }
        if removed > 0 {
            tree.apply_batch(batch)?;
        }
        Ok(removed)
    }

    /// How many delivery-log records `org` has (a scan of its keys).
    pub fn delivery_log_len(&self, org: OrgId) -> usize {
        self.tree(TreeName::DeliveryLog)
            .scan_prefix(org.as_bytes())
            .keys()
            .count()
    }

    /// Up to `limit` records of `org` in `tree` that pass `filter`, newest
    /// first, strictly before the key `before`; and whether more remain.
    fn newest_first<T: serde::de::DeserializeOwned>(
        &self,
        tree: TreeName,
        prefix: &[u8],
        before: Option<&[u8]>,
        limit: usize,
        filter: impl Fn(&T) -> bool,
    ) -> Result<(Vec<T>, bool), StorageError> {
        let start = prefix.to_vec();
        let end = match before {
            Some(key) => key.to_vec(),
            None => {
                let mut end = prefix.to_vec();
                end.extend_from_slice(&[0xff; 17]);
                end
            }
        };
        let mut records = Vec::new();
        for entry in self.tree(tree).range(start..end).rev() {
            let (_, value) = entry?;
            let record: T = decode(&value)?;
            if !filter(&record) {
                continue;
            }
            if records.len() == limit {
                return Ok((records, true));
            }
            records.push(record);
        }
        Ok((records, false))
    }

    fn values<T: serde::de::DeserializeOwned>(
        &self,
        tree: TreeName,
    ) -> Result<Vec<T>, StorageError> {
        self.tree(tree)
            .iter()
            .values()
            .map(|v| decode(&v?))
            .collect()
    }

    fn prefixed<T: serde::de::DeserializeOwned>(
        &self,
        tree: TreeName,
        prefix: &[u8],
    ) -> Result<Vec<T>, StorageError> {
        self.tree(tree)
            .scan_prefix(prefix)
            .values()
            .map(|v| decode(&v?))
            .collect()
    }
}

/// Why a [`Storage::transact`] was aborted.
enum Aborted<E> {
    /// The decision refused.
    Decided(E),
    /// A write was refused by storage.
    Storage(StorageError),
}

/// Reads inside a [`Storage::transact`].
pub struct TxReader<'a> {
    views: &'a Views<'a>,
}

impl TxReader<'_> {
    /// A workspace resource of `org`, as of this transaction.
    pub fn resource<T: serde::de::DeserializeOwned>(
        &self,
        org: OrgId,
        kind: u8,
        id: ResourceId,
    ) -> Result<Option<T>, StorageError> {
        let tree = view(self.views, TreeName::Resources)
            .map_err(|err| StorageError::Codec(format!("transactional read: {err:?}")))?;
        let value = tree
            .get(keys::resource(org, kind, id).as_slice())
            .map_err(|err| StorageError::Codec(format!("transactional read: {err:?}")))?;
        match value {
            Some(bytes) => decode(&bytes).map(Some),
            None => Ok(None),
        }
    }
}

/// Applies `writes` to `trees` in one transaction covering only the trees
/// they touch (so writers of unrelated trees do not contend).
fn commit_to<'w>(
    trees: &[sled::Tree],
    writes: impl Iterator<Item = &'w Write> + Clone,
) -> Result<(), StorageError> {
    let mut slot = [None; TreeName::ALL.len()];
    let mut covered = Vec::new();
    for name in writes.clone().flat_map(trees_of) {
        if slot[name.index()].is_none() {
            slot[name.index()] = Some(covered.len());
            covered.push(trees[name.index()].clone());
        }
    }
    if covered.is_empty() {
        return Ok(());
    }
    let result = covered
        .as_slice()
        .transaction(|views: &Vec<TransactionalTree>| {
            let views = Views { trees: views, slot };
            for write in writes.clone() {
                apply(&views, write)?;
            }
            Ok(())
        });
    result.map_err(|err| match err {
        TransactionError::Abort(err) => err,
        TransactionError::Storage(err) => StorageError::Engine(err),
    })
}

/// The transactional views of the trees one transaction covers.
struct Views<'a> {
    trees: &'a [TransactionalTree],
    /// Position in `trees` of each tree (by [`TreeName::index`]), if covered.
    slot: [Option<usize>; TreeName::ALL.len()],
}

/// The trees a write reads or writes: a transaction covers only these, so
/// writers of unrelated trees do not contend.
fn trees_of(write: &Write) -> &'static [TreeName] {
    use TreeName::*;
    match write {
        Write::Edit(Edit::PutOrg(_)) => &[Orgs],
        Write::Edit(Edit::PutRole(_) | Edit::DeleteRole(..)) => &[Roles, Orgs],
        Write::Edit(Edit::PutMember(_) | Edit::DeleteMember(..)) => &[Members],
        Write::Edit(Edit::PutWebhook(_) | Edit::DeleteWebhook(_)) => &[Webhooks],
        Write::PutUser(..) => &[Users, UserEmails],
        Write::PutToken(_) | Write::DeleteToken(_) => &[Tokens, TokenIds],
        Write::Audit(_) => &[Audit],
        Write::PutJob(_) | Write::DeleteJob(_) => &[Outbox],
        Write::Log(_) => &[DeliveryLog],
        Write::PutResource { .. } | Write::DeleteResource { .. } => &[Resources],
    }
}

fn view<'v>(views: &'v Views<'_>, name: TreeName) -> TxResult<&'v TransactionalTree> {
    match views.slot[name.index()] {
        Some(position) => Ok(&views.trees[position]),
        None => abort(StorageError::Codec(format!(
            "tree {} is outside this transaction",
            name.name()
        ))),
    }
}

fn apply(views: &Views<'_>, write: &Write) -> TxResult<()> {
    match write {
        Write::Edit(edit) => apply_edit(views, edit),
        Write::PutUser(user, folded_email) => {
            view(views, TreeName::Users)?.insert(user.id.as_bytes().as_slice(), enc(user)?)?;
            view(views, TreeName::UserEmails)?
                .insert(folded_email.as_bytes(), user.id.as_bytes().as_slice())?;
            Ok(())
        }
        Write::PutToken(token) => {
            view(views, TreeName::Tokens)?.insert(token.sha256.as_slice(), enc(token)?)?;
            view(views, TreeName::TokenIds)?
                .insert(keys::token_id(token.id).as_slice(), token.sha256.as_slice())?;
            Ok(())
        }
        Write::DeleteToken(token) => {
            view(views, TreeName::Tokens)?.remove(token.sha256.as_slice())?;
            view(views, TreeName::TokenIds)?.remove(keys::token_id(token.id).as_slice())?;
            Ok(())
        }
        Write::Audit(record) => {
            let key = keys::audit(record.organization_id, record.id);
            view(views, TreeName::Audit)?.insert(key.as_slice(), enc(record)?)?;
            Ok(())
        }
        Write::PutJob(job) => {
            view(views, TreeName::Outbox)?
                .insert(job.delivery_id.as_bytes().as_slice(), enc(job)?)?;
            Ok(())
        }
        Write::DeleteJob(id) => {
            view(views, TreeName::Outbox)?.remove(id.as_bytes().as_slice())?;
            Ok(())
        }
        Write::Log(record) => {
            let key = keys::delivery_log(record.organization_id, record.id);
            view(views, TreeName::DeliveryLog)?.insert(key.as_slice(), enc(record)?)?;
            Ok(())
        }
        Write::PutResource {
            org,
            kind,
            id,
            value,
        } => {
            view(views, TreeName::Resources)?.insert(
                keys::resource(*org, *kind, *id).as_slice(),
                value.as_slice(),
            )?;
            Ok(())
        }
        Write::DeleteResource { org, kind, id } => {
            view(views, TreeName::Resources)?
                .remove(keys::resource(*org, *kind, *id).as_slice())?;
            Ok(())
        }
    }
}

fn apply_edit(views: &Views<'_>, edit: &Edit) -> TxResult<()> {
    match edit {
        Edit::PutOrg(org) => {
            view(views, TreeName::Orgs)?.insert(org.id.as_bytes().as_slice(), enc(org)?)?;
        }
        Edit::PutRole(role) => {
            guard_role_put(views, role)?;
            let key = keys::role(role.organization_id, role.id);
            view(views, TreeName::Roles)?.insert(key.as_slice(), enc(role)?)?;
        }
        Edit::DeleteRole(org, role) => {
            guard_role_delete(views, *org, *role)?;
            view(views, TreeName::Roles)?.remove(keys::role(*org, *role).as_slice())?;
        }
        Edit::PutMember(member) => {
            let key = keys::member(member.organization_id, member.user_id);
            view(views, TreeName::Members)?.insert(key.as_slice(), enc(member)?)?;
        }
        Edit::DeleteMember(org, user) => {
            view(views, TreeName::Members)?.remove(keys::member(*org, *user).as_slice())?;
        }
        Edit::PutWebhook(endpoint) => {
            let key = endpoint.organization_id.as_bytes().as_slice();
            view(views, TreeName::Webhooks)?.insert(key, enc(endpoint)?)?;
        }
        Edit::DeleteWebhook(org) => {
            view(views, TreeName::Webhooks)?.remove(org.as_bytes().as_slice())?;
        }
    }
    Ok(())
}

fn stored_role(views: &Views<'_>, org: OrgId, role: RoleId) -> TxResult<Option<Role>> {
    match view(views, TreeName::Roles)?.get(keys::role(org, role).as_slice())? {
        Some(bytes) => decode(&bytes)
            .map(Some)
            .map_err(ConflictableTransactionError::Abort),
        None => Ok(None),
    }
}

/// Owner never changes; system rows keep their kind; new system rows only
/// come with a new organization (whose record is not stored yet).
fn guard_role_put(views: &Views<'_>, role: &Role) -> TxResult<()> {
    match stored_role(views, role.organization_id, role.id)? {
        Some(existing) if existing.is_immutable && existing != *role => {
            abort(StorageError::RoleImmutable)
        }
        Some(existing)
            if (existing.is_immutable, existing.is_system)
                != (role.is_immutable, role.is_system) =>
        {
            abort(StorageError::SystemRoleCount)
        }
        Some(_) => Ok(()),
        None if role.is_system || role.is_immutable => {
            let org_exists = view(views, TreeName::Orgs)?
                .get(role.organization_id.as_bytes().as_slice())?
                .is_some();
            if org_exists {
                abort(StorageError::SystemRoleCount)
            } else {
                Ok(())
            }
        }
        None => Ok(()),
    }
}

fn guard_role_delete(views: &Views<'_>, org: OrgId, role: RoleId) -> TxResult<()> {
    match stored_role(views, org, role)? {
        Some(existing) if existing.is_immutable => abort(StorageError::RoleImmutable),
        Some(existing) if existing.is_system => abort(StorageError::SystemRole),
        _ => Ok(()),
    }
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
    use crate::domain::organization::Plan;
    use crate::time::Timestamp;

    fn new_org(storage: &Storage) -> (Organization, Role, Role) {
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
        assert!(storage.commit(&writes).is_ok());
        (org, owner, member)
    }

    #[test]
    fn a_data_directory_of_another_layout_is_refused() {
        let Some(dir) = tempfile::tempdir().ok() else {
            panic!("no temp dir");
        };
        let Ok(storage) = Storage::open(dir.path()) else {
            panic!("storage did not open");
        };
        let meta = storage.tree(TreeName::Meta);
        assert!(meta.insert(keys::LAYOUT_VERSION, &[LAYOUT + 1]).is_ok());
        assert!(storage.close().is_ok());
        let err = Storage::open(dir.path()).err();
        assert!(
            matches!(err, Some(StorageError::Layout { found }) if found == LAYOUT + 1),
            "{err:?}"
        );
    }

    #[test]
    fn storage_refuses_to_alter_owner_or_delete_member() {
        let dir = tempfile::tempdir().ok();
        let Some(storage) = dir.as_ref().and_then(|d| Storage::open(d.path()).ok()) else {
            panic!("storage did not open");
        };
        let (org, owner, member) = new_org(&storage);

        let mut renamed = owner.clone();
        renamed.name = "Boss".into();
        let err = storage.commit(&[Write::Edit(Edit::PutRole(renamed))]).err();
        assert!(matches!(err, Some(StorageError::RoleImmutable)));
        let err = storage
            .commit(&[Write::Edit(Edit::DeleteRole(org.id, owner.id))])
            .err();
        assert!(matches!(err, Some(StorageError::RoleImmutable)));
        let err = storage
            .commit(&[Write::Edit(Edit::DeleteRole(org.id, member.id))])
            .err();
        assert!(matches!(err, Some(StorageError::SystemRole)));

        let (second_owner, _) = system_roles(org.id, Timestamp::now());
        let err = storage
            .commit(&[Write::Edit(Edit::PutRole(second_owner))])
            .err();
        assert!(matches!(err, Some(StorageError::SystemRoleCount)));

        let mut demoted = member.clone();
        demoted.is_system = false;
        let err = storage.commit(&[Write::Edit(Edit::PutRole(demoted))]).err();
        assert!(matches!(err, Some(StorageError::SystemRoleCount)));

        // A refused write leaves the transaction's other writes unapplied too.
        let mut edited_member = member.clone();
        edited_member.name = "Staff".into();
        let writes = [
            Write::Edit(Edit::PutRole(edited_member)),
            Write::Edit(Edit::DeleteRole(org.id, owner.id)),
        ];
        assert!(storage.commit(&writes).is_err());
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
        Write::PutUser(user, email.into())
    }

    #[test]
    fn a_refused_request_fails_alone_in_a_shared_commit() {
        let dir = tempfile::tempdir().ok();
        // A long window puts the three requests below in one round.
        let tuning = Tuning {
            cache_mb: 8,
            commit_window: std::time::Duration::from_millis(200),
        };
        let Some(storage) = dir
            .as_ref()
            .and_then(|d| Storage::open_tuned(d.path(), tuning).ok())
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
            storage.commit_durably(vec![user_write("a@example.test")]),
            storage.commit_durably(refused),
            storage.commit_durably(vec![user_write("b@example.test")]),
        ));
        assert!(
            matches!(&first, Ok(writes) if writes.len() == 1),
            "{first:?}"
        );
        assert!(
            matches!(second, Err(StorageError::SystemRole)),
            "{second:?}"
        );
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
