//! Which server process serves each pooled connection. A commit whose
//! answer was lost may still be running, or its bytes may still be on
//! their way: while its server process lives, it can commit later. Ended
//! ([`super::lost_commits`]), its transaction is over, and what it wrote,
//! or did not, is final.
//!
//! Each connection asks once, when it is made, for its process id and
//! start time (the pair names the process even after its id is reused).

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use deadpool_postgres::{ClientWrapper, Hook, StatementCache};

/// One server process: its id and when it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backend {
    pub pid: i32,
    pub started: SystemTime,
}

/// The server process of each live connection of a pool, known by the
/// connection's statement cache, which lives as long as it does.
#[derive(Default)]
pub struct Backends {
    known: Mutex<Known<StatementCache>>,
}

impl Backends {
    /// The server process serving the connection whose statement cache is
    /// `cache` (`client.statement_cache`), if it told.
    pub fn of(&self, cache: &Arc<StatementCache>) -> Option<Backend> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.of(cache)
    }

    /// The pool hook that asks each new connection for its server process,
    /// waiting `within` for the answer. A connection that cannot tell (no
    /// answer in time, or a server that does not show its processes to this
    /// role) is handed out all the same, its process unknown: a commit of
    /// it whose answer is lost is then only looked for.
    pub fn hook(self: &Arc<Self>, within: Duration) -> Hook {
        let backends = self.clone();
        Hook::async_fn(move |client: &mut ClientWrapper, _| {
            let backends = backends.clone();
            Box::pin(async move {
                let asked = client.query_opt(
                    "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()",
                    &[],
                );
                let told = tokio::time::timeout(within, asked).await.ok();
                let backend = told.and_then(Result::ok).flatten().and_then(|row| {
                    Some(Backend {
                        pid: row.try_get(0).ok()?,
                        started: row.try_get(1).ok()?,
                    })
                });
                match backend {
                    Some(backend) => backends
                        .known
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .add(&client.statement_cache, backend),
                    None => tracing::debug!(
                        "a new PostgreSQL connection did not tell its server process"
                    ),
                }
                Ok(())
            })
        })
    }
}

/// Values known by an object that lives elsewhere, while it lives.
struct Known<T> {
    entries: Vec<(Weak<T>, Backend)>,
}

impl<T> Default for Known<T> {
    fn default() -> Self {
        Known {
            entries: Vec::new(),
        }
    }
}

impl<T> Known<T> {
    /// The backend known by `object`.
    fn of(&self, object: &Arc<T>) -> Option<Backend> {
        self.entries
            .iter()
            .find(|(known, _)| std::ptr::eq(known.as_ptr(), Arc::as_ptr(object)))
            .map(|(_, backend)| *backend)
    }

    /// Records `backend` by `object`, forgetting the objects gone since.
    fn add(&mut self, object: &Arc<T>, backend: Backend) {
        self.entries.retain(|(object, _)| object.strong_count() > 0);
        self.entries.push((Arc::downgrade(object), backend));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_known_while_it_lives_and_forgotten_after() {
        let mut known = Known::default();
        let (first, second) = (Arc::new(1u8), Arc::new(2u8));
        let backend = |pid| Backend {
            pid,
            started: SystemTime::UNIX_EPOCH,
        };
        known.add(&first, backend(1));
        known.add(&second, backend(2));
        let pid = |known: &Known<u8>, object: &Arc<u8>| known.of(object).map(|b| b.pid);
        assert_eq!(pid(&known, &first), Some(1));
        assert_eq!(pid(&known, &second), Some(2));
        drop(first);
        let third = Arc::new(3u8);
        known.add(&third, backend(3));
        assert_eq!(known.entries.len(), 2, "the gone one forgotten");
        assert_eq!(pid(&known, &second), Some(2));
        assert_eq!(pid(&known, &third), Some(3));
    }
}
