//! What the log actor knows of each organization's delivery-log length,
//! and which pruning pass a log needs.
//!
//! Counting a log means reading all of it: with 10,000 records of 1 KiB
//! envelopes that took 250–480 ms, and at one count per 1,000 new records
//! it cost more CPU than the deliveries. So a log is counted once (when
//! first touched), and after that the actor counts the records it notes and
//! trims the oldest surplus without reading the rest.
//!
//! A record noted while a count runs may or may not be in that count, so it
//! is kept apart as uncertain: trims remove only what is certainly surplus
//! (never a record within the retention), and a log whose uncertain part
//! alone takes it past the threshold is counted again.
//!
//! On a queue several nodes share, an organization's log is written by
//! whichever node holds its lease, and the lease moves: what this node
//! noted is not all that was written, and trims of its own surplus let the
//! log grow towards one retention per node. There the store keeps
//! each log's count (a row of its own), so every pass is a count that
//! keeps the newest `retention` records: it reads no records, and it sees
//! every node's.

use std::collections::HashMap;

use crate::ids::OrgId;

/// A pruning pass to run for one organization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Count the log and delete all but the newest `retention` records.
    Count,
    /// Delete this many of the oldest records.
    Trim(usize),
}

#[derive(Clone, Copy, Debug, Default)]
struct Length {
    /// Records certainly in the log.
    known: usize,
    /// Records noted while a count ran.
    uncertain: usize,
}

/// Log lengths and running passes, by organization.
pub struct LogLengths {
    retention: usize,
    /// Other nodes write these logs too: every pass counts.
    shared: bool,
    lengths: HashMap<OrgId, Length>,
    running: HashMap<OrgId, Pass>,
}

impl LogLengths {
    /// Nothing known yet; logs keep `retention` records.
    pub fn new(retention: usize) -> Self {
        LogLengths {
            retention,
            shared: false,
            lengths: HashMap::new(),
            running: HashMap::new(),
        }
    }

    /// The same, for logs other nodes write too, on a store that keeps
    /// their counts: every pass counts (see the module's doc).
    pub fn shared(retention: usize) -> Self {
        LogLengths {
            shared: true,
            ..LogLengths::new(retention)
        }
    }

    /// A record of `org` was (or is about to be) written.
    pub fn noted(&mut self, org: OrgId) {
        let counting = self.running.get(&org) == Some(&Pass::Count);
        if let Some(length) = self.lengths.get_mut(&org) {
            if counting {
                length.uncertain += 1;
            } else {
                length.known += 1;
            }
        }
    }

    /// A noted record of `org` was not written after all. Taken from the
    /// known part first: erring low there only keeps a record longer.
    pub fn not_written(&mut self, org: OrgId) {
        if let Some(length) = self.lengths.get_mut(&org) {
            match length.known {
                0 => length.uncertain = length.uncertain.saturating_sub(1),
                _ => length.known -= 1,
            }
        }
    }

    /// The pass `org` needs now, if any; it counts as running until
    /// [`counted`](Self::counted), [`trimmed`](Self::trimmed) or
    /// [`failed`](Self::failed).
    pub fn start_pass(&mut self, org: OrgId) -> Option<Pass> {
        if self.running.contains_key(&org) {
            return None;
        }
        let threshold = self.retention + self.retention / 10;
        let pass = match self.lengths.get(&org) {
            None => Pass::Count,
            Some(length) if length.known + length.uncertain <= threshold => return None,
            Some(length) if length.known > self.retention && !self.shared => {
                Pass::Trim(length.known - self.retention)
            }
            Some(_) => Pass::Count,
        };
        if pass == Pass::Count {
            self.lengths.insert(org, Length::default());
        }
        self.running.insert(org, pass);
        Some(pass)
    }

    /// A count of `org` ended with `remaining` records counted and kept.
    /// Where other nodes write the log too, a shorter log is taken as full:
    /// what they add is not noted here, so this node's next pass then comes
    /// within a tenth of the retention of its own records, whatever the
    /// count was when it ran (a log first counted while nearly empty had
    /// grown to twice its retention before this node counted it again).
    pub fn counted(&mut self, org: OrgId, remaining: usize) {
        self.running.remove(&org);
        let remaining = if self.shared {
            remaining.max(self.retention)
        } else {
            remaining
        };
        self.lengths.entry(org).or_default().known += remaining;
    }

