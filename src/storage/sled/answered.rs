//! Where an idempotency scope's live answer may be stored, kept in memory:
//! answers are stored by the second they expire
//! ([`TreeName::AnswersByExpiry`]), so that each lands among the answers
//! of its second, not anywhere in the tree, and this table says which
//! second to look under. It also spares a key never seen before (nearly
//! every keyed request) any lookup in sled: that lookup cost about 6 % of
//! a keyed burst's events/s (BENCHMARKS.md).
//!
//! - A scope is noted, with the second its answer would expire, when a
//!   request claims it, before anything can be written under it; and when
//!   the database is opened, from the keys of the stored answers (no value
//!   is read).
//! - An answer's expiry is fixed at its claim (claim time plus the TTL), so
//!   it is live only while its noted second has not passed: a scope whose
//!   entry is missing or past has no live answer there, and nothing need be
//!   removed when answers are purged.
//! - Entries are keyed by the first 8 bytes of the scope (a SHA-256): the
//!   later of two scopes that share them replaces the earlier's second, as
//!   when one scope is claimed again, and a retry of the earlier one runs
//!   again. By chance that is one in 2^64 / n; on purpose, only a client
//!   grinding its own keys can do it (a scope hashes the token, which no
//!   one else has), to itself.
//! - An answer committed with its change through the group commit lands
//!   in that commit's batch ([`super::answer_batches`]): once the batch is
//!   written, its number is noted with the scope's second
//!   ([`AnsweredScopes::placed`]), before the request is answered.
//! - An answer whose scope could not be noted (past [`MOST`] entries) is
//!   stored under its scope alone ([`TreeName::Idempotency`]), where those
//!   of earlier versions are too; that tree is asked until the last of
//!   them has expired.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use super::answer_batches::{Place, ALONE};

use super::answer_batches;
use super::codec::decode;
use super::engine::Engine;
use super::keys::TreeName;
use crate::domain::idempotency::{KeyRecord, KeyState};
use crate::time::Timestamp;

/// Most scopes kept (a table of 2^20 slots of 17 bytes, about 18 MiB):
/// past it, a scope is not noted, its answer is stored under its scope,
/// and that tree is asked until the answer could have expired.
pub const MOST: usize = 900_000;
/// A full table is swept of past entries at most once this many seconds.
const FULL_SWEEP_EVERY: u32 = 60;

/// Where a scope's live answer may be stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lookups {
    /// Here, among the answers of its second of expiry.
    pub expiring: Option<Place>,
    /// Under the scope alone in [`TreeName::Idempotency`].
    pub by_scope: bool,
}

/// The scopes, by the first 8 bytes of their SHA-256.
#[derive(Debug)]
pub struct AnsweredScopes {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Where each scope's answer is stored, by the second it expires.
    places: HashMap<[u8; 8], Place>,
    /// Until then (milliseconds since the epoch), some live answer may be
    /// stored under its scope alone.
    by_scope_until: i64,
    /// Size at which past entries are next dropped.
    sweep_at: usize,
    /// The second of the last drop: a full table is swept at most once
    /// every [`FULL_SWEEP_EVERY`] seconds.
    swept: u32,
    /// Most entries kept ([`MOST`]).
    most: usize,
    /// The number of the last batch of answers written (or read at open).
    last_batch: u32,
}

impl Default for AnsweredScopes {
    fn default() -> Self {
        Self::keeping(MOST)
    }
}

fn prefix(scope: &[u8; 32]) -> [u8; 8] {
    let mut prefix = [0; 8];
    prefix.copy_from_slice(&scope[..8]);
    prefix
}

/// The second since the epoch of `at` (0 before it, `u32::MAX` in 2106).
pub fn second(at: Timestamp) -> u32 {
    u32::try_from(at.millis().div_euclid(1000).max(0)).unwrap_or(u32::MAX)
}

impl AnsweredScopes {
    /// None yet, keeping at most `most`.
    fn keeping(most: usize) -> Self {
        AnsweredScopes {
            state: Mutex::new(State {
                places: HashMap::new(),
                by_scope_until: i64::MIN,
                sweep_at: 1024.min(most),
                swept: 0,
                most,
                last_batch: ALONE,
            }),
        }
    }

