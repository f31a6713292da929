//! Idempotency keys on sled. Answers are kept by the second they expire
//! ([`super::answered`] says where to look): written in the transaction
//! of the change they answer where the route records them so
//! ([`crate::domain::change::Write::KeyAnswer`]), in a batch with the
//! others of its group commit ([`super::answer_batches`]), else after it
//! in a write of their own (a batch of one), and flushed before the
//! request is answered either way. Claims of
//! requests running now are kept in memory only: one process has the data
//! directory, and a claim lost in a crash is one that lapsed (the retry
//! runs), which is what a written one would become. So a keyed request
//! costs one write more than an unkeyed one, not two; and a key never seen
//! costs no read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::answer_batches;
use super::answered::{second, Place, ALONE};
use super::codec::decode;
use super::keys::{self, TreeName};
use super::SledStore;
use crate::domain::change::Write;
use crate::domain::idempotency::{Begin, KeyAnswer, KeyClaim, KeyRecord, StoredAnswer};
use crate::storage::StoreError;
use crate::time::Timestamp;

/// Claims past this many are swept of lapsed ones (requests whose client
/// went away before their answer).
const SWEEP_PAST: usize = 1024;

/// The claims of requests running now, by scope.
#[derive(Debug, Default)]
pub struct Claims {
    running: Mutex<HashMap<[u8; 32], KeyRecord>>,
    /// Size past which lapsed claims are next swept (at least
    /// [`SWEEP_PAST`]): twice what the last sweep left, so that thousands
    /// of requests running at once do not sweep them all on every claim.
    sweep_at: AtomicUsize,
}

impl Claims {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 32], KeyRecord>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SledStore {
    /// See [`crate::storage::Store::idempotency_begin`]. The stored answer
    /// is looked up where [`super::answered`] says there may be one, and
    /// the look and the claim are one step under the claims' lock: a
    /// request that finds neither an answer nor a claim cannot miss one
    /// its twin recorded meanwhile (that twin noted the scope when it
    /// claimed it, under the same lock).
    pub fn idempotency_begin(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        until: Timestamp,
        expires: Timestamp,
        now: Timestamp,
    ) -> Result<Begin, StoreError> {
        let mut running = self.claims.lock();
        let lookups = self.answered.lookups(&scope, now);
        let live = |record: Option<KeyRecord>| record.filter(|record| record.live(now));
        let mut stored = match lookups.expiring {
            Some(place) => live(self.answer_at(place, &scope)?),
            None => None,
        };
        if stored.is_none() && lookups.by_scope {
            stored = live(self.stored_record(TreeName::Idempotency, &scope)?);
        }
        if let Some(record) = stored {
            return Ok(record.verdict(&fingerprint, now));
        }
        if let Some(record) = running.get(&scope).filter(|record| record.live(now)) {
            return Ok(record.verdict(&fingerprint, now));
        }
        if running.len() >= self.claims.sweep_at.load(Ordering::Relaxed).max(SWEEP_PAST) {
            running.retain(|_, record| record.live(now));
            self.claims
                .sweep_at
                .store(running.len() * 2, Ordering::Relaxed);
        }
        running.insert(scope, KeyRecord::running(fingerprint, until));
        self.answered.note(&scope, expires, now);
        Ok(Begin::Run)
    }

    /// The answer of `scope` stored at `place`, if any.
    fn answer_at(&self, place: Place, scope: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        if place.batch == ALONE {
            let key = keys::answer(place.second, scope);
            return self.stored_record(TreeName::AnswersByExpiry, &key);
        }
        let key = answer_batches::key(place);
        let batch = self.read(|engine| {
            let tree = engine.tree(TreeName::AnswerBatches);
            tree.get(key).map_err(StoreError::engine)
        })?;
        match batch {
            Some(batch) => answer_batches::find(&batch, scope)?.map(decode).transpose(),
            None => Ok(None),
        }
    }

    /// The record stored in `tree` under `key`, if any.
    fn stored_record(&self, tree: TreeName, key: &[u8]) -> Result<Option<KeyRecord>, StoreError> {
        let stored = self.read(|engine| engine.tree(tree).get(key).map_err(StoreError::engine))?;
        stored.map(|bytes| decode(&bytes)).transpose()
    }

    /// See [`crate::storage::Store::idempotency_answer`]: written as the
    /// write of a change would be (where [`super::answered`] finds it), and
    /// durable when it returns.
    pub async fn idempotency_answer(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        answer: StoredAnswer,
        expires: Timestamp,
    ) -> Result<(), StoreError> {
        let write = Write::KeyAnswer(Box::new(KeyAnswer {
            scope,
            fingerprint,
            answer,
            expires,
        }));
        let written = self.append(&[write]);
        self.idempotency_answered(scope, &fingerprint);
        written?;
        self.durable().await
    }

    /// See [`crate::storage::Store::idempotency_forget`]: only while the
    /// claim is still `claim` (a request that outlived its claim does not
    /// drop the claim of a retry that took it over).
    pub fn idempotency_forget(&self, claim: KeyClaim) {
        let mut running = self.claims.lock();
        if running
            .get(&claim.scope)
            .is_some_and(|record| *record == KeyRecord::running(claim.fingerprint, claim.until))
        {
            running.remove(&claim.scope);
        }
    }

    /// See [`crate::storage::Store::idempotency_answered`]: drops the claim
    /// on `scope` if it is the request's of `fingerprint` (its answer is
    /// recorded, and lookups find that first).
    pub fn idempotency_answered(&self, scope: [u8; 32], fingerprint: &[u8; 32]) {
        let mut running = self.claims.lock();
        if running
            .get(&scope)
            .is_some_and(|record| &record.fingerprint == fingerprint)
        {
            running.remove(&scope);
        }
    }

    /// See [`crate::storage::Store::idempotency_purge`]. Answers by
    /// expiry, and their batches, are past in key order, and go without
    /// being read.
    pub fn idempotency_purge(&self, now: Timestamp, limit: usize) -> Result<usize, StoreError> {
        self.read(|engine| {
            let mut purged = 0;
            let by_expiry = [
                TreeName::AnswersByExpiry,
                TreeName::AnswerBatches,
                TreeName::AnswerBatchIndex,
            ];
            for tree in by_expiry.map(|name| engine.tree(name)) {
                for key in tree
                    .range(..second(now).to_be_bytes())
                    .keys()
                    .take(limit.saturating_sub(purged))
                {
                    tree.remove(key.map_err(StoreError::engine)?)
                        .map_err(StoreError::engine)?;
                    purged += 1;
                }
            }
            let by_scope = engine.tree(TreeName::Idempotency);
            for entry in by_scope.iter() {
                if purged >= limit {
                    break;
                }
                let (key, value) = entry.map_err(StoreError::engine)?;
                let record: KeyRecord = decode(&value)?;
                if !record.live(now)
                    && by_scope
                        .compare_and_swap(&key, Some(value), None::<&[u8]>)
                        .map_err(StoreError::engine)?
                        .is_ok()
                {
                    purged += 1;
                }
            }
            Ok(purged)
        })
    }
}
