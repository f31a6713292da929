//! Writes: how each domain [`Write`] becomes row operations on sled trees
//! ([`prepare`], on the writer's thread), applied in one transaction
//! covering only the trees they touch (so writers of unrelated trees do not
//! contend). The Owner/Member rules of seed 2.4 are enforced here, inside
//! the transaction, so no code path can alter Owner or delete Member.

use ::sled::transaction::{
    ConflictableTransactionError, TransactionError, TransactionalTree, UnabortableTransactionError,
};
use ::sled::Transactional;

use super::answer_batches::Batches;
use super::answered::{second, AnsweredScopes};
use super::codec::{decode, encode};
use super::keys::{self, TreeName};
use super::late::LateRecords;
use crate::domain::change::Write;
use crate::domain::names::fold;
use crate::domain::org_state::Edit;
use crate::domain::role::Role;
use crate::domain::webhook::WebhookEndpoint;
use crate::ids::{OrgId, RoleId};
use crate::secrets::SealingKey;
use crate::storage::sealed::sealed;
use crate::storage::StoreError;

/// What a transaction body returns.
pub type TxResult<T> = Result<T, ConflictableTransactionError<StoreError>>;

fn abort<T>(err: StoreError) -> TxResult<T> {
    Err(ConflictableTransactionError::Abort(err))
}

/// The transactional views of the trees one transaction covers.
pub struct Views<'a> {
    trees: &'a [TransactionalTree],
    /// Position in `trees` of each tree (by [`TreeName::index`]), if covered.
    slot: [Option<usize>; TreeName::ALL.len()],
}

impl Views<'_> {
    /// The view of `name`: an abort if the transaction does not cover it.
    pub fn tree(&self, name: TreeName) -> TxResult<&TransactionalTree> {
        match self.slot[name.index()] {
            Some(position) => Ok(&self.trees[position]),
            None => abort(StoreError::engine(OutsideTransaction(name.name()))),
        }
    }
}

