//! Which delivery-log records get an entry by delivery id
//! ([`TreeName::DeliveryIds`](super::keys::TreeName::DeliveryIds)).
//!
//! A lookup by delivery id ([`Engine::find_delivery`](super::engine::Engine))
//! probes the entries, then reads the log forward from the instant the
//! delivery was queued (its id is a UUID v7, and its records are made
//! after it), examining at most [`SCAN_LIMIT`] records. So a record needs
//! an entry only when many of its organization's records may already lie
//! between that instant and itself: an attempt made long after its event
//! (a backlog, a retry in a busy organization, a delivery queued before
//! this process started). In a burst, attempts follow their events by
//! milliseconds and no entry is written: an entry for every record cost a
//! tenth of the burst's throughput (BENCHMARKS.md).
//!
//! To tell, each organization's records are counted as they are written,
//! by the 10 ms slot of their ids, over the last minute. A record written
//! out of order counts in the newest slot, which only counts it for more
//! deliveries than it belongs after: the count errs high, never low. The
//! threshold is a quarter of the lookup's bound, leaving the rest for
//! records made before a record but written after it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::ids::OrgId;
use crate::storage::SCAN_LIMIT;

/// Records counted together.
const SLOT_MS: i64 = 10;
/// How long counts are kept: a delivery queued longer ago than this gets
/// an entry for each of its records.
const WINDOW_MS: i64 = 60_000;
/// From this many records of the organization made since its delivery was
/// queued, a record gets an entry.
pub const THRESHOLD: u64 = (SCAN_LIMIT / 4) as u64;
/// Shards of the counts, so that writers rarely wait on one lock.
const SHARDS: usize = 16;
/// Organizations a shard holds before idle ones are dropped.
const SHARD_SOFT_LIMIT: usize = 1024;

/// Each organization's records of the last minute, counted by slot.
pub struct LateRecords {
    shards: Vec<Mutex<Shard>>,
}

#[derive(Default)]
struct Shard {
    orgs: HashMap<OrgId, Counts>,
    /// The size at which idle organizations are next dropped.
    sweep_at: usize,
}

/// One organization's counts.
struct Counts {
    /// Every record made from this instant (ms) on and written by this
    /// process is counted.
    counted_from: i64,
    /// (slot, records counted up to the end of it), oldest first.
    slots: VecDeque<(i64, u64)>,
    /// Records counted before the first slot kept.
    before: u64,
}

impl Counts {
    fn new(now_ms: i64) -> Self {
        Counts {
            counted_from: now_ms,
            slots: VecDeque::new(),
            before: 0,
        }
    }

    fn total(&self) -> u64 {
        self.slots.back().map_or(self.before, |(_, total)| *total)
    }

    /// Counts a record made at `made_ms`, in its slot or a newer one.
    fn add(&mut self, made_ms: i64) {
        let slot = made_ms.div_euclid(SLOT_MS);
        let total = self.total() + 1;
        match self.slots.back_mut() {
            Some((newest, counted)) if *newest >= slot => *counted = total,
            _ => self.slots.push_back((slot, total)),
        }
    }

    /// Forgets the slots older than the window.
    fn trim(&mut self, now_ms: i64) {
        let oldest = (now_ms - WINDOW_MS).div_euclid(SLOT_MS);
        while let Some(&(slot, counted)) = self.slots.front() {
            if slot >= oldest {
                break;
            }
            self.slots.pop_front();
            self.before = counted;
            self.counted_from = self.counted_from.max((slot + 1) * SLOT_MS);
        }
    }

    /// Records counted in the slot of `since_ms` and after it (so perhaps
    /// a few made just before it).
    fn since(&self, since_ms: i64) -> u64 {
        let slot = since_ms.div_euclid(SLOT_MS);
        let first = self.slots.partition_point(|(s, _)| *s < slot);
        let before = match first {
            0 => self.before,
            i => self.slots[i - 1].1,
        };
        self.total() - before
    }
}

