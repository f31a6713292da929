//! Group commit: concurrent writers share transactions. Writes queue here;
//! a task on the I/O thread takes everything queued and commits it as one
//! transaction (one round trip, one statement per table), with a few such
//! transactions in flight at once. Under light load each writer gets its
//! own transaction at once; under heavy load batches grow by themselves
//! while the earlier ones are in flight.
//!
//! A batch the database refuses (a seed 2.4 guard) is committed again one
//! writer at a time, so that a refused write fails its caller alone.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::batch::statements;
use super::connect::IoThread;
use super::transact::Database;
use crate::domain::change::Write;
use crate::secrets::SealingKey;
use crate::storage::StoreError;

/// Most writers in one transaction.
const MOST_WRITERS: usize = 256;

/// One writer's change, and where its outcome goes.
struct Pending {
    writes: Vec<Write>,
    done: oneshot::Sender<Result<Vec<Write>, StoreError>>,
}

/// The queue of writes to commit.
#[derive(Clone)]
pub struct GroupCommit {
    queue: mpsc::UnboundedSender<Pending>,
}

impl GroupCommit {
    /// Starts the committing task on `io`, with at most `in_flight`
    /// transactions at once.
    pub fn start(
        io: &IoThread,
        database: Database,
        key: Option<SealingKey>,
        in_flight: usize,
    ) -> Self {
        let (queue, pending) = mpsc::unbounded_channel();
        io.spawn(run(pending, database, key, in_flight.max(1)));
        GroupCommit { queue }
    }

    /// Commits `writes` in a transaction (maybe shared); gives them back
    /// once committed, which on PostgreSQL is durable.
    pub async fn commit(&self, writes: Vec<Write>) -> Result<Vec<Write>, StoreError> {
        let (done, outcome) = oneshot::channel();
        self.queue
            .send(Pending { writes, done })
            .map_err(|_| StoreError::Closed)?;
        outcome.await.map_err(|_| StoreError::Closed)?
    }
}

async fn run(
    mut pending: mpsc::UnboundedReceiver<Pending>,
    database: Database,
    key: Option<SealingKey>,
    in_flight: usize,
) {
    let slots = Arc::new(Semaphore::new(in_flight));
    while let Some(first) = pending.recv().await {
        // Waiting for a free slot is what lets the next batch grow.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MOST_WRITERS {
            match pending.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let (database, key) = (database.clone(), key.clone());
        tokio::spawn(async move {
            commit_batch(&database, key.as_ref(), batch).await;
            drop(slot);
        });
    }
}

async fn commit_batch(database: &Database, key: Option<&SealingKey>, batch: Vec<Pending>) {
    let together = match statements(batch.iter().flat_map(|p| p.writes.iter()), key) {
        Ok(statements) => database.transact(&statements).await,
        Err(err) => Err(err),
    };
    match together {
        Ok(()) => {
            for writer in batch {
                let _ = writer.done.send(Ok(writer.writes));
            }
        }
        Err(err) if batch.len() > 1 && refused(&err) => {
            for writer in batch {
                let outcome = match statements(writer.writes.iter(), key) {
                    Ok(statements) => database.transact(&statements).await,
                    Err(err) => Err(err),
                };
                let _ = writer.done.send(outcome.map(|()| writer.writes));
            }
        }
        Err(err) => {
            let reason = crate::telemetry::cause_chain(&err);
            let mut writers = batch.into_iter();
            if let Some(first) = writers.next() {
                let _ = first.done.send(Err(err));
            }
            for writer in writers {
                let _ = writer
                    .done
                    .send(Err(StoreError::Unavailable(reason.clone())));
            }
        }
    }
}

/// Whether the database refused a write (a writer's fault, not the
/// database's state): the others of its batch may still commit.
fn refused(err: &StoreError) -> bool {
    !matches!(err, StoreError::Unavailable(_) | StoreError::Closed)
}