/// A write reached a tree its transaction does not cover (a bug).
#[derive(Debug, thiserror::Error)]
#[error("tree {0} is outside this transaction")]
struct OutsideTransaction(&'static str);

/// Runs `body` in one transaction over `names` (each once, in order).
pub fn transaction<A, E>(
    trees: &[::sled::Tree],
    names: impl IntoIterator<Item = TreeName>,
    body: impl Fn(&Views<'_>) -> Result<A, ConflictableTransactionError<Aborted<E>>>,
) -> Result<A, Aborted<E>> {
    let mut slot = [None; TreeName::ALL.len()];
    let mut covered = Vec::new();
    for name in names {
        if slot[name.index()].is_none() {
            slot[name.index()] = Some(covered.len());
            covered.push(trees[name.index()].clone());
        }
    }
    let result = covered
        .as_slice()
        .transaction(|views: &Vec<TransactionalTree>| body(&Views { trees: views, slot }));
    result.map_err(|err| match err {
        TransactionError::Abort(aborted) => aborted,
        TransactionError::Storage(err) => Aborted::Store(StoreError::engine(err)),
    })
}

/// Why a transaction was aborted: the caller's decision, or storage.
pub enum Aborted<E> {
    /// The caller's decision refused.
    Decided(E),
    /// A write was refused by storage, or storage failed.
    Store(StoreError),
}

impl<E: From<StoreError>> Aborted<E> {
    /// The caller's error.
    pub fn into_error(self) -> E {
        match self {
            Aborted::Decided(err) => err,
            Aborted::Store(err) => E::from(err),
        }
    }
}

/// Lifts a write's failure into a transaction that may also abort with a decision.
pub fn lift<E>(
    err: ConflictableTransactionError<StoreError>,
) -> ConflictableTransactionError<Aborted<E>> {
    match err {
        ConflictableTransactionError::Abort(err) => {
            ConflictableTransactionError::Abort(Aborted::Store(err))
        }
        ConflictableTransactionError::Conflict => ConflictableTransactionError::Conflict,
        ConflictableTransactionError::Storage(err) => ConflictableTransactionError::Storage(err),
    }
}

/// Lifts a failed read (or write) of a transactional tree.
pub fn lift_read<E>(err: UnabortableTransactionError) -> ConflictableTransactionError<Aborted<E>> {
    lift(err.into())
}

/// One row operation of a write, encoded already: writers prepare their
/// own (on their own thread), so the commit thread, which every durable
/// write passes through, only applies them.
#[derive(Clone, Debug)]
pub enum Op {
    /// Insert or replace a row.
    Put(TreeName, Vec<u8>, Vec<u8>),
    /// Remove a row.
    Remove(TreeName, Vec<u8>),
    /// Insert a row unless the key holds one.
    Add(TreeName, Vec<u8>, Vec<u8>),
    /// An idempotency answer that expires in `second`, where
    /// [`AnsweredScopes`] noted its scope: written in its commit's batch
    /// ([`super::answer_batches`]), or on its own in
    /// [`TreeName::AnswersByExpiry`] by [`apply`].
    Answer {
        /// Its second of expiry.
        second: u32,
        /// Its scope.
        scope: [u8; 32],
        /// Its `KeyRecord`, encoded.
        record: Vec<u8>,
    },
    /// Seed 2.4, checked inside the transaction before a role row is put.
    GuardRolePut(Box<Role>),
    /// Seed 2.4, checked inside the transaction before a role row is removed.
    GuardRoleDelete(OrgId, RoleId),
}

impl Op {
    /// The tree it reads or writes.
    fn trees(&self) -> &'static [TreeName] {
        match self {
            Op::Put(tree, ..) | Op::Remove(tree, _) | Op::Add(tree, ..) => {
                std::slice::from_ref(tree.as_static())
            }
            Op::Answer { .. } => &[TreeName::AnswersByExpiry],
            // A role guard reads the role, and whether its organization exists yet.
            Op::GuardRolePut(_) | Op::GuardRoleDelete(..) => &[TreeName::Roles, TreeName::Orgs],
        }
    }
}

/// About how many bytes `ops` write.
pub fn size_of<'o>(ops: impl IntoIterator<Item = &'o Op>) -> u64 {
    ops.into_iter()
        .map(|op| match op {
            Op::Put(_, key, value) | Op::Add(_, key, value) => key.len() + value.len(),
            Op::Remove(_, key) => key.len(),
            Op::Answer { scope, record, .. } => scope.len() + record.len(),
            Op::GuardRolePut(_) | Op::GuardRoleDelete(..) => 0,
        })
        .sum::<usize>() as u64
}

/// The row operations of `writes`, in order; webhook secrets sealed with
/// `key` when one is given, and idempotency answers where `answered` finds
/// them.
pub fn prepare<'w>(
    writes: impl IntoIterator<Item = &'w Write>,
    key: Option<&SealingKey>,
    late: &LateRecords,
    answered: &AnsweredScopes,
) -> Result<Vec<Op>, StoreError> {
    let mut ops = Vec::new();
    for write in writes {
        prepare_one(write, key, late, answered, &mut ops)?;
    }
    Ok(ops)
}

/// A webhook endpoint as stored: its secret sealed with `key`, if any.
pub fn endpoint_row(
    endpoint: &WebhookEndpoint,
    key: Option<&SealingKey>,
) -> Result<Vec<u8>, StoreError> {
    encode(&sealed(endpoint, key)?)
}