    /// The table of what `engine` stores at `now`: the keys of the answers
    /// by expiry from `now` on, the scopes of the batches from `now` on,
    /// and the latest expiry of the answers by scope.
    pub fn read(engine: &Engine, now: Timestamp) -> Result<Self, sled::Error> {
        let scopes = Self::default();
        let mut state = scopes.lock();
        let from = second(now).to_be_bytes();
        for key in engine.tree(TreeName::AnswersByExpiry).range(from..).keys() {
            let key = key?;
            let Some((expires, scope)) = key.split_at_checked(4) else {
                continue;
            };
            if let (Ok(expires), Ok(scope)) = (<[u8; 4]>::try_from(expires), scope.try_into()) {
                let place = Place {
                    second: u32::from_be_bytes(expires),
                    batch: ALONE,
                };
                state.note(prefix(scope), place, second(now));
            }
        }
        for entry in engine.tree(TreeName::AnswerBatchIndex).iter() {
            let (key, prefixes) = entry?;
            let Some(place) = answer_batches::place_of(&key) else {
                continue;
            };
            state.last_batch = state.last_batch.max(place.batch);
            for prefix in answer_batches::prefixes(&prefixes) {
                state.note(prefix, place, second(now));
            }
        }
        let mut latest = i64::MIN;
        for value in engine.tree(TreeName::Idempotency).iter().values() {
            if let Ok(KeyRecord {
                state: KeyState::Answered { expires, .. },
                ..
            }) = decode::<KeyRecord>(&value?)
            {
                latest = latest.max(expires);
            }
        }
        state.by_scope_until = latest;
        drop(state);
        Ok(scopes)
    }

    /// Where the live answer of `scope` at `now` may be stored.
    pub fn lookups(&self, scope: &[u8; 32], now: Timestamp) -> Lookups {
        let state = self.lock();
        Lookups {
            expiring: state
                .places
                .get(&prefix(scope))
                .copied()
                .filter(|place| place.second >= second(now)),
            by_scope: now.millis() < state.by_scope_until,
        }
    }

    /// Whether an answer of `scope` that expires at `expires` is to be
    /// stored in [`TreeName::AnswersByExpiry`], where lookups find it. If
    /// not (its claim could not be noted, or a later claim of the scope
    /// took its entry), it is stored under its scope alone, and lookups go
    /// there too until it expires.
    pub fn by_expiry(&self, scope: &[u8; 32], expires: Timestamp) -> bool {
        let mut state = self.lock();
        let noted = state
            .places
            .get(&prefix(scope))
            .is_some_and(|place| place.second == second(expires));
        if !noted {
            state.by_scope_until = state.by_scope_until.max(expires.millis());
        }
        noted
    }

    /// `scope` may get an answer that expires at `expires`: noted before
    /// anything is written under it (if there is room: else its answer is
    /// stored by scope, see [`AnsweredScopes::by_expiry`]).
    pub fn note(&self, scope: &[u8; 32], expires: Timestamp, now: Timestamp) {
        let place = Place {
            second: second(expires),
            batch: ALONE,
        };
        self.lock().note(prefix(scope), place, second(now));
    }

    /// The number of the next batch of answers: never one a live batch
    /// has (numbers go on from the highest stored at open; a number comes
    /// round again only after 2^32 batches, long after its second).
    pub fn next_batch(&self) -> u32 {
        let mut state = self.lock();
        state.last_batch = state.last_batch.wrapping_add(1).max(ALONE + 1);
        state.last_batch
    }

