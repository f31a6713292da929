//! Sharing round trips: callers queue requests here, and a task on the
//! I/O thread takes everything queued and serves it with one statement,
//! with a few such statements in flight at once. Under light load each
//! request gets its own statement at once; under heavy load batches grow
//! by themselves while the earlier ones are in flight, and a busy batcher
//! lets each batch grow a moment longer. A request joins
//! only a batch that is not sent yet, so what it reads is never older
//! than the request. Used by the group commit, the per-request checks and
//! the idempotency keys' claims and answers.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::connect::IoThread;
use crate::storage::StoreError;

/// The queue of one batcher.
pub type Queue<T> = mpsc::UnboundedSender<T>;

/// How a batcher batches.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Batches being served at once.
    pub in_flight: usize,
    /// Most requests in one batch.
    pub most: usize,
    /// How long a busy batcher lets its next batch grow before sending it
    /// (zero: never); it is sent sooner once as big as the last one. Fewer,
    /// larger statements cost the database far less per request (about a
    /// quarter less PostgreSQL CPU per event under load, with p50 no
    /// higher; BENCHMARKS.md), and only under load: below [`BUSY_BATCH`]
    /// requests per round trip a request is sent at once. PostgreSQL's
    /// `commit_delay` and `commit_siblings` make the same trade.
    pub window: Duration,
}

/// A batch at least this big shows a busy batcher: its requests come
/// faster than its round trips.
const BUSY_BATCH: usize = 8;

/// Starts a task on `io` that hands queued requests to `serve` in batches
/// shaped by `shape`.
pub fn start<T, F, Fut>(io: &IoThread, shape: Shape, serve: F) -> Queue<T>
where
    T: Send + 'static,
    F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (queue, pending) = mpsc::unbounded_channel();
    io.spawn(run(pending, shape, serve));
    queue
}

async fn run<T, F, Fut>(mut pending: mpsc::UnboundedReceiver<T>, shape: Shape, serve: F)
where
    T: Send + 'static,
    F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let most = shape.most.max(1);
    let slots = Arc::new(Semaphore::new(shape.in_flight.max(1)));
    let mut last = 0;
    while let Some(first) = pending.recv().await {
        // Waiting for a free slot is what lets the next batch grow.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        take_queued(&mut pending, &mut batch, most);
        if last >= BUSY_BATCH && !shape.window.is_zero() {
            // Busy: the batch grows until it is as big as the last one, or
            // the window is over.
            let over = tokio::time::Instant::now() + shape.window;
            while batch.len() < last.min(most) {
                match tokio::time::timeout_at(over, pending.recv()).await {
                    Ok(Some(next)) => {
                        batch.push(next);
                        take_queued(&mut pending, &mut batch, most);
                    }
                    Ok(None) | Err(_) => break,
                }
            }
        }
        last = batch.len();
        let served = serve(batch);
        tokio::spawn(async move {
            served.await;
            drop(slot);
        });
    }
}

/// Queues the request `make` builds around the sender of its answer, and
/// waits for that answer (the batcher's end closes both ways).
pub async fn ask<T, R>(
    queue: &Queue<T>,
    make: impl FnOnce(oneshot::Sender<Result<R, StoreError>>) -> T,
) -> Result<R, StoreError> {
    let (answer, answered) = oneshot::channel();
    queue.send(make(answer)).map_err(|_| StoreError::Closed)?;
    answered.await.map_err(|_| StoreError::Closed)?
}

/// Moves what is queued now into `batch`, up to `most`.
fn take_queued<T>(pending: &mut mpsc::UnboundedReceiver<T>, batch: &mut Vec<T>, most: usize) {
    while batch.len() < most {
        match pending.try_recv() {
            Ok(next) => batch.push(next),
            Err(_) => break,
        }
    }
}

/// Answers every request of a batch that failed as a whole: the first
/// with the error itself, the others with its description (the cause is
/// not shared).
pub fn fail_all<T>(
    answers: impl IntoIterator<Item = oneshot::Sender<Result<T, StoreError>>>,
    err: StoreError,
) {
    let reason = crate::telemetry::cause_chain(&err);
    let err_kind = if matches!(err, StoreError::Unconfirmed(_)) {
        Kind::Unconfirmed
    } else {
        Kind::Other
    };
    let mut answers = answers.into_iter();
    if let Some(first) = answers.next() {
        let _ = first.send(Err(err));
    }
    let unconfirmed = matches!(err_kind, Kind::Unconfirmed);
    for answer in answers {
        let shared = if unconfirmed {
            StoreError::Unconfirmed(reason.clone())
        } else {
            StoreError::Unavailable(reason.clone())
        };
        let _ = answer.send(Err(shared));
    }
}

/// Whether a batch's writes may have been committed although it failed.
enum Kind {
    Unconfirmed,
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_millis(100);

    /// A batcher whose batches are reported on a channel.
    struct Probe {
        queue: Queue<u32>,
        batches: mpsc::UnboundedReceiver<Vec<u32>>,
    }

    impl Probe {
        fn start() -> Self {
            let (queue, pending) = mpsc::unbounded_channel();
            let (served, batches) = mpsc::unbounded_channel();
            let shape = Shape {
                in_flight: 1,
                most: 256,
                // Long, so that no slow machine sees it pass unasked.
                window: WINDOW,
            };
            tokio::spawn(run(pending, shape, move |batch| {
                let _ = served.send(batch);
                async {}
            }));
            Probe { queue, batches }
        }

        fn send(&self, requests: impl IntoIterator<Item = u32>) {
            for request in requests {
                assert!(self.queue.send(request).is_ok(), "the batcher runs");
            }
        }

        /// Lets the batcher run up to its next wait; what it sent meanwhile.
        async fn sent(&mut self) -> Vec<Vec<u32>> {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            let mut sent = Vec::new();
            while let Ok(batch) = self.batches.try_recv() {
                sent.push(batch);
            }
            sent
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_quiet_batcher_sends_at_once_and_a_busy_one_lets_the_next_batch_grow() {
        let mut probe = Probe::start();
        // Queued before the batcher runs: one batch, big enough to be busy.
        let busy: Vec<u32> = (0..BUSY_BATCH as u32).collect();
        probe.send(busy.clone());
        assert_eq!(probe.sent().await, vec![busy]);
        // The next request waits a moment, and those that come meanwhile join it.
        probe.send([100]);
        assert!(
            probe.sent().await.is_empty(),
            "a busy batcher waits for more"
        );
        probe.send([101, 102]);
        tokio::time::sleep(WINDOW + Duration::from_millis(50)).await;
        assert_eq!(probe.sent().await, vec![vec![100, 101, 102]]);
        // That batch was small: the next request is sent at once.
        probe.send([200]);
        assert_eq!(probe.sent().await, vec![vec![200]]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_busy_batch_goes_once_it_is_as_big_as_the_last_one() {
        let mut probe = Probe::start();
        let busy: Vec<u32> = (0..BUSY_BATCH as u32).collect();
        probe.send(busy.clone());
        assert_eq!(probe.sent().await, vec![busy.clone()]);
        // As many again: sent without waiting out the window.
        let again: Vec<u32> = busy.iter().map(|n| n + 100).collect();
        probe.send(again[..1].iter().copied());
        assert!(probe.sent().await.is_empty(), "one request waits for more");
        probe.send(again[1..].iter().copied());
        assert_eq!(probe.sent().await, vec![again]);
    }
}