fn prepare_one(
    write: &Write,
    key: Option<&SealingKey>,
    late: &LateRecords,
    answered: &AnsweredScopes,
    ops: &mut Vec<Op>,
) -> Result<(), StoreError> {
    use TreeName::*;
    match write {
        Write::Edit(edit) => prepare_edit(edit, key, ops)?,
        Write::PutUser(user) => {
            ops.push(Op::Put(Users, user.id.as_bytes().to_vec(), encode(user)?));
            let email = fold(&user.email).into_bytes();
            ops.push(Op::Put(UserEmails, email, user.id.as_bytes().to_vec()));
        }
        Write::PutToken(token) => {
            ops.push(Op::Put(Tokens, token.sha256.to_vec(), encode(token)?));
            let id = keys::token_id(token.id).to_vec();
            ops.push(Op::Put(TokenIds, id, token.sha256.to_vec()));
        }
        Write::DeleteToken(token) => {
            ops.push(Op::Remove(Tokens, token.sha256.to_vec()));
            ops.push(Op::Remove(TokenIds, keys::token_id(token.id).to_vec()));
        }
        Write::Audit(record) => {
            let key = keys::audit(record.organization_id, record.id).to_vec();
            ops.push(Op::Put(Audit, key, encode(record)?));
        }
        // One node alone: a retry's row is there (nobody else finishes it).
        Write::PutJob(job) | Write::RetryJob(job) => {
            let key = keys::job(job.organization_id, job.delivery_id).to_vec();
            ops.push(Op::Put(Outbox, key, encode(job)?));
        }
        Write::DeleteJob(org, id) => ops.push(Op::Remove(Outbox, keys::job(*org, *id).to_vec())),
        Write::Log(record) => {
            let (org, id, delivery) = (record.organization_id, record.id, record.delivery_id);
            let now = crate::time::Timestamp::now().0;
            if late.needs_entry(org, delivery.unix_ms(), id.unix_ms(), now) {
                let entry = keys::delivery_id_entry(org, delivery, id).to_vec();
                ops.push(Op::Put(DeliveryIds, entry, Vec::new()));
            }
            ops.push(Op::Put(
                DeliveryLog,
                keys::delivery_log(org, id).to_vec(),
                encode(record)?,
            ));
        }
        Write::PutResource(org, value) | Write::NewResource(org, value) => {
            let key = keys::resource(*org, value.kind(), value.id()).to_vec();
            ops.push(Op::Put(Resources, key, encode(value)?));
        }
        Write::DeleteResource(org, kind, id) => {
            ops.push(Op::Remove(
                Resources,
                keys::resource(*org, *kind, *id).to_vec(),
            ));
        }
        // One node alone changes its organizations: nothing to check.
        Write::OrgRevision(..) => {}
        Write::AdminToken(hash) => {
            ops.push(Op::Add(
                Meta,
                keys::ADMIN_TOKEN_SHA256.to_vec(),
                hash.to_vec(),
            ));
        }
        Write::KeyAnswer(answer) => {
            let record = encode(&answer.record())?;
            ops.push(if answered.by_expiry(&answer.scope, answer.expires) {
                Op::Answer {
                    second: second(answer.expires),
                    scope: answer.scope,
                    record,
                }
            } else {
                Op::Put(Idempotency, answer.scope.to_vec(), record)
            });
        }
    }
    Ok(())
}

fn prepare_edit(
    edit: &Edit,
    key: Option<&SealingKey>,
    ops: &mut Vec<Op>,
) -> Result<(), StoreError> {
    use TreeName::*;
    match edit {
        Edit::PutOrg(org) => ops.push(Op::Put(Orgs, org.id.as_bytes().to_vec(), encode(org)?)),
        Edit::PutRole(role) => {
            ops.push(Op::GuardRolePut(Box::new(role.clone())));
            let key = keys::role(role.organization_id, role.id).to_vec();
            ops.push(Op::Put(Roles, key, encode(role)?));
        }
        Edit::DeleteRole(org, role) => {
            ops.push(Op::GuardRoleDelete(*org, *role));
            ops.push(Op::Remove(Roles, keys::role(*org, *role).to_vec()));
        }
        Edit::PutMember(member) => {
            let key = keys::member(member.organization_id, member.user_id).to_vec();
            ops.push(match member.role_expires_at {
                Some(at) => Op::Put(MemberExpiries, key.clone(), encode(&at)?),
                None => Op::Remove(MemberExpiries, key.clone()),
            });
            ops.push(Op::Put(Members, key, encode(member)?));
        }
        Edit::DeleteMember(org, user) => {
            let key = keys::member(*org, *user).to_vec();
            ops.push(Op::Remove(MemberExpiries, key.clone()));
            ops.push(Op::Remove(Members, key));
        }
        Edit::PutWebhook(endpoint) => {
            let row = endpoint.organization_id.as_bytes().to_vec();
            ops.push(Op::Put(Webhooks, row, endpoint_row(endpoint, key)?));
        }
        Edit::DeleteWebhook(org) => ops.push(Op::Remove(Webhooks, org.as_bytes().to_vec())),
    }
    Ok(())
}

