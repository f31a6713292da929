//! Recovery after a subscriber's outage (`POST …/webhook/recover`): one new
//! delivery for every event whose last attempt in a window failed and that
//! has not been delivered since, nor is queued now.
//!
//! An event is known by its envelope: a redelivery and a recovery send the
//! envelope bytes of the delivery they repeat, so every delivery of one
//! event shares them, whatever its delivery id.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, PoisonError, Weak};

use crate::domain::delivery::{Job, LogRecord, Outcome};
use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::ids::{LogId, OrgId};
use crate::storage::{LogFilter, Store};
use crate::time::Timestamp;

/// Log records read per page.
const PAGE: usize = 500;

/// `[since, until)`, by when the attempt started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// First instant in the window.
    pub since: Timestamp,
    /// First instant after it.
    pub until: Timestamp,
}

impl Window {
    fn holds(self, at: Timestamp) -> bool {
        self.since <= at && at < self.until
    }
}

/// One lock per organization with a recovery running on this node: two
/// recoveries of one organization run one after the other, so that they
/// never both queue what neither saw queued, while other organizations'
/// do not wait for them. An entry lives as long as its lock is held or
/// awaited.
static RUNNING: std::sync::Mutex<BTreeMap<OrgId, Weak<tokio::sync::Mutex<()>>>> =
    std::sync::Mutex::new(BTreeMap::new());

/// Holds `org`'s recovery lock; dropping it lets the next recovery of
/// `org` begin.
pub type Running = tokio::sync::OwnedMutexGuard<()>;

/// `org`'s recovery lock, shared by every recovery of it in progress.
fn lock_of(org: OrgId) -> Arc<tokio::sync::Mutex<()>> {
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(lock) = running.get(&org).and_then(Weak::upgrade) {
        return lock;
    }
    running.retain(|_, lock| lock.strong_count() > 0);
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    running.insert(org, Arc::downgrade(&lock));
    lock
}

/// The new deliveries that recover `org`'s failures in `window`, oldest
/// failure first. 400 when the window reaches past what the delivery log
/// keeps (`retention` records per organization). Hold the returned guard
/// until the jobs are committed.
pub async fn recover(
    store: &Store,
    org: OrgId,
    window: Window,
    retention: usize,
) -> Result<(Vec<Job>, Running), ApiError> {
    let running = lock_of(org).lock_owned().await;
    let records = records_since(store, org, window.since, retention).await?;
    let mut chosen = select(&records, window);
    if !chosen.is_empty() {
        leave_out_queued(store, org, &mut chosen).await?;
    }
    Ok((chosen.into_iter().map(Job::redelivery).collect(), running))
}

/// Every log record of `org` made since `since`, newest first.
async fn records_since(
    store: &Store,
    org: OrgId,
    since: Timestamp,
    retention: usize,
) -> Result<Vec<LogRecord>, ApiError> {
    let mut records = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .delivery_log_page(org, before, PAGE, LogFilter::default())
            .await?;
        let more = page.more && !page.items.is_empty();
        let mut reached_since = false;
        for record in page.items {
            // Ids are time-ordered and made when the attempt ended: an id
            // older than `since` ends the window and everything after it.
            if made_at(record.id) < since {
                reached_since = true;
                break;
            }
            before = Some(record.id);
            records.push(record);
        }
        if reached_since {
            return Ok(records);
        }
        if !more {
            break;
        }
    }
    if records.len() >= retention {
        let oldest = records.last().map_or(since, |r| r.attempted_at);
        return Err(ApiError::invalid(
            "since",
            format!(
                "the delivery log keeps the newest {retention} records of an organization, \
                 and the oldest kept is from {}: recover from then on",
                oldest.to_rfc3339()
            ),
        ));
    }
    Ok(records)
}

/// When a log id was made (the milliseconds of its UUID v7).
fn made_at(id: LogId) -> Timestamp {
    Timestamp(id.unix_ms())
}

/// Leaves out of `chosen` the events queued now: `org`'s unfinished
/// deliveries are read a page at a time and compared with the chosen
/// envelopes (memory bounded by those, not by the backlog), until none is
/// left to find.
async fn leave_out_queued(
    store: &Store,
    org: OrgId,
    chosen: &mut Vec<&LogRecord>,
) -> Result<(), ApiError> {
    let mut wanted: HashSet<&[u8]> = chosen.iter().map(|r| r.envelope.as_slice()).collect();
    let mut queued = HashSet::new();
    let mut after = None;
    loop {
        let jobs = store.outbox_after(org, after, PAGE).await?;
        let done = jobs.len() < PAGE;
        after = jobs.last().map(|job| job.delivery_id);
        for job in &jobs {
            if let Some(envelope) = wanted.take(job.body.as_slice()) {
                queued.insert(envelope);
            }
        }
        if done || wanted.is_empty() {
            break;
        }
    }
    chosen.retain(|record| !queued.contains(record.envelope.as_slice()));
    Ok(())
}

