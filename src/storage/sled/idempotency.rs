//! Idempotency keys on sled. Answers are kept in one tree: written in the
//! transaction of the change they answer where the route records them so
//! ([`crate::domain::change::Write::KeyAnswer`]), else on their own here,
//! and flushed before the request is answered either way. Claims of
//! requests running now are kept in memory only: one process has the data
//! directory, and a claim lost in a crash is one that lapsed (the retry
//! runs), which is what a written one would become. So a keyed request
//! costs one write more than an unkeyed one, not two; and a key never seen
//! costs no read ([`super::answered`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::codec::{decode, encode};
use super::keys::TreeName;
use super::SledStore;
use crate::domain::idempotency::{Begin, KeyRecord};
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
    /// is looked up only when [`super::answered`] says there may be one,
    /// and the look and the claim are one step under the claims' lock: a
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
        if self.answered.may_hold(&scope, now) {
            if let Some(record) = self.stored_record(scope)?.filter(|record| record.live(now)) {
                return Ok(record.verdict(&fingerprint, now));
            }
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

    /// The record stored under `scope`, if any.
    fn stored_record(&self, scope: [u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        let stored = self.read(|engine| {
            engine
                .tree(TreeName::Idempotency)
                .get(scope)
                .map_err(StoreError::engine)
        })?;
        stored.map(|bytes| decode(&bytes)).transpose()
    }

    /// See [`crate::storage::Store::idempotency_answer`]: durable when it
    /// returns.
    pub async fn idempotency_answer(
        &self,
        scope: [u8; 32],
        record: &KeyRecord,
    ) -> Result<(), StoreError> {
        let bytes = encode(record)?;
        let written = self.read(|engine| {
            engine
                .tree(TreeName::Idempotency)
                .insert(scope, bytes)
                .map(drop)
                .map_err(StoreError::engine)
        });
        self.release(scope, &record.fingerprint);
        written?;
        self.durable().await
    }

    /// See [`crate::storage::Store::idempotency_forget`].
    pub fn idempotency_forget(&self, scope: [u8; 32], fingerprint: &[u8; 32]) {
        self.release(scope, fingerprint);
    }

    /// Drops the claim on `scope` if it is the request's of `fingerprint`.
    fn release(&self, scope: [u8; 32], fingerprint: &[u8; 32]) {
        let mut running = self.claims.lock();
        if running
            .get(&scope)
            .is_some_and(|record| &record.fingerprint == fingerprint)
        {
            running.remove(&scope);
        }
    }

    /// See [`crate::storage::Store::idempotency_purge`].
    pub fn idempotency_purge(&self, now: Timestamp, limit: usize) -> Result<usize, StoreError> {
        self.read(|engine| {
            let tree = engine.tree(TreeName::Idempotency);
            let mut purged = 0;
            for entry in tree.iter() {
                if purged >= limit {
                    break;
                }
                let (key, value) = entry.map_err(StoreError::engine)?;
                let record: KeyRecord = decode(&value)?;
                if !record.live(now)
                    && tree
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
