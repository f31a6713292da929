//! Reads of waiting jobs whose answer was lost. A read marks the outbox
//! rows it takes with the holder's epoch and its own number; when its
//! answer does not come back (the connection cut while it ran), the rows
//! it may have marked are in no node's memory, and the holder's next reads
//! take them again by that number. A number is kept for a while after its
//! read failed, since the statement may still be finishing on the server.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a failed read's number is taken again: well beyond any
/// statement timeout, after which the server has ended the statement.
const KEPT_FOR: Duration = Duration::from_secs(60);
/// At most this many numbers are kept (the oldest go first): a lease whose
/// rows are left marked is released once idle, and its rows read again by
/// the next holder.
const KEPT_AT_MOST: usize = 64;

/// This node run's read numbers and those of its reads that failed.
#[derive(Debug, Default)]
pub struct LostReads {
    next: AtomicI64,
    failed: Mutex<VecDeque<(i64, Instant)>>,
}

impl LostReads {
    /// A number for the next read, unique within this node run.
    pub fn number(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The read `number` failed at `now`: its rows are taken again.
    pub fn failed(&self, number: i64, now: Instant) {
        let mut failed = self.lock();
        failed.push_back((number, now));
        while failed.len() > KEPT_AT_MOST {
            failed.pop_front();
        }
    }

    /// The numbers whose rows reads take again at `now`.
    pub fn to_take_again(&self, now: Instant) -> Vec<i64> {
        let mut failed = self.lock();
        while failed
            .front()
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) > KEPT_FOR)
        {
            failed.pop_front();
        }
        failed.iter().map(|(number, _)| *number).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(i64, Instant)>> {
        // The list stays consistent whatever panicked while holding it.
        self.failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_distinct_and_failed_ones_are_taken_again_for_a_while() {
        let reads = LostReads::default();
        let (a, b, c) = (reads.number(), reads.number(), reads.number());
        assert!(a < b && b < c);
        let start = Instant::now();
        assert!(reads.to_take_again(start).is_empty());
        reads.failed(a, start);
        reads.failed(c, start + Duration::from_secs(30));
        assert_eq!(reads.to_take_again(start + Duration::from_secs(59)), [a, c]);
        assert_eq!(reads.to_take_again(start + Duration::from_secs(61)), [c]);
        assert!(reads
            .to_take_again(start + Duration::from_secs(91))
            .is_empty());
    }

    #[test]
    fn only_the_latest_failures_are_kept() {
        let reads = LostReads::default();
        let now = Instant::now();
        for _ in 0..KEPT_AT_MOST + 3 {
            let number = reads.number();
            reads.failed(number, now);
        }
        let kept = reads.to_take_again(now);
        assert_eq!(kept.len(), KEPT_AT_MOST);
        assert_eq!(kept[0], 4);
    }
}
