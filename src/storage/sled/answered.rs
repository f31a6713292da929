//! Which idempotency scopes may have a live answer in the tree, kept in
//! memory so that a key never seen before (nearly every keyed request) is
//! not looked up in sled: that lookup cost about 6 % of a keyed burst's
//! events/s (BENCHMARKS.md).
//!
//! A scope is noted, with the hour its answer would expire, when a request
//! claims it, before anything can be written under it, and when the scan
//! at start finds it stored. An answer's expiry is fixed at its claim
//! (claim time plus the TTL), so an answer in the tree is live only while
//! its noted hour has not passed: a scope whose entry is missing or past
//! has no live answer, and nothing need be removed when answers are purged.
//! Until the scan is done, and for as long as a scope could not be noted
//! (past [`MOST`] entries) may still be live, every lookup goes to the tree.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::{Mutex, PoisonError, Weak};
use std::time::Duration;

use super::codec::decode;
use super::engine::{Engine, Slot};
use super::keys::TreeName;
use crate::domain::idempotency::{KeyRecord, KeyState};
use crate::time::Timestamp;

/// Most scopes kept (a table of 2^20 slots of 9 bytes, about 9 MiB): past
/// it, a scope is not noted, and the tree is asked until it could have
/// expired.
pub const MOST: usize = 900_000;
/// Scopes the scan at start reads per look at the database.
const SCAN_CHUNK: usize = 4096;
/// Wait before the scan tries again when the database is out of service.
const SCAN_RETRY: Duration = Duration::from_millis(500);
const HOUR_MS: i64 = 3_600_000;

/// The scopes, by the first 4 bytes of their SHA-256 (two scopes that
/// share them share an entry, with the later hour: a lookup too many).
#[derive(Debug)]
pub struct AnsweredScopes {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The hour (since the epoch) after which each scope's answer is past.
    hours: HashMap<u32, u32>,
    /// Whether the scan of the stored answers is still under way.
    scanning: bool,
    /// Until then, some scope not noted may have a live answer.
    incomplete_until: i64,
    /// Size at which past entries are next dropped.
    sweep_at: usize,
    /// The hour of the last drop: entries pass only when the hour turns,
    /// so a full table is swept at most once an hour.
    swept: u32,
    /// Most entries kept ([`MOST`]).
    most: usize,
}

impl Default for AnsweredScopes {
    fn default() -> Self {
        Self::keeping(MOST)
    }
}

fn prefix(scope: &[u8; 32]) -> u32 {
    u32::from_le_bytes([scope[0], scope[1], scope[2], scope[3]])
}

/// The hour since the epoch of `at` (0 before it, `u32::MAX` in 490,000
/// years).
fn hour(at: Timestamp) -> u32 {
    u32::try_from(at.millis().div_euclid(HOUR_MS).max(0)).unwrap_or(u32::MAX)
}

impl AnsweredScopes {
    /// None yet, the scan to come, keeping at most `most`.
    fn keeping(most: usize) -> Self {
        AnsweredScopes {
            state: Mutex::new(State {
                hours: HashMap::new(),
                scanning: true,
                incomplete_until: i64::MIN,
                sweep_at: 1024.min(most),
                swept: 0,
                most,
            }),
        }
    }

    /// Whether the scan is done (the entries are trusted).
    #[cfg(test)]
    pub fn scanned_all(&self) -> bool {
        !self.lock().scanning
    }

    /// Whether the tree may hold a live answer for `scope` at `now`:
    /// `false` only when it cannot.
    pub fn may_hold(&self, scope: &[u8; 32], now: Timestamp) -> bool {
        let state = self.lock();
        state.scanning
            || now.millis() < state.incomplete_until
            || state
                .hours
                .get(&prefix(scope))
                .is_some_and(|&last| last >= hour(now))
    }