impl LateRecords {
    /// No record counted yet.
    pub fn new() -> Self {
        LateRecords {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// Counts a record of `org` made at `made_ms` for a delivery queued at
    /// `queued_ms`, being written at `now_ms`; answers whether it needs an
    /// entry by delivery id.
    pub fn needs_entry(&self, org: OrgId, queued_ms: i64, made_ms: i64, now_ms: i64) -> bool {
        let mut shard = self.shards[shard_of(&org)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if shard.orgs.len() >= shard.sweep_at.max(SHARD_SOFT_LIMIT)
            && !shard.orgs.contains_key(&org)
        {
            let oldest = (now_ms - WINDOW_MS).div_euclid(SLOT_MS);
            shard
                .orgs
                .retain(|_, counts| counts.slots.back().is_some_and(|(s, _)| *s >= oldest));
            shard.sweep_at = shard.orgs.len() * 2;
        }
        let counts = shard.orgs.entry(org).or_insert_with(|| Counts::new(now_ms));
        counts.add(made_ms);
        counts.trim(now_ms);
        queued_ms < counts.counted_from || counts.since(queued_ms) >= THRESHOLD
    }
}

impl Default for LateRecords {
    fn default() -> Self {
        LateRecords::new()
    }
}

/// The shard that counts `org`'s records.
fn shard_of(org: &OrgId) -> usize {
    (org.as_bytes()[15] as usize) % SHARDS
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORG: OrgId = OrgId(uuid::Uuid::nil());

    #[test]
    fn a_record_soon_after_its_delivery_needs_no_entry() {
        let late = LateRecords::new();
        let start = 1_000_000;
        // The first record of an organization this process writes: its
        // delivery may have been queued before counting began.
        assert!(late.needs_entry(ORG, start - 5, start - 1, start));
        // From then on, records right after their deliveries need none.
        for n in 2..100 {
            let at = start + n;
            assert!(!late.needs_entry(ORG, at - 2, at, at), "record {n}");
        }
    }

    #[test]
    fn a_record_behind_many_others_needs_one() {
        let late = LateRecords::new();
        let start = 5_000_000;
        late.needs_entry(ORG, start, start, start);
        let queued = start + 100;
        // THRESHOLD - 1 records of other deliveries since `queued` (and one
        // before it, which does not count)...
        late.needs_entry(ORG, start, start + 50, start + 50);
        for n in 0..THRESHOLD as i64 - 1 {
            let at = queued + 20 + n;
            assert!(!late.needs_entry(ORG, at, at, at));
        }
        // ... and this delivery's own is the THRESHOLD-th: it needs an entry;
        // a delivery queued after them all does not.
        let now = queued + 20 + THRESHOLD as i64;
        assert!(late.needs_entry(ORG, queued, now, now));
        assert!(!late.needs_entry(ORG, now, now + 1, now + 1));
    }

    #[test]
    fn records_written_out_of_order_count_high() {
        let mut counts = Counts::new(0);
        counts.add(1_000);
        counts.add(500); // made earlier, written later: counted at 1,000
        assert_eq!(counts.since(600), 2);
        assert_eq!(counts.since(1_000), 2);
        assert_eq!(counts.since(1_010), 0);
    }

    #[test]
    fn past_the_window_every_record_needs_an_entry() {
        let late = LateRecords::new();
        let start = 9_000_000;
        late.needs_entry(ORG, start, start, start);
        let later = start + WINDOW_MS + 1_000;
        // Queued within a slot the counts no longer keep.
        assert!(late.needs_entry(ORG, start + 5, later, later));
        // A delivery within the window is judged by its count.
        assert!(!late.needs_entry(ORG, later - 100, later + 1, later + 1));
    }

    #[test]
    fn organizations_are_counted_apart_and_idle_ones_dropped() {
        let late = LateRecords::new();
        let now = 20_000_000;
        let orgs: Vec<OrgId> = (0..(SHARD_SOFT_LIMIT * SHARDS * 2))
            .map(|_| OrgId::generate())
            .collect();
        for org in &orgs {
            late.needs_entry(*org, now, now, now);
        }
        // A minute later, new organizations push the idle ones out.
        let later = now + WINDOW_MS + SLOT_MS;
        for _ in 0..(SHARD_SOFT_LIMIT * SHARDS * 2) {
            late.needs_entry(OrgId::generate(), later, later, later);
        }
        let held: usize = late
            .shards
            .iter()
            .map(|s| s.lock().map(|s| s.orgs.len()).unwrap_or(0))
            .sum();
        assert!(held <= SHARD_SOFT_LIMIT * SHARDS * 3, "{held} held");
        // Whether the new organizations pushed `orgs[0]`'s own shard past
        // its next sweep depends on where the random ids fell: push that
        // shard until it sweeps (at most twice its size), so the test does
        // not depend on them.
        let target = shard_of(&orgs[0]);
        let still_held = || {
            late.shards[target]
                .lock()
                .map(|s| s.orgs.contains_key(&orgs[0]))
                .unwrap_or(false)
        };
        for _ in 0..(SHARD_SOFT_LIMIT * 8) {
            if !still_held() {
                break;
            }
            let org = std::iter::repeat_with(OrgId::generate)
                .find(|org| shard_of(org) == target)
                .unwrap_or_else(OrgId::generate);
            late.needs_entry(org, later, later, later);
        }
        assert!(!still_held(), "an idle organization is dropped");
        // A dropped organization starts over: a record of a delivery queued
        // before then needs an entry.
        assert!(late.needs_entry(orgs[0], later - 1_000, later, later));
    }

    #[test]
    fn ids_tell_when_they_were_made_and_where_that_instant_starts() {
        use crate::ids::LogId;
        let id = LogId::generate();
        let ms = id.unix_ms();
        assert!(LogId::first_at(ms) <= id);
        assert!(LogId::first_at(ms + 1) > id);
        assert_eq!(LogId::first_at(ms).unix_ms(), ms);
    }
}