/// Of `records` (one organization's, since the window began), the last
/// failed attempt (or skip while the endpoint was disabled) of each event
/// that failed in `window` and has not succeeded since; oldest first.
/// Events skipped for not being subscribed, and webhook tests, are never
/// recovered.
pub fn select(records: &[LogRecord], window: Window) -> Vec<&LogRecord> {
    #[derive(Default)]
    struct Event<'a> {
        failed: Option<&'a LogRecord>,
        succeeded_at: Option<Timestamp>,
    }
    let mut events: HashMap<&[u8], Event<'_>> = HashMap::new();
    for record in records {
        if record.event == EventKind::TestPreflight.id() {
            continue;
        }
        let event = events.entry(record.envelope.as_slice()).or_default();
        match record.outcome {
            Outcome::Succeeded => {
                event.succeeded_at = event.succeeded_at.max(Some(record.attempted_at));
            }
            // An event skipped because the endpoint was disabled is one
            // that was never sent: it is recovered like a failure.
            Outcome::Failed | Outcome::Skipped
                if window.holds(record.attempted_at) && record.not_sent() =>
            {
                if event
                    .failed
                    .is_none_or(|last| last.attempted_at < record.attempted_at)
                {
                    event.failed = Some(record);
                }
            }
            Outcome::Failed | Outcome::Skipped => {}
        }
    }
    let mut chosen: Vec<&LogRecord> = events
        .into_values()
        .filter_map(|event| {
            let failed = event.failed?;
            let delivered_since = event
                .succeeded_at
                .is_some_and(|at| at >= failed.attempted_at);
            (!delivered_since).then_some(failed)
        })
        .collect();
    chosen.sort_by_key(|record| (record.attempted_at, record.id));
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::delivery::AttemptOutcome;
    use crate::ids::DeliveryId;

    const ORG: OrgId = OrgId(uuid::Uuid::nil());

    fn attempt(envelope: &str, attempt: u8, status: u16, at: i64) -> LogRecord {
        let outcome = AttemptOutcome::Unanswered {
            error: String::new(),
            latency_ms: 1,
            started_at: Timestamp(at),
        };
        let mut record = LogRecord::of_attempt(
            ORG,
            DeliveryId::generate(),
            "task.created",
            attempt,
            &outcome,
            envelope.as_bytes().to_vec(),
        );
        if (200..300).contains(&status) {
            record.outcome = Outcome::Succeeded;
        }
        record
    }

    fn window(since: i64, until: i64) -> Window {
        Window {
            since: Timestamp(since),
            until: Timestamp(until),
        }
    }

    fn envelopes(chosen: &[&LogRecord]) -> Vec<String> {
        chosen
            .iter()
            .map(|r| String::from_utf8_lossy(&r.envelope).into_owned())
            .collect()
    }

    #[test]
    fn failures_in_the_window_are_recovered_once_each_oldest_first() {
        let records = vec![
            attempt("b", 2, 500, 30),
            attempt("b", 1, 500, 28),
            attempt("a", 1, 500, 20),
            attempt("late", 1, 500, 100),
            attempt("early", 1, 500, 5),
        ];
        let chosen = select(&records, window(10, 50));
        assert_eq!(envelopes(&chosen), ["a", "b"]);
        assert_eq!(chosen[1].attempted_at, Timestamp(30), "b's last attempt");
    }

    #[test]
    fn delivered_since_skipped_and_tests_are_left_out() {
        let mut skipped = attempt("skipped", 1, 500, 20);
        skipped.outcome = Outcome::Skipped;
        let mut test = attempt("test", 1, 500, 20);
        test.event = "test.preflight".into();
        let records = vec![
            attempt("redelivered", 1, 200, 60),
            attempt("redelivered", 2, 500, 20),
            attempt("failed again", 1, 500, 40),
            attempt("failed again", 1, 200, 30),
            skipped,
            test,
        ];
        let chosen = select(&records, window(10, 50));
        assert_eq!(envelopes(&chosen), ["failed again"]);
    }

    #[test]
    fn recoveries_share_a_lock_per_organization_only() {
        let (a, b) = (OrgId::generate(), OrgId::generate());
        let first = lock_of(a);
        assert!(
            Arc::ptr_eq(&first, &lock_of(a)),
            "one lock per organization"
        );
        assert!(!Arc::ptr_eq(&first, &lock_of(b)), "another organization's");
        let held = first.clone().try_lock_owned();
        assert!(held.is_ok());
        assert!(lock_of(b).try_lock_owned().is_ok(), "b does not wait for a");
        assert!(
            lock_of(a).try_lock_owned().is_err(),
            "a second recovery of a waits"
        );
        drop((held, first));
        // No lock of a is left: a new one is made, and the entry is gone.
        assert!(lock_of(a).try_lock_owned().is_ok());
    }

    #[test]
    fn a_log_id_tells_when_it_was_made() {
        let before = Timestamp::now();
        let made = made_at(LogId::generate());
        assert!(made >= before && made <= Timestamp::now());
    }
}
