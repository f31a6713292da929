//! Sharing round trips: callers queue requests here, and a task on the
//! I/O thread takes everything queued and serves it with one statement,
//! with a few such statements in flight at once. Under light load each
//! request gets its own statement at once; under heavy load batches grow
//! by themselves while the earlier ones are in flight. A request joins
//! only a batch that is not sent yet, so what it reads is never older
//! than the request. Used by the group commit and the per-request checks.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::connect::IoThread;
use crate::storage::StoreError;

/// The queue of one batcher.
pub type Queue<T> = mpsc::UnboundedSender<T>;

/// Starts a task on `io` that hands queued requests to `serve` in batches
/// of at most `most`, with at most `in_flight` batches being served.
pub fn start<T, F, Fut>(io: &IoThread, in_flight: usize, most: usize, serve: F) -> Queue<T>
where
    T: Send + 'static,
    F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (queue, pending) = mpsc::unbounded_channel();
    io.spawn(run(pending, in_flight.max(1), most.max(1), serve));
    queue
}

async fn run<T, F, Fut>(
    mut pending: mpsc::UnboundedReceiver<T>,
    in_flight: usize,
    most: usize,
    serve: F,
) where
    T: Send + 'static,
    F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(in_flight));
    while let Some(first) = pending.recv().await {
        // Waiting for a free slot is what lets the next batch grow.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < most {
            match pending.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let served = serve(batch);
        tokio::spawn(async move {
            served.await;
            drop(slot);
        });
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