    /// The answers of `scopes`, expiring at `expires` (a second), are
    /// written in `batch`: lookups go there from now on. A scope noted
    /// since under another second (claimed again, or another scope of the
    /// same prefix) keeps that one.
    pub fn placed<'s>(
        &self,
        scopes: impl IntoIterator<Item = &'s [u8; 32]>,
        expires: u32,
        batch: u32,
    ) {
        let mut state = self.lock();
        for scope in scopes {
            if let Some(place) = state.places.get_mut(&prefix(scope)) {
                if place.second == expires {
                    place.batch = batch;
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn note(&mut self, prefix: [u8; 8], place: Place, now: u32) {
        if place.second < now {
            return;
        }
        let full = self.places.len() >= self.most;
        let swept_lately = now.saturating_sub(self.swept) < FULL_SWEEP_EVERY;
        if self.places.len() >= self.sweep_at && !(full && swept_lately) {
            self.places.retain(|_, place| place.second >= now);
            self.swept = now;
            self.sweep_at = (self.places.len() * 2).clamp(1024.min(self.most), self.most);
        }
        if self.places.len() >= self.most && !self.places.contains_key(&prefix) {
            return;
        }
        self.places.insert(prefix, place);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(n: u8) -> [u8; 32] {
        let mut scope = [0; 32];
        scope[0] = n;
        scope[31] = 0xff;
        scope
    }

    #[test]
    fn the_table_of_the_most_scopes_stays_within_its_slots() {
        let mut places: HashMap<[u8; 8], Place> = HashMap::new();
        places.reserve(MOST);
        assert!(places.capacity() < 1 << 20, "{}", places.capacity());
        assert_eq!(std::mem::size_of::<([u8; 8], Place)>(), 16);
    }

    fn at(second: i64, ms: i64) -> Timestamp {
        Timestamp(second * 1000 + ms)
    }

    fn expiring(second: u32) -> Lookups {
        Lookups {
            expiring: Some(Place {
                second,
                batch: ALONE,
            }),
            by_scope: false,
        }
    }

    #[test]
    fn a_noted_scope_is_looked_up_under_its_second_until_that_second_is_past() {
        let scopes = AnsweredScopes::default();
        let claimed = at(100_000, 300);
        assert_eq!(scopes.lookups(&scope(1), claimed), Lookups::default());
        scopes.note(&scope(1), at(186_400, 300), claimed);
        assert!(scopes.by_expiry(&scope(1), at(186_400, 999)));
        assert_eq!(scopes.lookups(&scope(1), claimed), expiring(186_400));
        assert_eq!(
            scopes.lookups(&scope(1), at(186_400, 999)),
            expiring(186_400),
            "within its second"
        );
        assert_eq!(
            scopes.lookups(&scope(1), at(186_401, 0)),
            Lookups::default(),
            "past"
        );
        assert_eq!(scopes.lookups(&scope(2), claimed), Lookups::default());
        // An answer expired already is not noted, nor stored by scope.
        scopes.note(&scope(3), at(99_000, 0), claimed);
        assert_eq!(scopes.lookups(&scope(3), at(99_000, 0)), Lookups::default());
        // Claimed again (its first request failed): the new second.
        scopes.note(&scope(1), at(186_500, 0), at(100_100, 0));
        assert_eq!(scopes.lookups(&scope(1), claimed), expiring(186_500));
        // The first request's answer, written late, is stored by scope,
        // and looked up there until it expires.
        assert!(!scopes.by_expiry(&scope(1), at(186_400, 300)));
        let both = Lookups {
            expiring: expiring(186_500).expiring,
            by_scope: true,
        };
        assert_eq!(scopes.lookups(&scope(1), at(186_400, 299)), both);
        assert_eq!(
            scopes.lookups(&scope(1), at(186_400, 300)),
            expiring(186_500)
        );
    }

    #[test]
    fn past_the_most_a_scope_is_stored_by_scope_and_looked_up_so_until_it_expires() {
        let scopes = AnsweredScopes::keeping(4);
        let now = at(100_000, 0);
        for n in 1..=4 {
            scopes.note(&scope(n), at(110_000, 0), now);
        }
        assert_eq!(scopes.lookups(&scope(9), now), Lookups::default());
        scopes.note(&scope(5), at(120_000, 15), now);
        assert!(!scopes.by_expiry(&scope(5), at(120_000, 15)), "not noted");
        let by_scope = Lookups {
            expiring: None,
            by_scope: true,
        };
        assert_eq!(scopes.lookups(&scope(9), now), by_scope);
        assert_eq!(scopes.lookups(&scope(9), at(120_000, 14)), by_scope);
        // Full: refused without sweeping the table again soon after.
        scopes.note(&scope(7), at(110_000, 0), at(100_030, 0));
        let state = scopes.lock();
        assert_eq!((state.places.len(), state.swept), (4, 100_000));
        drop(state);
        // Once the unnoted answer is past, and the others with it, no
        // lookup goes by scope, and room is made again.
        let later = at(120_000, 16);
        assert_eq!(scopes.lookups(&scope(9), later), Lookups::default());
        scopes.note(&scope(6), at(140_000, 0), later);
        assert_eq!(scopes.lookups(&scope(6), later), expiring(140_000));
        assert_eq!(scopes.lookups(&scope(1), later), Lookups::default());
        assert_eq!(
            scopes.lock().places.len(),
            1,
            "the past entries were dropped"
        );
    }
}