    /// A trim of `org` deleted `removed` records.
    pub fn trimmed(&mut self, org: OrgId, removed: usize) {
        self.running.remove(&org);
        if let Some(length) = self.lengths.get_mut(&org) {
            length.known = length.known.saturating_sub(removed);
        }
    }

    /// A pass of `org` failed: its length is unknown until counted again.
    pub fn failed(&mut self, org: OrgId) {
        self.running.remove(&org);
        self.lengths.remove(&org);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_counted_once_then_trimmed_by_what_is_certainly_surplus() {
        let org = OrgId::generate();
        let mut logs = LogLengths::new(100);
        logs.noted(org);
        assert_eq!(logs.start_pass(org), Some(Pass::Count));
        assert_eq!(logs.start_pass(org), None, "one pass at a time");
        // Five records arrive while the count runs: maybe counted, maybe not.
        for _ in 0..5 {
            logs.noted(org);
        }
        logs.counted(org, 100);
        // Known 100, uncertain 5: within 100 + 10.
        assert_eq!(logs.start_pass(org), None);
        for _ in 0..6 {
            logs.noted(org);
        }
        // Known 106 + uncertain 5 = 111 > 110: trim only the certain 6.
        assert_eq!(logs.start_pass(org), Some(Pass::Trim(6)));
        logs.noted(org);
        logs.trimmed(org, 6);
        assert_eq!(logs.start_pass(org), None, "101 known + 5 uncertain");
        for _ in 0..5 {
            logs.noted(org);
        }
        assert_eq!(logs.start_pass(org), Some(Pass::Trim(6)));
        logs.trimmed(org, 6);
    }

    #[test]
    fn uncertainty_alone_past_the_threshold_means_a_new_count() {
        let org = OrgId::generate();
        let mut logs = LogLengths::new(10);
        assert_eq!(logs.start_pass(org), Some(Pass::Count));
        for _ in 0..3 {
            logs.noted(org);
        }
        logs.counted(org, 9);
        assert_eq!(
            logs.start_pass(org),
            Some(Pass::Count),
            "9 + 3 > 11, none certain"
        );
        logs.counted(org, 10);
        assert_eq!(logs.start_pass(org), None);
    }

    #[test]
    fn logs_other_nodes_write_too_are_counted_at_every_pass() {
        let org = OrgId::generate();
        let mut logs = LogLengths::shared(10);
        assert_eq!(logs.start_pass(org), Some(Pass::Count));
        logs.counted(org, 10);
        for _ in 0..2 {
            logs.noted(org);
        }
        assert_eq!(
            logs.start_pass(org),
            Some(Pass::Count),
            "12 > 11: counted, not trimmed by the 2 this node wrote"
        );
        logs.counted(org, 10);
        logs.noted(org);
        assert_eq!(logs.start_pass(org), None, "11: within the threshold");
        logs.noted(org);
        assert_eq!(logs.start_pass(org), Some(Pass::Count));
        logs.counted(org, 3);
        for _ in 0..2 {
            logs.noted(org);
        }
        assert_eq!(
            logs.start_pass(org),
            Some(Pass::Count),
            "a short log is taken as full: other nodes may have written 7 more"
        );
    }

    #[test]
    fn failures_and_unwritten_records_never_lead_to_deleting_too_much() {
        let org = OrgId::generate();
        let mut logs = LogLengths::new(10);
        assert_eq!(logs.start_pass(org), Some(Pass::Count));
        logs.counted(org, 10);
        for _ in 0..3 {
            logs.noted(org);
        }
        for _ in 0..3 {
            logs.not_written(org);
        }
        assert_eq!(logs.start_pass(org), None, "still 10");
        for _ in 0..2 {
            logs.noted(org);
        }
        assert_eq!(logs.start_pass(org), Some(Pass::Trim(2)));
        logs.failed(org);
        logs.noted(org);
        assert_eq!(logs.start_pass(org), Some(Pass::Count), "unknown again");
    }
}
