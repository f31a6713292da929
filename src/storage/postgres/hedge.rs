//! A read asked again on another connection each time a while passes
//! without an answer; the first answer wins.
//!
//! The per-request checks run one query at a time (see `checks`), so one
//! check on a connection that went silent without a word (a network fault,
//! a proxy that keeps its side open) held up every request and delivery
//! attempt of the node until the statement timeout, and then answered them
//! all 503. A read changes nothing, so asking it again is safe; a healthy
//! database answers it in milliseconds, so a second ask goes out only when
//! something is wrong, and a third only when the second was unlucky too
//! (under connection faults, a second ask also landed on a silent
//! connection now and then, and its requests answered 503).

use std::future::Future;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::storage::StoreError;

/// Most asks of one read at once: each holds a connection until its own
/// end, so a database slow for everyone (not silent) gets at most this many
/// times the reads.
const MOST_ASKS: usize = 3;

/// Runs `read` as a task of its own, and once more beside the others each
/// time `after` passes without an answer (at most [`MOST_ASKS`] in all),
/// until `within` has passed since the first: answers the first success;
/// an error once `within` has passed, or when every ask failed. A read that failed with no other
/// ask running (its connection closed under it, say) is asked once more at
/// once. Asks still running at the end run to their own end, which drops
/// their connection when they time out, instead of handing a silent
/// connection back to the pool.
pub async fn first_answer<T, F, Fut>(
    after: Duration,
    within: Duration,
    read: F,
) -> Result<T, StoreError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    T: Send + 'static,
{
    let deadline = Instant::now() + within;
    let mut asks = FuturesUnordered::new();
    asks.push(tokio::spawn(read()));
    let mut next = Instant::now() + after;
    let mut asked = 1;
    let mut asked_again_at_once = false;
    loop {
        tokio::select! {
            Some(answer) = asks.next() => match joined(answer) {
                Ok(value) => return Ok(value),
                Err(err) if asks.is_empty() => {
                    if asked_again_at_once || Instant::now() >= deadline {
                        return Err(err);
                    }
                    tracing::debug!(error = %err, "a read failed; asking it once more");
                    asked_again_at_once = true;
                    asked += 1;
                    asks.push(tokio::spawn(read()));
                    next = Instant::now() + after;
                }
                Err(_) => {}
            },
            () = tokio::time::sleep_until(next), if next < deadline && asked < MOST_ASKS => {
                tracing::debug!(
                    after_ms = after.as_millis() as u64,
                    "a read went unanswered; asking it again on another connection"
                );
                asked += 1;
                asks.push(tokio::spawn(read()));
                next += after;
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(super::error::timed_out("a read"));
            }
        }
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
    const WITHIN: Duration = Duration::from_millis(175);

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
        assert_eq!(first_answer(AFTER, WITHIN, read).await.ok(), Some(0));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_gone_silent_is_answered_by_the_second_ask() {
        let (asked, read) = reads(&[Some(60_000), Some(10)]);
        assert_eq!(first_answer(AFTER, WITHIN, read).await.ok(), Some(1));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_ask_gone_silent_too_is_answered_by_a_third() {
        let (asked, read) = reads(&[Some(60_000), Some(60_000), Some(10)]);
        let started = tokio::time::Instant::now();
        assert_eq!(first_answer(AFTER, WITHIN, read).await.ok(), Some(2));
        assert_eq!(asked.load(Ordering::SeqCst), 3);
        assert_eq!(started.elapsed(), 2 * AFTER + Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_ask_still_wins_when_it_answers_first() {
        let (_, read) = reads(&[Some(70), Some(1_000)]);
        assert_eq!(first_answer(AFTER, WITHIN, read).await.ok(), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_ask_leaves_the_others_and_none_answering_in_time_fails_in_time() {
        let (_, read) = reads(&[Some(70), None]);
        assert_eq!(first_answer(AFTER, WITHIN, read).await.ok(), Some(0));
        let silent = &[Some(60_000); 8];
        let (asked, read) = reads(silent);
        let started = tokio::time::Instant::now();
        assert!(first_answer(AFTER, WITHIN, read).await.is_err());
        assert_eq!(started.elapsed(), WITHIN, "no later than within");
        assert_eq!(
            asked.load(Ordering::SeqCst),
            MOST_ASKS,
            "one ask per AFTER, at most MOST_ASKS"
        );
        let (_, read) = reads(&[None, None]);
        assert!(first_answer(AFTER, WITHIN, read).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_failed_at_once_is_asked_once_more() {
        let (asked, read) = reads(&[None, Some(0)]);
        assert_eq!(first_answer(AFTER, WITHIN, read).await.ok(), Some(1));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        let (asked, read) = reads(&[None, None, Some(0)]);
        assert!(
            first_answer(AFTER, WITHIN, read).await.is_err(),
            "not a third time at once"
        );
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }
}
