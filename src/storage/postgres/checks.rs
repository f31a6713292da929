//! The check every authorized request (and every delivery attempt) makes
//! on a database that several nodes share: is the token live (and whose is
//! it), and at which revision is the organization. Concurrent requests share one query
//! ([`batcher`]), so a busy node checks a batch of requests in one round
//! trip and one statement.

use tokio::sync::oneshot;
use uuid::Uuid;

use super::batcher::{self, Queue};
use super::connect::IoThread;
use super::hedge;
use super::rows;
use super::transact::query;
use super::transact::Database;
use crate::ids::OrgId;
use crate::storage::{Freshness, StoreError};

/// Most requests checked by one query.
const MOST_CHECKS: usize = 256;

/// Queries in flight at once: one. While it runs the next batch grows,
/// and bigger batches cost the database less per request; on the 2-core
/// machine one in flight served 39,854 reads/s against 33,338 with two
/// and 34,095 with four (BENCHMARKS.md). One query of up to 256 checks
/// per round trip leaves room for far more.
const IN_FLIGHT: usize = 1;

/// One row per request, in the order asked: the token's record and user
/// (NULLs when it is unknown or revoked) and the organization's revision
/// (NULL when there is none, or none was asked about).
///
/// Its shape keeps one plan for every check, whatever the organizations:
/// - each request's rows are found by primary key (a lateral subquery,
///   kept apart by its LIMIT, and a scalar subquery), never by a join
///   PostgreSQL may hash;
/// - the arrays come in through scalar subqueries, so that a plan made
///   for given arrays costs what the plan kept for any arrays costs, and
///   PostgreSQL keeps that one.
///
/// Plainly joined, the plan kept hashed the requests and read the whole
/// organizations table on every check, or the statement was planned again
/// for every check (PostgreSQL judged a plan for the arrays at hand
/// cheaper): with 2,000 organizations, 250 µs of database time per check
/// instead of 16.
pub const SQL: &str = "SELECT k.i, a.id, a.user_id, a.kind, a.name, a.sha256, a.created_at, \
     a.email, a.user_name, a.user_created_at, \
     (SELECT o.revision FROM organizations o WHERE o.id = k.org) AS revision \
     FROM unnest((SELECT $1::bytea[]), (SELECT $2::uuid[])) WITH ORDINALITY AS k (sha256, org, i) \
     LEFT JOIN LATERAL ( \
       SELECT t.id, t.user_id, t.kind, t.name, t.sha256, t.created_at, \
              u.email, u.name AS user_name, u.created_at AS user_created_at \
         FROM tokens t JOIN users u ON u.id = t.user_id \
        WHERE t.sha256 = k.sha256 LIMIT 1) a ON true";

/// One request's check, and where its answer goes.
struct Ask {
    token: Option<[u8; 32]>,
    org: Option<OrgId>,
    answer: oneshot::Sender<Result<Freshness, StoreError>>,
}

/// The queue of checks.
#[derive(Clone)]
pub struct Checks {
    queue: Queue<Ask>,
}

impl Checks {
    /// Starts the checking task on `io`, each query waiting up to `window`
    /// for more requests when the node is busy (see [`batcher`]).
    pub fn start(io: &IoThread, database: Database, window: std::time::Duration) -> Self {
        let shape = batcher::Shape {
            in_flight: IN_FLIGHT,
            most: MOST_CHECKS,
            window,
        };
        let queue = batcher::start(io, shape, move |batch| {
            let database = database.clone();
            async move { check_batch(&database, batch).await }
        });
        Checks { queue }
    }

    /// The live token whose SHA-256 is `token`, with its user, and `org`'s
    /// revision, as stored when the call was made or later.
    pub async fn check(
        &self,
        token: Option<&[u8; 32]>,
        org: Option<OrgId>,
    ) -> Result<Freshness, StoreError> {
        batcher::ask(&self.queue, |answer| Ask {
            token: token.copied(),
            org,
            answer,
        })
        .await
    }
}

async fn check_batch(database: &Database, batch: Vec<Ask>) {
    let (asked, slots) = distinct(batch.iter().map(|ask| (ask.token, ask.org)));
    let tokens: Vec<Option<Vec<u8>>> = asked
        .iter()
        .map(|(token, _)| token.map(|token| token.to_vec()))
        .collect();
    let orgs: Vec<Option<Uuid>> = asked.iter().map(|(_, org)| org.map(|org| org.0)).collect();
    // Asked again on another connection each time the probe's limit
    // passes without an answer, within the round's limit: only one check
    // runs at a time, so a silent connection would hold up every request of
    // the node.
    // The parameters are shared by the asks, not copied for each.
    let after = super::idle_probe::answer_within(database.timeout);
    let params = std::sync::Arc::new((tokens, orgs));
    let found = hedge::first_answer(after, database.round_limit(), || {
        let (database, params) = (database.clone(), params.clone());
        async move {
            database
                .with("the token checks", async |client| {
                    query(client, SQL, &[&params.0, &params.1]).await
                })
                .await
        }
    })
    .await;
    let mut answers: Vec<Option<Freshness>> = vec![None; asked.len()];
    let decoded = found.and_then(|rows| {
        for row in &rows {
            let i = rows::get::<i64>(row, "i")?;
            if let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| answers.get_mut(i)) {
                *slot = Some(freshness(row)?);
            }
        }
        Ok(())
    });
    match decoded {
        Ok(()) => {
            for (ask, slot) in batch.into_iter().zip(slots) {
                let answer = answers.get(slot).cloned().flatten();
                let _ = ask.answer.send(Ok(answer.unwrap_or_default()));
            }
        }
        Err(err) => batcher::fail_all(batch.into_iter().map(|ask| ask.answer), err),
    }
}

/// What to ask (each token and organization once: a busy organization's
/// requests, and its delivery attempts, share a row), and for each ask
/// the index of its row.
fn distinct<K: Copy + Eq + std::hash::Hash>(asks: impl Iterator<Item = K>) -> (Vec<K>, Vec<usize>) {
    let mut asked = Vec::new();
    let mut rows = std::collections::HashMap::new();
    let slots = asks
        .map(|ask| {
            *rows.entry(ask).or_insert_with(|| {
                asked.push(ask);
                asked.len() - 1
            })
        })
        .collect();
    (asked, slots)
}

/// One row of [`SQL`].
fn freshness(row: &tokio_postgres::Row) -> Result<Freshness, StoreError> {
    let live = rows::get::<Option<Uuid>>(row, "id")?.is_some();
    let revision = rows::get::<Option<i64>>(row, "revision")?;
    Ok(Freshness {
        account: if live {
            Some(rows::account(row)?)
        } else {
            None
        },
        revision: revision.map(|r| u64::try_from(r).unwrap_or_default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_and_organization_is_asked_once() {
        let (asked, slots) =
            distinct([(1, 'a'), (2, 'a'), (1, 'a'), (1, 'b'), (2, 'a')].into_iter());
        assert_eq!(asked, vec![(1, 'a'), (2, 'a'), (1, 'b')]);
        assert_eq!(slots, vec![0, 1, 0, 2, 1]);
    }
}
