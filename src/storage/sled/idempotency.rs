//! Idempotency keys on sled. Answers are kept in one tree: written in the
//! transaction of the change they answer where the route records them so
//! ([`crate::domain::change::Write::KeyAnswer`]), else on their own here,
//! and flushed before the request is answered either way. Claims of
//! requests running now are kept in memory only: one process has the data
//! directory, and a claim lost in a crash is one that lapsed (the retry
//! runs), which is what a written one would become. So a keyed request
//! costs one write more than an unkeyed one, not two.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

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
}

impl SledStore {
    /// See [`crate::storage::Store::idempotency_begin`].
    pub fn idempotency_begin(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Begin, StoreError> {
        let answered = self.read(|engine| {
            engine
                .tree(TreeName::Idempotency)
                .get(scope)
                .map_err(StoreError::engine)
        })?;
        if let Some(bytes) = answered {
            let record: KeyRecord = decode(&bytes)?;
            if record.live(now) {
                return Ok(record.verdict(&fingerprint, now));
            }
        }
        let mut running = self
            .claims
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(record) = running.get(&scope).filter(|record| record.live(now)) {
            return Ok(record.verdict(&fingerprint, now));
        }
        if running.len() >= SWEEP_PAST {
            running.retain(|_, record| record.live(now));
        }
        running.insert(scope, KeyRecord::running(fingerprint, until));
        Ok(Begin::Run)
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
        let mut running = self
            .claims
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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
