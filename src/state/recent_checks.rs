//! The organizations' revisions as this node last read them from a store
//! that several nodes share, and when it asked: a delivery attempt reuses a
//! read asked less than [`REUSE`] ago instead of making its own (one round
//! trip to the database per attempt, and the attempt's latency). Requests'
//! checks are noted too, so an attempt that follows its event's request by
//! a few milliseconds usually makes no read of its own.
//!
//! Why that keeps CONTRACT §8's promise, "a rotated secret is dead on every
//! node for every attempt that starts after the rotate answer": a change
//! of the endpoint (save, rotate, delete) made on a shared store answers
//! only [`ENDPOINT_CHANGE_WAIT`] after its commit, twice [`REUSE`]. An
//! attempt that starts after that answer reuses only a read asked at most
//! [`REUSE`] before it, so after the commit; and a statement asked after a
//! commit sees it, whoever asked it (a request joins only a batch of checks
//! not sent yet). (Each node measures its own interval on its monotonic
//! clock; clocks' rates differ by far less than the factor of two.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ids::OrgId;

/// How old a read an attempt may reuse.
pub const REUSE: Duration = Duration::from_millis(50);

/// How long a change of an organization's endpoint, on a shared store,
/// waits after its commit before it answers.
pub const ENDPOINT_CHANGE_WAIT: Duration = Duration::from_millis(2 * 50);

/// Reads kept past this many are swept of those too old to reuse.
const SWEEP_PAST: usize = 4096;

/// The last read of each organization's revision.
#[derive(Debug, Default)]
pub struct RecentChecks {
    reads: Mutex<HashMap<OrgId, (Instant, u64)>>,
}

impl RecentChecks {
    /// `org`'s revision as read by a statement asked less than [`REUSE`]
    /// before `now`, if there is one.
    pub fn revision(&self, org: OrgId, now: Instant) -> Option<u64> {
        let reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        let (asked, revision) = reads.get(&org)?;
        (now.saturating_duration_since(*asked) < REUSE).then_some(*revision)
    }

    /// A statement asked at `asked` read `org` at `revision`. An older
    /// read does not replace a newer one.
    pub fn note(&self, org: OrgId, asked: Instant, revision: u64) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        if reads.len() >= SWEEP_PAST {
            reads.retain(|_, (at, _)| at.elapsed() < REUSE);
        }
        let read = reads.entry(org).or_insert((asked, revision));
        if asked >= read.0 {
            *read = (asked, revision);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_reused_only_while_younger_than_the_window() {
        let checks = RecentChecks::default();
        let org = OrgId::generate();
        let asked = Instant::now();
        assert_eq!(checks.revision(org, asked), None, "never read");
        checks.note(org, asked, 7);
        assert_eq!(checks.revision(org, asked), Some(7));
        assert_eq!(checks.revision(org, asked + REUSE / 2), Some(7));
        assert_eq!(checks.revision(org, asked + REUSE), None, "too old");
        assert_eq!(
            checks.revision(OrgId::generate(), asked),
            None,
            "another org"
        );
    }

    #[test]
    fn a_later_read_wins_and_an_earlier_one_does_not_replace_it() {
        let checks = RecentChecks::default();
        let org = OrgId::generate();
        let first = Instant::now();
        let later = first + Duration::from_millis(10);
        checks.note(org, later, 9);
        checks.note(org, first, 8);
        assert_eq!(checks.revision(org, later), Some(9));
        checks.note(org, later + Duration::from_millis(1), 10);
        assert_eq!(checks.revision(org, later), Some(10));
    }

    #[test]
    fn a_change_waits_twice_the_reuse() {
        assert_eq!(ENDPOINT_CHANGE_WAIT, REUSE * 2);
    }
}
