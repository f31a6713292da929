//! Group commit: writers that finished their transaction ask for durability;
//! one thread flushes sled for everyone who asked since its last flush, so
//! concurrent writers share one fsync instead of queueing for their own.
//!
//! The thread first waits a short window to gather more writers into the
//! flush (like PostgreSQL's `commit_delay`): without it a burst averaged 5
//! writers a flush and flush I/O took a third of the CPU; with 1 ms, 14 a
//! flush and about a fifth more events/s. The price is up to that window
//! of latency on every durable write. (Waiting only after a flush that
//! served several writers was tried: under load single-writer flushes are
//! common, so it rarely waited and gained little.)

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use tokio::sync::oneshot;

type Waiter = oneshot::Sender<Result<(), String>>;

/// Handle to the flushing thread.
#[derive(Clone)]
pub struct GroupCommit {
    requests: mpsc::Sender<Waiter>,
    /// The flushing thread, joined by [`GroupCommit::stop`].
    thread: Arc<Mutex<Option<thread::JoinHandle<()>>>>,
}

impl GroupCommit {
    /// Starts the flushing thread for `db`. It ends when every handle is dropped.
    pub fn start(db: sled::Db, window: Duration) -> std::io::Result<Self> {
        let (requests, inbox) = mpsc::channel::<Waiter>();
        let flusher = thread::Builder::new()
            .name("rolecall-flush".into())
            .spawn(move || {
                while let Ok(first) = inbox.recv() {
                    let mut waiters = vec![first];
                    if !window.is_zero() {
                        thread::sleep(window);
                    }
                    waiters.extend(inbox.try_iter());
                    let outcome = db.flush().map(|_| ()).map_err(|err| err.to_string());
                    if let Err(err) = &outcome {
                        tracing::error!(error = %err, "storage flush failed");
                    }
                    for waiter in waiters {
                        let _ = waiter.send(outcome.clone());
                    }
                }
            })?;
        Ok(Self {
            requests,
            thread: Arc::new(Mutex::new(Some(flusher))),
        })
    }

    /// Ends the flushing thread (once this is the last handle) and waits for it,
    /// so the database it holds is released.
    pub fn stop(self) {
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(self.requests);
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// Resolves once everything committed before this call is on disk.
    pub async fn durable(&self) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send(tx)
            .map_err(|_| "the flush thread has stopped".to_string())?;
        rx.await
            .map_err(|_| "the flush thread has stopped".to_string())?
    }
}
