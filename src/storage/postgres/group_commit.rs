//! Group commit: concurrent writers share transactions ([`batcher`]): a
//! batch of writes is committed as one transaction of one statement.
//!
//! A batch the database refuses (a seed 2.4 guard) is committed again one
//! writer at a time, so that a refused write fails its caller alone. A
//! batch whose answer was lost is answered as committed once a row only it
//! wrote is found, and runs again when it surely was not made
//! ([`lost_commits`]).

use tokio::sync::oneshot;

use super::batch::statements;
use super::batcher::{self, Queue};
use super::connect::IoThread;
use super::lost_commits;
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
    queue: Queue<Pending>,
}

impl GroupCommit {
    /// Starts the committing task on `io`, with at most `in_flight`
    /// transactions at once, each waiting up to `window` for more writers
    /// when the node is busy (see [`batcher`]).
    pub fn start(
        io: &IoThread,
        database: Database,
        key: Option<SealingKey>,
        in_flight: usize,
        window: std::time::Duration,
    ) -> Self {
        let shape = batcher::Shape {
            in_flight,
            most: MOST_WRITERS,
            window,
        };
        let queue = batcher::start(io, shape, move |batch| {
            let (database, key) = (database.clone(), key.clone());
            async move { commit_batch(&database, key.as_ref(), batch).await }
        });
        GroupCommit { queue }
    }

    /// Commits `writes` in a transaction (maybe shared); gives them back
    /// once committed, which on PostgreSQL is durable.
    pub async fn commit(&self, writes: Vec<Write>) -> Result<Vec<Write>, StoreError> {
        batcher::ask(&self.queue, |done| Pending { writes, done }).await
    }
}

async fn commit_batch(database: &Database, key: Option<&SealingKey>, batch: Vec<Pending>) {
    let writes = || batch.iter().flat_map(|p| p.writes.iter());
    let together = match statements(writes(), key) {
        Ok(statements) => {
            let marker = lost_commits::Marker::of(writes());
            lost_commits::commit(database, &statements, marker.as_ref()).await
        }
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
        Err(err) => batcher::fail_all(batch.into_iter().map(|writer| writer.done), err),
    }
}

/// Whether the database refused a write (a writer's fault, not the
/// database's state): the others of its batch may still commit.
fn refused(err: &StoreError) -> bool {
    !matches!(
        err,
        StoreError::Unavailable(_) | StoreError::Unconfirmed(_) | StoreError::Closed
    )
}