/// The trees `ops` touch, for a transaction covering only those.
pub fn trees_of<'o>(
    ops: impl IntoIterator<Item = &'o Op>,
) -> impl Iterator<Item = TreeName> + Clone {
    ops.into_iter()
        .flat_map(Op::trees)
        .copied()
        .collect::<Vec<_>>()
        .into_iter()
}

/// Applies `ops` to `trees` in one transaction covering the trees they
/// touch, their idempotency answers in batches ([`Batches`]) whose places
/// are noted in `answered` once committed.
pub fn commit_to<'o>(
    trees: &[::sled::Tree],
    answered: &AnsweredScopes,
    ops: impl Iterator<Item = &'o Op> + Clone,
) -> Result<(), StoreError> {
    let answers = ops.clone().filter_map(|op| match op {
        Op::Answer {
            second,
            scope,
            record,
        } => Some((*second, scope, record.as_slice())),
        _ => None,
    });
    let batches = Batches::of(answers, || answered.next_batch());
    let rows = ops.filter(|op| !matches!(op, Op::Answer { .. }));
    let names = trees_of(rows.clone()).chain(batches.trees());
    if names.clone().next().is_none() {
        return Ok(());
    }
    transaction(trees, names, |views| {
        for op in rows.clone() {
            apply(views, op).map_err(lift::<StoreError>)?;
        }
        if !batches.is_empty() {
            let (batched, index) = (
                views.tree(TreeName::AnswerBatches).map_err(lift)?,
                views.tree(TreeName::AnswerBatchIndex).map_err(lift)?,
            );
            batches.write(batched, index).map_err(lift_read)?;
        }
        Ok(())
    })
    .map_err(Aborted::into_error)?;
    for (place, scopes) in batches.places() {
        answered.placed(scopes, place.second, place.batch);
    }
    Ok(())
}

/// Applies one row operation inside a transaction.
pub fn apply(views: &Views<'_>, op: &Op) -> TxResult<()> {
    match op {
        Op::Put(tree, key, value) => {
            views
                .tree(*tree)?
                .insert(key.as_slice(), value.as_slice())?;
        }
        Op::Remove(tree, key) => {
            views.tree(*tree)?.remove(key.as_slice())?;
        }
        Op::Answer {
            second,
            scope,
            record,
        } => {
            views
                .tree(TreeName::AnswersByExpiry)?
                .insert(&keys::answer(*second, scope)[..], record.as_slice())?;
        }
        Op::Add(tree, key, value) => {
            let tree = views.tree(*tree)?;
            if tree.get(key.as_slice())?.is_none() {
                tree.insert(key.as_slice(), value.as_slice())?;
            }
        }
        Op::GuardRolePut(role) => guard_role_put(views, role)?,
        Op::GuardRoleDelete(org, role) => guard_role_delete(views, *org, *role)?,
    }
    Ok(())
}

fn stored_role(views: &Views<'_>, org: OrgId, role: RoleId) -> TxResult<Option<Role>> {
    match views
        .tree(TreeName::Roles)?
        .get(keys::role(org, role).as_slice())?
    {
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
            abort(StoreError::RoleImmutable)
        }
        Some(existing)
            if (existing.is_immutable, existing.is_system)
                != (role.is_immutable, role.is_system) =>
        {
            abort(StoreError::SystemRoleCount)
        }
        Some(_) => Ok(()),
        None if role.is_system || role.is_immutable => {
            let org_exists = views
                .tree(TreeName::Orgs)?
                .get(role.organization_id.as_bytes().as_slice())?
                .is_some();
            if org_exists {
                abort(StoreError::SystemRoleCount)
            } else {
                Ok(())
            }
        }
        None => Ok(()),
    }
}

fn guard_role_delete(views: &Views<'_>, org: OrgId, role: RoleId) -> TxResult<()> {
    match stored_role(views, org, role)? {
        Some(existing) if existing.is_immutable => abort(StoreError::RoleImmutable),
        Some(existing) if existing.is_system => abort(StoreError::SystemRole),
        _ => Ok(()),
    }
}
