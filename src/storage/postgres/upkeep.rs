//! Keeping delivery logs to their retention, on the background
//! connections: the passes the log actor asks for at once, for however many
//! organizations, run as one statement ([`batcher`]), and each costs what it
//! deletes. The count of each log is a row of its own
//! (`delivery_log_counts`, migration 5), kept by the statements that add
//! records and by this one, so no pass reads the records a log keeps.
//!
//! Passes of several nodes may meet on one organization: each deletes the
//! oldest records it finds and subtracts what it did delete, so the count
//! stays right. Count rows are locked in organization order, as the
//! statements adding records lock them, so the two never deadlock.

use tokio::sync::oneshot;
use uuid::Uuid;

use super::batcher::{self, Queue};
use super::connect::IoThread;
use super::transact::{query, Database};
use crate::ids::OrgId;
use crate::storage::StoreError;

/// Organizations served by one statement.
const MOST_PASSES: usize = 64;
/// Records one pass deletes of one organization, at most: a log further
/// behind is caught up over the next passes.
const MOST_DELETED: i64 = 10_000;

/// For each organization asked (in organization order): the records it
/// drops (its surplus over `keep`, or `trim`, at most $4), the records
/// deleted, and the count left.
const SQL: &str = "WITH asked AS ( \
       SELECT * FROM unnest($1::uuid[], $2::int8[], $3::int8[]) AS a (org, keep, trim)), \
     counts AS ( \
       SELECT organization_id, records FROM delivery_log_counts \
        WHERE organization_id IN (SELECT org FROM asked) \
        ORDER BY organization_id FOR UPDATE), \
     planned AS ( \
       SELECT a.org, coalesce(c.records, 0) AS records, \
              least(coalesce(a.trim, greatest(coalesce(c.records, 0) - a.keep, 0)), $4::int8) AS n \
         FROM asked a LEFT JOIN counts c ON c.organization_id = a.org), \
     doomed AS ( \
       SELECT l.organization_id, l.id FROM planned CROSS JOIN LATERAL ( \
         SELECT organization_id, id FROM delivery_log \
          WHERE organization_id = planned.org ORDER BY id LIMIT planned.n) l), \
     gone AS ( \
       DELETE FROM delivery_log d USING doomed \
        WHERE d.organization_id = doomed.organization_id AND d.id = doomed.id \
        RETURNING d.organization_id), \
     dropped AS (SELECT organization_id, count(*) AS n FROM gone GROUP BY organization_id), \
     counted AS ( \
       UPDATE delivery_log_counts c SET records = c.records - dropped.n FROM dropped \
        WHERE c.organization_id = dropped.organization_id RETURNING c.organization_id, c.records) \
     SELECT p.org, coalesce(d.n, 0) AS deleted, coalesce(c.records, p.records) AS left_over \
       FROM planned p LEFT JOIN dropped d ON d.organization_id = p.org \
       LEFT JOIN counted c ON c.organization_id = p.org";

/// What a pass of one organization does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Delete all but the newest `n` records; answers how many are left.
    Keep(usize),
    /// Delete the `n` oldest records; answers how many it deleted.
    Trim(usize),
}

struct Ask {
    org: OrgId,
    pass: Pass,
    answer: oneshot::Sender<Result<usize, StoreError>>,
}

/// The queue of passes.
#[derive(Clone)]
pub struct LogUpkeep {
    queue: Queue<Ask>,
}

impl LogUpkeep {
    /// Starts the task that runs passes on `io`, on `database` (the
    /// background connections), one statement at a time.
    pub fn start(io: &IoThread, database: Database) -> Self {
        let shape = batcher::Shape {
            in_flight: 1,
            most: MOST_PASSES,
            window: std::time::Duration::ZERO,
        };
        let queue = batcher::start(io, shape, move |batch| {
            let database = database.clone();
            async move { run(&database, batch).await }
        });
        LogUpkeep { queue }
    }

    /// Runs `pass` on `org`'s log, with the passes asked for meanwhile.
    pub async fn run(&self, org: OrgId, pass: Pass) -> Result<usize, StoreError> {
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Ask { org, pass, answer })
            .map_err(|_| StoreError::Closed)?;
        answered.await.map_err(|_| StoreError::Closed)?
    }
}

async fn run(database: &Database, mut batch: Vec<Ask>) {
    batch.sort_by_key(|ask| ask.org);
    // One pass per organization a statement (the log actor asks for one at
    // a time anyway): the first asked runs; a later one is answered Closed.
    batch.dedup_by_key(|ask| ask.org);
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let orgs: Vec<Uuid> = batch.iter().map(|ask| ask.org.0).collect();
    let keeps: Vec<i64> = batch
        .iter()
        .map(|ask| match ask.pass {
            Pass::Keep(n) => count(n),
            Pass::Trim(_) => 0,
        })
        .collect();
    let trims: Vec<Option<i64>> = batch
        .iter()
        .map(|ask| match ask.pass {
            Pass::Keep(_) => None,
            Pass::Trim(n) => Some(count(n)),
        })
        .collect();
    let ran = database
        .with("a log upkeep", async |client| {
            query(client, SQL, &[&orgs, &keeps, &trims, &MOST_DELETED]).await
        })
        .await;
    let rows = match ran {
        Ok(rows) => rows,
        Err(err) => {
            return batcher::fail_all(batch.into_iter().map(|ask| ask.answer), err);
        }
    };
    for ask in batch {
        let row = rows
            .iter()
            .find(|row| row.try_get::<_, Uuid>("org").ok() == Some(ask.org.0));
        let answer = match row {
            None => Err(StoreError::Unavailable(
                "the log upkeep answered no row for an organization".into(),
            )),
            Some(row) => {
                let column = match ask.pass {
                    Pass::Keep(_) => "left_over",
                    Pass::Trim(_) => "deleted",
                };
                row.try_get::<_, i64>(column)
                    .map(|n| usize::try_from(n).unwrap_or(0))
                    .map_err(StoreError::engine)
            }
        };
        let _ = ask.answer.send(answer);
    }
}
