//! Handed jobs a read took before their notification came. A commit on
//! another node hands this node new jobs in a notification, their rows
//! marked for it; a read that takes such rows (after a notification was
//! not taken, or lost while the listening connection was cut) may find
//! rows whose own notification is still on its way. When it comes, the
//! job may be finished already, so it is no longer held, and holding it
//! again would deliver it twice. The ids such reads returned are kept for
//! a while, and their notification is ignored.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::ids::DeliveryId;

/// How long a notification may trail the read that took its jobs: far
/// beyond the listening connection's delay under load.
const KEPT_FOR: Duration = Duration::from_secs(10);
/// At most this many ids are kept (the oldest go first): reads that take
/// handed rows are rare, one per notification not taken.
const KEPT_AT_MOST: usize = 100_000;

/// Ids of handed jobs reads took, for a while.
#[derive(Debug, Default)]
pub struct ReadFirst {
    ids: HashSet<DeliveryId>,
    order: VecDeque<(Instant, DeliveryId)>,
}

impl ReadFirst {
    /// A read that takes handed rows returned `ids` at `now`.
    pub fn taken(&mut self, ids: impl IntoIterator<Item = DeliveryId>, now: Instant) {
        self.expire(now);
        for id in ids {
            if self.ids.insert(id) {
                self.order.push_back((now, id));
            }
        }
        while self.order.len() > KEPT_AT_MOST {
            if let Some((_, id)) = self.order.pop_front() {
                self.ids.remove(&id);
            }
        }
    }

    /// Whether a read took `id` already: its notification is then late,
    /// and is ignored (once).
    pub fn read_already(&mut self, id: DeliveryId, now: Instant) -> bool {
        self.expire(now);
        self.ids.remove(&id)
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, id)) = self.order.front().copied() {
            if now.saturating_duration_since(at) <= KEPT_FOR {
                break;
            }
            self.order.pop_front();
            self.ids.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_notification_of_a_job_read_first_is_ignored_once_and_for_a_while() {
        let (read, other, old) = (
            DeliveryId::generate(),
            DeliveryId::generate(),
            DeliveryId::generate(),
        );
        let start = Instant::now();
        let mut first = ReadFirst::default();
        first.taken([old], start);
        first.taken([read], start + Duration::from_secs(30));
        assert!(!first.read_already(other, start), "never read: held");
        let later = start + KEPT_FOR + Duration::from_secs(1);
        assert!(!first.read_already(old, later), "kept no longer");
        assert!(first.read_already(read, later));
        assert!(!first.read_already(read, later), "ignored once");
    }
}
