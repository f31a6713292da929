//! A pooled connection that sat unused is asked for an answer before it is
//! handed out. A network fault or a middlebox can leave a connection
//! silent with no error and no close; a statement sent on it then waits
//! out the statement timeout, and its request answers 503 although the
//! database is healthy. The keepalives find such a peer only after about
//! 25 s, and never behind a proxy that keeps its side open.
//!
//! Connections in steady use are not asked: each use would pay a round
//! trip for nothing. Once one probe goes unanswered, every connection that
//! had been sitting unused since before it is dropped without a probe of
//! its own, so that a pool silenced all at once costs one request one
//! probe, not one probe per connection.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::{Hook, HookError, Metrics};

/// A connection unused this long is asked before it is handed out.
const UNUSED_FOR: Duration = Duration::from_secs(5);

/// How long its answer may take at most (less when the statement timeout
/// is shorter). A round trip to a healthy server, even a loaded one, is
/// far shorter; a connection that takes longer is replaced, which costs a
/// connect, not an error.
const LONGEST_ANSWER: Duration = Duration::from_secs(1);

/// What to do with a connection about to be handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// In use recently: hand it out.
    Use,
    /// Unused a while: ask it first.
    Ask,
    /// Unused since before a probe went unanswered: drop it.
    Drop,
}

/// The verdict on a connection last taken at `last_taken` (or made then),
/// `now`, when the last unanswered probe was at `silence`.
fn verdict(last_taken: Instant, now: Instant, silence: Option<Instant>) -> Verdict {
    if now.saturating_duration_since(last_taken) < UNUSED_FOR {
        return Verdict::Use;
    }
    match silence {
        Some(silence) if last_taken < silence => Verdict::Drop,
        _ => Verdict::Ask,
    }
}

/// How long a probe's answer may take: [`LONGEST_ANSWER`], or the
/// statement timeout when that is shorter. The listening connection's
/// probes wait as long ([`super::listener`]).
pub fn answer_within(statement_timeout: Duration) -> Duration {
    statement_timeout.min(LONGEST_ANSWER)
}

/// The pool hook that applies [`verdict`] to each connection it hands out,
/// waiting for a probe's answer [`answer_within`] the statement timeout.
pub fn hook(statement_timeout: Duration) -> Hook {
    let answer_within = answer_within(statement_timeout);
    let silence: Arc<Mutex<Option<Instant>>> = Arc::default();
    Hook::async_fn(move |client, metrics: &Metrics| {
        let silence = silence.clone();
        let last_taken = metrics.recycled.unwrap_or(metrics.created);
        Box::pin(async move {
            let heard = *silence
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match verdict(last_taken, Instant::now(), heard) {
                Verdict::Use => Ok(()),
                Verdict::Drop => Err(HookError::message("unused since a probe went unanswered")),
                Verdict::Ask => {
                    let asked = Instant::now();
                    match tokio::time::timeout(answer_within, client.simple_query("")).await {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err(err)) => {
                            tracing::info!(error = %err, "a pooled PostgreSQL connection unused for a while failed its probe; replaced");
                            Err(HookError::Backend(err))
                        }
                        Err(_) => {
                            *silence
                                .lock()
                                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(asked);
                            tracing::warn!(
                                unused_s = asked.saturating_duration_since(last_taken).as_secs(),
                                within_ms = answer_within.as_millis(),
                                "a pooled PostgreSQL connection did not answer its probe; it and every connection unused since are replaced"
                            );
                            Err(HookError::message("no answer to the probe"))
                        }
                    }
                }
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_in_use_is_handed_out_and_one_unused_a_while_is_asked_first() {
        let now = Instant::now() + Duration::from_secs(60);
        let recent = now - Duration::from_millis(4_900);
        let idle = now - UNUSED_FOR;
        assert_eq!(verdict(recent, now, None), Verdict::Use);
        assert_eq!(verdict(idle, now, None), Verdict::Ask);
        assert_eq!(verdict(recent, now, Some(now)), Verdict::Use);
    }

    #[test]
    fn after_a_silent_probe_connections_unused_since_before_it_are_dropped_unasked() {
        let now = Instant::now() + Duration::from_secs(60);
        let silence = now - Duration::from_secs(2);
        let idle_before = silence - Duration::from_secs(10);
        let idle_since_after = silence + Duration::from_millis(1);
        let later = idle_since_after + UNUSED_FOR;
        assert_eq!(verdict(idle_before, now, Some(silence)), Verdict::Drop);
        assert_eq!(
            verdict(idle_since_after, later, Some(silence)),
            Verdict::Ask,
            "a connection taken after the silence is asked, not dropped"
        );
    }
}
