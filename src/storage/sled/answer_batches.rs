//! The answers of one group commit's keyed requests, stored as one record
//! per second of expiry ([`TreeName::AnswerBatches`]) with the prefixes of
//! their scopes beside it ([`TreeName::AnswerBatchIndex`], read at open).
//! A round of the group commit carries about ten keyed creates in a burst:
//! written one by one, their answers' inserts were about two thirds of
//! what a key cost on sled (BENCHMARKS.md). Where each answer went is
//! noted in [`super::answered::AnsweredScopes`] once the batch is written,
//! before its request is answered.
//!
//! - A batch: a format byte, then for each answer its scope (32 bytes),
//!   the length of its record (u32, big-endian) and the record.
//! - Its index entry: a format byte, then the first 8 bytes of each scope.
//! - Both keyed by the second of expiry, then the batch's number (each
//!   u32, big-endian): purged by second, like the answers on their own.

use ::sled::transaction::{TransactionalTree, UnabortableTransactionError};

use super::keys::TreeName;
use crate::storage::StoreError;

/// The format byte of both values.
const FORMAT: u8 = 1;

/// Where among the answers of its second of expiry a scope's is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The second (since the epoch) it expires.
    pub second: u32,
    /// The batch of the commit that wrote it ([`TreeName::AnswerBatches`]),
    /// or [`ALONE`]: on its own in [`TreeName::AnswersByExpiry`], or not
    /// written yet.
    pub batch: u32,
}

/// [`Place::batch`] of an answer stored on its own.
pub const ALONE: u32 = 0;

/// An answer of a commit: its second of expiry, its scope, its encoded
/// record.
pub type Answer<'a> = (u32, &'a [u8; 32], &'a [u8]);

/// The batches of one commit: one per second of expiry among its answers.
#[derive(Debug, Default)]
pub struct Batches {
    batches: Vec<Batch>,
}

#[derive(Debug)]
struct Batch {
    place: Place,
    scopes: Vec<[u8; 32]>,
    value: Vec<u8>,
    index: Vec<u8>,
}

impl Batches {
    /// The batches of `answers`, each numbered by `number`.
    pub fn of<'a>(
        answers: impl IntoIterator<Item = Answer<'a>>,
        mut number: impl FnMut() -> u32,
    ) -> Self {
        let mut batches: Vec<Batch> = Vec::new();
        for (second, scope, record) in answers {
            let batch = match batches.iter_mut().position(|b| b.place.second == second) {
                Some(at) => &mut batches[at],
                None => {
                    batches.push(Batch {
                        place: Place {
                            second,
                            batch: number(),
                        },
                        scopes: Vec::new(),
                        value: vec![FORMAT],
                        index: vec![FORMAT],
                    });
                    let last = batches.len() - 1;
                    &mut batches[last]
                }
            };
            batch.scopes.push(*scope);
            batch.value.extend_from_slice(scope);
            let length = u32::try_from(record.len()).unwrap_or(u32::MAX);
            batch.value.extend_from_slice(&length.to_be_bytes());
            batch.value.extend_from_slice(record);
            batch.index.extend_from_slice(&scope[..8]);
        }
        Batches { batches }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The trees they are written to (none if there are none).
    pub fn trees(&self) -> impl Iterator<Item = TreeName> + Clone {
        let any = !self.is_empty();
        [TreeName::AnswerBatches, TreeName::AnswerBatchIndex]
            .into_iter()
            .filter(move |_| any)
    }

    /// Writes them, in the commit's transaction, to the views of
    /// [`TreeName::AnswerBatches`] and [`TreeName::AnswerBatchIndex`].
    pub fn write(
        &self,
        batches: &TransactionalTree,
        index: &TransactionalTree,
    ) -> Result<(), UnabortableTransactionError> {
        for batch in &self.batches {
            let key = key(batch.place);
            batches.insert(&key[..], batch.value.as_slice())?;
            index.insert(&key[..], batch.index.as_slice())?;
        }
        Ok(())
    }

    /// Each batch's place and scopes: where lookups are to go once the
    /// transaction is committed.
    pub fn places(&self) -> impl Iterator<Item = (Place, &[[u8; 32]])> {
        self.batches
            .iter()
            .map(|batch| (batch.place, batch.scopes.as_slice()))
    }
}

