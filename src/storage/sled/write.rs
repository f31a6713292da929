//! Writes: how each domain [`Write`] becomes rows of sled trees, inside one
//! transaction covering only the trees the writes touch (so writers of
//! unrelated trees do not contend). The Owner/Member rules of seed 2.4 are
//! enforced here, inside the transaction, so no code path can alter Owner
//! or delete Member.

use ::sled::transaction::{
    ConflictableTransactionError, TransactionError, TransactionalTree, UnabortableTransactionError,
};
use ::sled::Transactional;

use super::codec::{decode, encode};
use super::keys::{self, TreeName};
use crate::domain::change::Write;
use crate::domain::names::fold;
use crate::domain::org_state::Edit;
use crate::domain::role::Role;
use crate::ids::{OrgId, RoleId};
use crate::storage::StoreError;

/// What a transaction body returns.
pub type TxResult<T> = Result<T, ConflictableTransactionError<StoreError>>;

fn abort<T>(err: StoreError) -> TxResult<T> {
    Err(ConflictableTransactionError::Abort(err))
}

fn enc<T: serde::Serialize + ?Sized>(value: &T) -> TxResult<Vec<u8>> {
    encode(value).map_err(ConflictableTransactionError::Abort)
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

/// The trees a write reads or writes.
fn trees_of(write: &Write) -> &'static [TreeName] {
    use TreeName::*;
    match write {
        Write::Edit(Edit::PutOrg(_)) => &[Orgs],
        Write::Edit(Edit::PutRole(_) | Edit::DeleteRole(..)) => &[Roles, Orgs],
        Write::Edit(Edit::PutMember(_) | Edit::DeleteMember(..)) => &[Members],
        Write::Edit(Edit::PutWebhook(_) | Edit::DeleteWebhook(_)) => &[Webhooks],
        Write::PutUser(_) => &[Users, UserEmails],
        Write::PutToken(_) | Write::DeleteToken(_) => &[Tokens, TokenIds],
        Write::Audit(_) => &[Audit],
        Write::PutJob(_) | Write::DeleteJob(_) => &[Outbox],
        Write::Log(_) => &[DeliveryLog],
        Write::PutResource(..) | Write::DeleteResource(..) => &[Resources],
        Write::AdminToken(_) => &[Meta],
    }
}

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

/// Lifts a failed read inside a transaction.
pub fn lift_read<E>(err: UnabortableTransactionError) -> ConflictableTransactionError<Aborted<E>> {
    lift(err.into())
}

/// Applies `writes` to `trees` in one transaction covering the trees they touch.
pub fn commit_to<'w>(
    trees: &[::sled::Tree],
    writes: impl Iterator<Item = &'w Write> + Clone,
) -> Result<(), StoreError> {
    let names = writes.clone().flat_map(trees_of).copied();
    if names.clone().next().is_none() {
        return Ok(());
    }
    transaction(trees, names, |views| {
        for write in writes.clone() {
            apply(views, write).map_err(lift::<StoreError>)?;
        }
        Ok(())
    })
    .map_err(Aborted::into_error)
}

/// Applies one write inside a transaction.
pub fn apply(views: &Views<'_>, write: &Write) -> TxResult<()> {
    match write {
        Write::Edit(edit) => apply_edit(views, edit),
        Write::PutUser(user) => {
            views
                .tree(TreeName::Users)?
                .insert(user.id.as_bytes().as_slice(), enc(user)?)?;
            views
                .tree(TreeName::UserEmails)?
                .insert(fold(&user.email).as_bytes(), user.id.as_bytes().as_slice())?;
            Ok(())
        }
        Write::PutToken(token) => {
            views
                .tree(TreeName::Tokens)?
                .insert(token.sha256.as_slice(), enc(token)?)?;
            views
                .tree(TreeName::TokenIds)?
                .insert(keys::token_id(token.id).as_slice(), token.sha256.as_slice())?;
            Ok(())
        }
        Write::DeleteToken(token) => {
            views
                .tree(TreeName::Tokens)?
                .remove(token.sha256.as_slice())?;
            views
                .tree(TreeName::TokenIds)?
                .remove(keys::token_id(token.id).as_slice())?;
            Ok(())
        }
        Write::Audit(record) => {
            let key = keys::audit(record.organization_id, record.id);
            views
                .tree(TreeName::Audit)?
                .insert(key.as_slice(), enc(record)?)?;
            Ok(())
        }
        Write::PutJob(job) => {
            views
                .tree(TreeName::Outbox)?
                .insert(job.delivery_id.as_bytes().as_slice(), enc(job)?)?;
            Ok(())
        }
        Write::DeleteJob(id) => {
            views
                .tree(TreeName::Outbox)?
                .remove(id.as_bytes().as_slice())?;
            Ok(())
        }
        Write::Log(record) => {
            let key = keys::delivery_log(record.organization_id, record.id);
            views
                .tree(TreeName::DeliveryLog)?
                .insert(key.as_slice(), enc(record)?)?;
            Ok(())
        }
        Write::PutResource(org, value) => {
            let key = keys::resource(*org, value.kind(), value.id());
            views
                .tree(TreeName::Resources)?
                .insert(key.as_slice(), enc(value)?)?;
            Ok(())
        }
        Write::DeleteResource(org, kind, id) => {
            let key = keys::resource(*org, *kind, *id);
            views.tree(TreeName::Resources)?.remove(key.as_slice())?;
            Ok(())
        }
        Write::AdminToken(hash) => {
            views
                .tree(TreeName::Meta)?
                .insert(keys::ADMIN_TOKEN_SHA256, hash.as_slice())?;
            Ok(())
        }
    }
}

fn apply_edit(views: &Views<'_>, edit: &Edit) -> TxResult<()> {
    match edit {
        Edit::PutOrg(org) => {
            views
                .tree(TreeName::Orgs)?
                .insert(org.id.as_bytes().as_slice(), enc(org)?)?;
        }
        Edit::PutRole(role) => {
            guard_role_put(views, role)?;
            let key = keys::role(role.organization_id, role.id);
            views
                .tree(TreeName::Roles)?
                .insert(key.as_slice(), enc(role)?)?;
        }
        Edit::DeleteRole(org, role) => {
            guard_role_delete(views, *org, *role)?;
            views
                .tree(TreeName::Roles)?
                .remove(keys::role(*org, *role).as_slice())?;
        }
        Edit::PutMember(member) => {
            let key = keys::member(member.organization_id, member.user_id);
            views
                .tree(TreeName::Members)?
                .insert(key.as_slice(), enc(member)?)?;
        }
        Edit::DeleteMember(org, user) => {
            views
                .tree(TreeName::Members)?
                .remove(keys::member(*org, *user).as_slice())?;
        }
        Edit::PutWebhook(endpoint) => {
            let key = endpoint.organization_id.as_bytes().as_slice();
            views
                .tree(TreeName::Webhooks)?
                .insert(key, enc(endpoint)?)?;
        }
        Edit::DeleteWebhook(org) => {
            views
                .tree(TreeName::Webhooks)?
                .remove(org.as_bytes().as_slice())?;
        }
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
