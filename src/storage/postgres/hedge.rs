//! A read asked again on a second connection once the first has gone a
//! while without an answer; the first answer wins.
//!
//! The per-request checks run one query at a time (see `checks`), so one
//! check on a connection that went silent without a word (a network fault,
//! a proxy that keeps its side open) held up every request and delivery
//! attempt of the node until the statement timeout, and then answered them
//! all 503. A read changes nothing, so asking it twice is safe; a healthy
//! database answers it in milliseconds, so the second ask goes out only
//! when something is wrong, at most once per read.

use std::future::Future;
use std::time::Duration;

use crate::storage::StoreError;

/// Runs `read` as a task of its own; if it has not answered within
/// `after`, runs it again beside it and answers the first success (or the
/// last failure). The slower one runs to its own end, which drops its
/// connection when it times out, instead of handing a silent connection
/// back to the pool. A read that failed within `after` (its connection
/// closed under it, say) is run once more.
pub async fn first_answer<T, F, Fut>(after: Duration, read: F) -> Result<T, StoreError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    T: Send + 'static,
{
    let mut first = tokio::spawn(read());
    if let Ok(answer) = tokio::time::timeout(after, &mut first).await {
        return match joined(answer) {
            Ok(value) => Ok(value),
            Err(err) => {
                tracing::debug!(error = %err, "a read failed; asking it once more");
                joined(tokio::spawn(read()).await)
            }
        };
    }
    tracing::debug!(
        after_ms = after.as_millis() as u64,
        "a read went unanswered; asking it again on another connection"
    );
    let mut second = tokio::spawn(read());
    tokio::select! {
        answer = &mut first => match joined(answer) {
            Ok(value) => Ok(value),
            Err(_) => joined(second.await),
        },
        answer = &mut second => match joined(answer) {
            Ok(value) => Ok(value),
            Err(_) => joined(first.await),
        },
    }
}

/// A read task's answer; a task that did not finish (only when the runtime
/// is going away) is a store that did not answer.
fn joined<T>(
    answer: Result<Result<T, StoreError>, tokio::task::JoinError>,
) -> Result<T, StoreError> {
    answer.unwrap_or_else(|_| Err(super::error::timed_out("a read")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    const AFTER: Duration = Duration::from_millis(50);

    /// One ask of a test read.
    type Ask = std::pin::Pin<Box<dyn Future<Output = Result<usize, StoreError>> + Send>>;

    /// A read whose `n`th ask (from 0) takes `delays[n]`, then answers `n`
    /// (or fails, for a delay of `None`).
    fn reads(delays: &'static [Option<u64>]) -> (Arc<AtomicUsize>, impl Fn() -> Ask) {
        let asked = Arc::new(AtomicUsize::new(0));
        let count = asked.clone();
        let read = move || {
            let n = count.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                match delays[n] {
                    Some(ms) => {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Ok(n)
                    }
                    None => Err(crate::storage::postgres::error::timed_out("a test read")),
                }
            }) as Ask
        };
        (asked, read)
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_answered_in_time_is_asked_once() {
        let (asked, read) = reads(&[Some(10), Some(0)]);
        assert_eq!(first_answer(AFTER, read).await.ok(), Some(0));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_gone_silent_is_answered_by_the_second_ask() {
        let (asked, read) = reads(&[Some(60_000), Some(10)]);
        assert_eq!(first_answer(AFTER, read).await.ok(), Some(1));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_ask_still_wins_when_it_answers_first() {
        let (_, read) = reads(&[Some(70), Some(1_000)]);
        assert_eq!(first_answer(AFTER, read).await.ok(), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_second_ask_waits_for_the_first_and_both_failing_fail() {
        let (_, read) = reads(&[Some(60_000), None]);
        let started = tokio::time::Instant::now();
        assert_eq!(first_answer(AFTER, read).await.ok(), Some(0));
        assert!(started.elapsed() >= Duration::from_secs(60));
        let (_, read) = reads(&[None, None]);
        assert!(first_answer(AFTER, read).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_failed_at_once_is_asked_once_more() {
        let (asked, read) = reads(&[None, Some(0)]);
        assert_eq!(first_answer(AFTER, read).await.ok(), Some(1));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }
}