/// The key of the batch at `place`.
pub fn key(place: Place) -> [u8; 8] {
    let mut key = [0; 8];
    key[..4].copy_from_slice(&place.second.to_be_bytes());
    key[4..].copy_from_slice(&place.batch.to_be_bytes());
    key
}

/// The place a batch's key names.
pub fn place_of(key: &[u8]) -> Option<Place> {
    let (second, batch) = key.split_at_checked(4)?;
    Some(Place {
        second: u32::from_be_bytes(second.try_into().ok()?),
        batch: u32::from_be_bytes(batch.try_into().ok()?),
    })
}

/// The scope prefixes of an index entry (none if its format is unknown).
pub fn prefixes(index: &[u8]) -> impl Iterator<Item = [u8; 8]> + '_ {
    let listed = match index.split_first() {
        Some((&FORMAT, listed)) => listed,
        _ => &[],
    };
    listed
        .chunks_exact(8)
        .filter_map(|prefix| prefix.try_into().ok())
}

/// The record of `scope` in the batch `value`, if it holds one.
pub fn find<'v>(value: &'v [u8], scope: &[u8; 32]) -> Result<Option<&'v [u8]>, StoreError> {
    let mut rest = match value.split_first() {
        Some((&FORMAT, rest)) => rest,
        _ => return Err(StoreError::codec(Malformed)),
    };
    while !rest.is_empty() {
        let (head, after) = rest.split_at_checked(36).ok_or_else(malformed)?;
        let length = u32::from_be_bytes(head[32..].try_into().map_err(|_| malformed())?);
        let (record, after) = after
            .split_at_checked(length as usize)
            .ok_or_else(malformed)?;
        if head[..32] == scope[..] {
            return Ok(Some(record));
        }
        rest = after;
    }
    Ok(None)
}

/// A batch of answers that does not read back.
#[derive(Debug, thiserror::Error)]
#[error("a batch of idempotency answers is malformed")]
struct Malformed;

fn malformed() -> StoreError {
    StoreError::codec(Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commits_answers_make_one_batch_per_second_and_each_is_found_in_its_own() {
        let scopes = [[1; 32], [2; 32], [3; 32]];
        let answers = [
            (100, &scopes[0], &b"one"[..]),
            (100, &scopes[1], &b""[..]),
            (101, &scopes[2], &b"three"[..]),
        ];
        let mut numbers = 0;
        let mut number = || {
            numbers += 1;
            numbers
        };
        let batches = Batches::of(answers, &mut number);
        let places: Vec<Place> = batches.batches.iter().map(|b| b.place).collect();
        assert_eq!(
            places,
            [
                Place {
                    second: 100,
                    batch: 1
                },
                Place {
                    second: 101,
                    batch: 2
                }
            ]
        );
        let first = &batches.batches[0];
        assert_eq!(find(&first.value, &[1; 32]).ok(), Some(Some(&b"one"[..])));
        assert_eq!(find(&first.value, &[2; 32]).ok(), Some(Some(&b""[..])));
        assert_eq!(find(&first.value, &[3; 32]).ok(), Some(None));
        let second = &batches.batches[1];
        assert_eq!(
            find(&second.value, &[3; 32]).ok(),
            Some(Some(&b"three"[..]))
        );
        assert_eq!(prefixes(&first.index).collect::<Vec<_>>(), [[1; 8], [2; 8]]);
        assert_eq!(place_of(&key(places[1])), Some(places[1]));
        assert!(find(&first.value[..first.value.len() - 1], &[9; 32]).is_err());
        assert_eq!(batches.trees().count(), 2);
        assert_eq!(Batches::of([], number).trees().count(), 0);
    }
}
