//! Group commit: concurrent writers share one transaction and one flush.
//!
//! Every sled transaction seals the log buffer twice (`pin_log`), and each
//! seal is a `pwrite` + `sync_file_range` on sled's I/O pool, whose
//! `notify_all` wakes all seven of its threads. One transaction per request
//! therefore cost more CPU than the request itself. So a request hands its
//! row operations here ([`GroupCommit::commit`]), encoded already on its
//! own thread, and one thread applies everyone's gathered since its last
//! round in one transaction, flushes once, and answers each. Writers that committed on their own and only need
//! durability ask for it with [`GroupCommit::durable`].
//!
//! The thread first waits a short window to gather more writers (like
//! PostgreSQL's `commit_delay`): without it a burst averaged 5 writers a
//! flush; with 1 ms, 9 to 14. The price is up to that window of latency on
//! every durable write.

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use tokio::sync::oneshot;

use super::write::{commit_to, Op};
use crate::storage::StoreError;

/// Why a flush failed: one cause shared by every writer of the round.
type FlushFailure = Arc<dyn std::error::Error + Send + Sync>;
type FlushWaiter = oneshot::Sender<Result<(), FlushFailure>>;
type CommitWaiter = oneshot::Sender<Result<(), StoreError>>;

enum Request {
    /// Make everything committed so far durable.
    Durable(FlushWaiter),
    /// Commit these writes atomically, then make them durable.
    Commit(Vec<Op>, CommitWaiter),
}

/// Handle to the committing thread.
#[derive(Clone)]
pub struct GroupCommit {
    requests: mpsc::Sender<Request>,
    /// The thread, joined by [`GroupCommit::stop`].
    thread: Arc<Mutex<Option<thread::JoinHandle<()>>>>,
}

impl GroupCommit {
    /// Starts the committing thread for `db` and its `trees`. It ends when
    /// every handle is dropped.
    pub fn start(
        db: ::sled::Db,
        trees: Vec<::sled::Tree>,
        window: Duration,
    ) -> std::io::Result<Self> {
        let (requests, inbox) = mpsc::channel::<Request>();
        let thread = thread::Builder::new()
            .name("rolecall-commit".into())
            .spawn(move || {
                while let Ok(first) = inbox.recv() {
                    if !window.is_zero() {
                        thread::sleep(window);
                    }
                    let round: Vec<Request> =
                        std::iter::once(first).chain(inbox.try_iter()).collect();
                    run_round(&db, &trees, round);
                }
            })?;
        Ok(Self {
            requests,
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// Ends the thread (once this is the last handle) and waits for it, so
    /// the database it holds is released.
    pub fn stop(self) {
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(self.requests);
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Resolves once everything committed before this call is on disk.
    pub async fn durable(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send(Request::Durable(tx))
            .map_err(|_| StoreError::Closed)?;
        rx.await
            .map_err(|_| StoreError::Closed)?
            .map_err(StoreError::Flush)
    }

    /// Applies `ops` atomically (in a transaction shared with other
    /// callers' operations) and makes them durable.
    pub async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send(Request::Commit(ops, tx))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

/// One round: every commit in one transaction, one flush, then the answers.
fn run_round(db: &::sled::Db, trees: &[::sled::Tree], round: Vec<Request>) {
    let mut flush_waiters = Vec::new();
    let mut commits = Vec::new();
    for request in round {
        match request {
            Request::Durable(waiter) => flush_waiters.push(waiter),
            Request::Commit(writes, waiter) => commits.push((writes, waiter)),
        }
    }
    let committed = commit_all(trees, &commits);
    let flushed = db
        .flush()
        .map(|_| ())
        .map_err(|err| -> FlushFailure { Arc::new(err) });
    if let Err(err) = &flushed {
        tracing::error!(error = %err, "storage flush failed");
    }
    for ((_, waiter), result) in commits.into_iter().zip(committed) {
        let answer = match (result, &flushed) {
            (Err(err), _) => Err(err),
            (Ok(()), Err(err)) => Err(StoreError::Flush(err.clone())),
            (Ok(()), Ok(())) => Ok(()),
        };
        let _ = waiter.send(answer);
    }
    for waiter in flush_waiters {
        let _ = waiter.send(flushed.clone());
    }
}

/// Commits every request's writes in one transaction. If that fails (one
/// request broke a rule), each request is committed on its own instead, so
/// only the offending one fails.
fn commit_all(
    trees: &[::sled::Tree],
    commits: &[(Vec<Op>, CommitWaiter)],
) -> Vec<Result<(), StoreError>> {
    let together = commits.iter().flat_map(|(ops, _)| ops.iter());
    match commit_to(trees, together) {
        Ok(()) => commits.iter().map(|_| Ok(())).collect(),
        Err(err) if commits.len() == 1 => vec![Err(err)],
        Err(_) => commits
            .iter()
            .map(|(ops, _)| commit_to(trees, ops.iter()))
            .collect(),
    }
}