    /// `scope` may get an answer that expires at `expires`: noted before
    /// anything is written under it.
    pub fn note(&self, scope: &[u8; 32], expires: Timestamp, now: Timestamp) {
        self.lock().note(prefix(scope), expires, now);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The scan is over: from now on the entries are trusted.
    fn scanned(&self) {
        self.lock().scanning = false;
    }

    /// Reads every stored answer's scope in the background, then trusts the
    /// entries. Stops when the database closes.
    pub fn scan_in_background(self: &std::sync::Arc<Self>, slot: Weak<Slot>) {
        let scopes = self.clone();
        let spawned = std::thread::Builder::new()
            .name("rolecall-answered".into())
            .spawn(move || scopes.scan(&slot));
        if let Err(err) = spawned {
            // The entries are never trusted: every lookup asks the tree.
            tracing::warn!(error = %err, "could not start reading the stored idempotency keys; every keyed request looks its key up");
        }
    }

    fn scan(&self, slot: &Weak<Slot>) {
        let mut after = None;
        loop {
            let Some(slot) = slot.upgrade() else { return };
            match slot.current() {
                Ok(engine) => match self.scan_chunk(&engine, &mut after) {
                    Ok(true) => {
                        self.scanned();
                        return;
                    }
                    Ok(false) => continue,
                    Err(_) => {}
                },
                // Closed for good: nothing to trust the entries for.
                Err(_) if slot.is_closed() => return,
                Err(_) => {}
            }
            drop(slot);
            std::thread::sleep(SCAN_RETRY);
        }
    }

    /// Notes the scopes of up to [`SCAN_CHUNK`] stored answers after
    /// `after`, and moves it on; whether that was the last of them.
    fn scan_chunk(
        &self,
        engine: &Engine,
        after: &mut Option<Vec<u8>>,
    ) -> Result<bool, sled::Error> {
        let from = after.clone().map_or(Bound::Unbounded, Bound::Excluded);
        let now = Timestamp::now();
        let mut read = 0;
        for entry in engine
            .tree(TreeName::Idempotency)
            .range((from, Bound::Unbounded))
            .take(SCAN_CHUNK)
        {
            let (key, value) = entry?;
            read += 1;
            if let (Ok(scope), Ok(record)) = (
                <[u8; 32]>::try_from(key.as_ref()),
                decode::<KeyRecord>(&value),
            ) {
                if let KeyState::Answered { expires, .. } = record.state {
                    self.note(&scope, Timestamp(expires), now);
                }
            }
            *after = Some(key.to_vec());
        }
        Ok(read < SCAN_CHUNK)
    }
}

impl State {
    fn note(&mut self, prefix: u32, expires: Timestamp, now: Timestamp) {
        let (last, current) = (hour(expires), hour(now));
        if last < current {
            return;
        }
        let full = self.hours.len() >= self.most;
        if self.hours.len() >= self.sweep_at && !(full && self.swept == current) {
            self.hours.retain(|_, &mut last| last >= current);
            self.swept = current;
            self.sweep_at = (self.hours.len() * 2).clamp(1024.min(self.most), self.most);
        }
        if self.hours.len() >= self.most && !self.hours.contains_key(&prefix) {
            // Not noted: the tree is asked until this answer is past.
            self.incomplete_until = self.incomplete_until.max(expires.millis());
            return;
        }
        let entry = self.hours.entry(prefix).or_insert(last);
        *entry = (*entry).max(last);
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
        let mut hours: HashMap<u32, u32> = HashMap::new();
        hours.reserve(MOST);
        assert!(hours.capacity() < 1 << 20, "{}", hours.capacity());
    }

    fn at_hour(hour: i64, minute: i64) -> Timestamp {
        Timestamp(hour * HOUR_MS + minute * 60_000)
    }

    #[test]
    fn every_scope_may_be_held_until_the_scan_is_done() {
        let scopes = AnsweredScopes::default();
        let now = at_hour(100, 0);
        assert!(scopes.may_hold(&scope(1), now), "scanning: ask the tree");
        scopes.scanned();
        assert!(!scopes.may_hold(&scope(1), now), "never noted");
    }

    #[test]
    fn a_noted_scope_may_be_held_until_the_hour_of_its_expiry_is_past() {
        let scopes = AnsweredScopes::default();
        scopes.scanned();
        let claimed = at_hour(100, 30);
        scopes.note(&scope(1), at_hour(124, 30), claimed);
        assert!(scopes.may_hold(&scope(1), claimed));
        assert!(
            scopes.may_hold(&scope(1), at_hour(124, 59)),
            "within its hour"
        );
        assert!(!scopes.may_hold(&scope(1), at_hour(125, 0)), "past");
        assert!(!scopes.may_hold(&scope(2), claimed), "another scope");
        // The same scope claimed again later keeps the later expiry.
        scopes.note(&scope(1), at_hour(130, 0), at_hour(106, 0));
        scopes.note(&scope(1), at_hour(110, 0), at_hour(107, 0));
        assert!(scopes.may_hold(&scope(1), at_hour(130, 10)));
        // An answer expired already is not noted.
        scopes.note(&scope(3), at_hour(99, 0), claimed);
        assert!(!scopes.may_hold(&scope(3), at_hour(99, 0)));
    }

    #[test]
    fn past_the_most_every_scope_may_be_held_until_the_unnoted_ones_expire() {
        let scopes = AnsweredScopes::keeping(4);
        scopes.scanned();
        let now = at_hour(100, 0);
        for n in 1..=4 {
            scopes.note(&scope(n), at_hour(110, 0), now);
        }
        assert!(!scopes.may_hold(&scope(9), now));
        scopes.note(&scope(5), at_hour(120, 15), now);
        assert!(scopes.may_hold(&scope(9), now), "scope 5 was not noted");
        assert!(scopes.may_hold(&scope(9), at_hour(120, 14)));
        // Full within the hour: refused without sweeping the table again
        // (nothing in it can pass before the hour turns).
        scopes.note(&scope(7), at_hour(110, 0), at_hour(100, 30));
        let state = scopes.lock();
        assert_eq!((state.hours.len(), state.swept), (4, 100));
        drop(state);
        // Once the unnoted answer is past, and the others with it, the
        // entries are trusted and room is made again.
        let later = at_hour(120, 16);
        assert!(!scopes.may_hold(&scope(9), later));
        scopes.note(&scope(6), at_hour(140, 0), later);
        assert!(scopes.may_hold(&scope(6), later));
        assert!(!scopes.may_hold(&scope(1), later));
        assert_eq!(
            scopes.lock().hours.len(),
            1,
            "the past entries were dropped"
        );
    }
}
