//! Group commit: concurrent writers share one transaction and one flush.
//!
//! Every sled transaction seals the log buffer twice (`pin_log`), and each
//! seal is a `pwrite` + `sync_file_range` on sled's I/O pool, whose
//! `notify_all` wakes all seven of its threads. One transaction per request
//! therefore cost more CPU than the request itself. So a request hands its
//! row operations here ([`GroupCommit::commit`]), encoded already on its
//! own thread, and one thread applies everyone's gathered since its last
//! round in one transaction, flushes once, and answers each. Writers that
//! committed on their own and only need durability ask for it with
//! [`GroupCommit::durable`], or, when nobody waits on them (delivery
//! results), with [`GroupCommit::durable_soon`], which rides on the next
//! round others cause: a round of their own for every log batch cost about
//! 9 % more CPU per event in a burst (BENCHMARKS.md).
//!
//! The thread first waits a short window to gather more writers (like
//! PostgreSQL's `commit_delay`): without it a burst averaged 5 writers a
//! flush; with 1 ms, 9 to 14. The price is up to that window of latency on
//! every durable write.

use std::sync::mpsc::RecvTimeoutError;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::answered::AnsweredScopes;
use super::engine::{is_io_failure, Slot};
use super::room::Room;
use super::write::{commit_to, size_of, Op};
use crate::storage::StoreError;
use crate::telemetry::cause_chain;

/// Why a flush failed: one cause shared by every writer of the round.
type FlushFailure = Arc<dyn std::error::Error + Send + Sync>;
type FlushWaiter = oneshot::Sender<Result<(), FlushFailure>>;
type CommitWaiter = oneshot::Sender<Result<(), StoreError>>;

/// Longest a [`GroupCommit::durable_soon`] waits for a round that others
/// cause before the thread runs one for it.
const SOON: Duration = Duration::from_millis(20);

enum Request {
    /// Make everything committed so far durable.
    Durable(FlushWaiter),
    /// The same, with the next round, within [`SOON`].
    DurableSoon(FlushWaiter),
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
    /// Starts the committing thread for the database in `slot`. It ends
    /// when every handle is dropped.
    pub fn start(
        slot: Arc<Slot>,
        room: Room,
        answered: Arc<AnsweredScopes>,
        window: Duration,
    ) -> std::io::Result<Self> {
        let (requests, inbox) = mpsc::channel::<Request>();
        let thread = thread::Builder::new()
            .name("rolecall-commit".into())
            .spawn(move || commit_rounds(&inbox, &slot, &room, &answered, window))?;
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

    /// Asks for everything committed before this call to be made durable
    /// with the next round another writer causes, or within [`SOON`]; the
    /// answer resolves then. Asking does not wait.
    pub fn durable_soon(&self) -> impl std::future::Future<Output = Result<(), StoreError>> {
        let (tx, rx) = oneshot::channel();
        let asked = self.requests.send(Request::DurableSoon(tx));
        async move {
            asked.map_err(|_| StoreError::Closed)?;
            rx.await
                .map_err(|_| StoreError::Closed)?
                .map_err(StoreError::Flush)
        }
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

/// The committing thread: a round for each request that needs one (with
/// the requests gathered in the window after it). `DurableSoon` requests
/// wait for such a round, or for [`SOON`]. Ends when every handle is
/// dropped, after a last round for whoever still waits.
fn commit_rounds(
    inbox: &mpsc::Receiver<Request>,
    slot: &Slot,
    room: &Room,
    answered: &AnsweredScopes,
    window: Duration,
) {
    // Requests for the next round; `DurableSoon` ones only, between rounds.
    let mut next: Vec<Request> = Vec::new();
    let mut oldest_waiting = Instant::now();
    loop {
        let received = if next.is_empty() {
            inbox.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            inbox.recv_timeout(SOON.saturating_sub(oldest_waiting.elapsed()))
        };
        match received {
            Ok(request @ Request::DurableSoon(_)) => {
                if next.is_empty() {
                    oldest_waiting = Instant::now();
                }
                next.push(request);
                continue;
            }
            Ok(request) => {
                if !window.is_zero() {
                    thread::sleep(window);
                }
                next.push(request);
                next.extend(inbox.try_iter());
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                if !next.is_empty() {
                    run_round(slot, room, answered, next);
                }
                return;
            }
        }
        run_round(slot, room, answered, std::mem::take(&mut next));
    }
}

/// One round: every commit in one transaction, one flush, then the
/// answers. With no database in service, every request of the round is
/// answered so at once; without room on the disk, every commit.
fn run_round(slot: &Slot, room: &Room, answered: &AnsweredScopes, round: Vec<Request>) {
    let mut flush_waiters = Vec::new();
    let mut commits = Vec::new();
    for request in round {
        match request {
            Request::Durable(waiter) | Request::DurableSoon(waiter) => flush_waiters.push(waiter),
            Request::Commit(ops, waiter) => commits.push((ops, waiter)),
        }
    }
    let engine = match slot.current() {
        Ok(engine) => engine,
        Err(err) => {
            for (_, waiter) in commits {
                let _ = waiter.send(Err(slot.unavailable()));
            }
            let failure: FlushFailure = Arc::new(err);
            for waiter in flush_waiters {
                let _ = waiter.send(Err(failure.clone()));
            }
            return;
        }
    };
    let bytes = size_of(commits.iter().flat_map(|(ops, _)| ops));
    if let Err(full) = room.check(bytes) {
        let full = full.to_string();
        for (_, waiter) in commits.drain(..) {
            let _ = waiter.send(Err(StoreError::Unavailable(full.clone())));
        }
    }
    let committed = commit_all(&engine.trees, answered, &commits);
    // After an I/O failure of the engine no flush is asked for: sled may
    // never finish one (a failed blob write keeps its log reservation:
    // README, "Why a guard"), and the commit thread, with every writer
    // queued behind it, would wait with it. The round's other writes are
    // then unconfirmed, and the database goes out of service below.
    let engine_failure = committed
        .iter()
        .filter_map(|result| result.as_ref().err())
        .find(|err| is_io_failure(err));
    let flushed = match engine_failure {
        Some(failure) => Err(FlushFailure::from(
            Box::<dyn std::error::Error + Send + Sync>::from(cause_chain(failure)),
        )),
        None => engine
            .db
            .flush()
            .map(|_| ())
            .map_err(|err| -> FlushFailure { Arc::new(err) }),
    };
    drop(engine);
    match &flushed {
        Err(err) => slot.failed(&StoreError::Flush(err.clone())),
        Ok(()) if !commits.is_empty() => slot.wrote(),
        Ok(()) => {}
    }
    for result in &committed {
        if let Err(err) = result {
            slot.note(err);
        }
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
    answered: &AnsweredScopes,
    commits: &[(Vec<Op>, CommitWaiter)],
) -> Vec<Result<(), StoreError>> {
    let together = commits.iter().flat_map(|(ops, _)| ops.iter());
    match commit_to(trees, answered, together) {
        Ok(()) => commits.iter().map(|_| Ok(())).collect(),
        Err(err) if commits.len() == 1 => vec![Err(err)],
        // The engine failed: committed one by one, the requests would meet
        // it again, or wait on it. None of them was applied.
        Err(err) if is_io_failure(&err) => {
            let why = cause_chain(&err);
            std::iter::once(Err(err))
                .chain(
                    commits[1..]
                        .iter()
                        .map(|_| Err(StoreError::Unavailable(why.clone()))),
                )
                .collect()
        }
        Err(_) => commits
            .iter()
            .map(|(ops, _)| commit_to(trees, answered, ops.iter()))
            .collect(),
    }
}
