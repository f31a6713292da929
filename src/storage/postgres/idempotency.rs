//! Idempotency keys on PostgreSQL: one row per scope, claimed with an
//! insert that takes over only a row past its time, so that two requests
//! with one key, on any nodes, cannot both run.
//!
//! Claims and answers are batched as the per-request checks are
//! ([`batcher`]): concurrent keyed requests share one claim statement
//! (and a read of the keys held, when some are) and one answer statement,
//! instead of one each per request (a keyed burst ran 2.5 statements per
//! event that way, against 0.3 without keys).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;
use tokio_postgres::Row;

pub use super::batch::ANSWER_SQL;
use super::batcher::{self, Queue};
use super::connect::{IoThread, BACKGROUND_SESSION};
use super::rows::{self, stamp, time};
use super::transact::Database;
use super::PgStore;
use crate::domain::idempotency::{Begin, KeyClaim, KeyRecord, KeyState, StoredAnswer};
use crate::storage::StoreError;
use crate::time::Timestamp;

/// Most requests one statement serves.
const MOST_AT_ONCE: usize = 256;

/// Claim statements (and answer statements) in flight at once: one, so
/// that the next batch grows while it runs, as the checks do.
const IN_FLIGHT: usize = 1;

/// Claims every scope asked (each once) unless a live row holds it, in
/// the order of the scopes so that two nodes' batches lock their rows in
/// one order; answers the scopes claimed. Each row is found by the
/// arbiter index, whatever the table's size.
pub const CLAIM_SQL: &str = "INSERT INTO idempotency_keys AS k \
       (scope, fingerprint, answered, live_until, status, headers, body) \
     SELECT scope, fingerprint, false, until, NULL, NULL, NULL \
       FROM unnest((SELECT $1::bytea[]), (SELECT $2::bytea[]), (SELECT $3::timestamptz[])) \
            AS a (scope, fingerprint, until) \
      ORDER BY scope \
     ON CONFLICT (scope) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, \
            answered = false, live_until = EXCLUDED.live_until, \
            status = NULL, headers = NULL, body = NULL \
      WHERE k.live_until <= $4 \
     RETURNING k.scope";

/// The rows that hold the scopes a claim did not get: asked only when
/// there are some (a retry, a replay), each row found by its key (a
/// lateral subquery kept apart by its LIMIT). It runs without sequential
/// scans ([`BACKGROUND_SESSION`], for its own transaction): planned while
/// the table is nearly empty (after a purge), the lookup would scan it,
/// and the plan kept would go on scanning it as a burst fills it.
pub const HELD_SQL: &str = "SELECT k.scope, k.fingerprint, k.answered, k.live_until, k.status, \
            k.headers::text AS headers, k.body \
       FROM unnest((SELECT $1::bytea[])) AS a (scope) \
      CROSS JOIN LATERAL (SELECT * FROM idempotency_keys k WHERE k.scope = a.scope LIMIT 1) k";

/// Drops the claims of requests whose answers are not kept, each only
/// while it is still that request's (its fingerprint and its end): a drop
/// that comes late cannot free a claim that a retry of the request holds
/// now. Each row is found by its key as in [`HELD_SQL`] and deleted by its
/// tuple id, so a row changed meanwhile (answered, or claimed anew) is
/// left alone. It runs without sequential scans, as [`HELD_SQL`] does.
pub const FORGET_SQL: &str = "DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY( \
       SELECT k.ctid \
         FROM unnest((SELECT $1::bytea[]), (SELECT $2::bytea[]), (SELECT $3::timestamptz[])) \
              AS a (scope, fingerprint, until) \
        CROSS JOIN LATERAL (SELECT ctid, fingerprint, live_until, answered \
                              FROM idempotency_keys k WHERE k.scope = a.scope LIMIT 1) k \
        WHERE k.fingerprint = a.fingerprint AND k.live_until = a.until AND NOT k.answered))";

/// A request's claim of its key, and where its verdict goes.
struct Claim {
    key: KeyClaim,
    verdict: oneshot::Sender<Result<Begin, StoreError>>,
}

/// A request's answer to record, and where to say it is recorded.
struct Answer {
    row: AnswerRow,
    recorded: oneshot::Sender<Result<(), StoreError>>,
}

/// An answer, as recorded in its key's row.
struct AnswerRow {
    scope: [u8; 32],
    fingerprint: [u8; 32],
    answer: StoredAnswer,
    expires: Timestamp,
}

/// The pauses before each new try of a batch of answers that failed:
/// about 30 s in all, within the claim's minute for requests that ran less
/// than half of it (past the claim, a retry of the request may run it
/// again). Its requests are answered meanwhile
/// (their changes are made); only their replays wait for it.
const ANSWERED_AGAIN_AFTER: [Duration; 5] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(16),
];

/// The queues of claims and answers.
#[derive(Clone)]
pub struct Keys {
    claims: Queue<Claim>,
    answers: Queue<Answer>,
    undropped: Undropped,
}

/// Claims of failed requests that could not be dropped at once (the
/// database away, or a claim statement's answer lost), dropped by one
/// background task: all of them in one statement, once the database takes
/// it, so that their retries run within seconds of its return instead of
/// meeting 409 until the claims lapse. However long the outage and however
/// many requests fail, that is one statement per try.
#[derive(Clone, Default)]
struct Undropped {
    pending: Arc<Mutex<Vec<KeyClaim>>>,
    added: Arc<tokio::sync::Notify>,
}

/// The first pause before the pending claims are dropped, and the longest
/// one between tries while the database refuses.
const DROP_PAUSES: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(4));

/// Most claims one drop statement takes.
const MOST_DROPPED: usize = 1000;

impl Undropped {
    /// Starts the dropping task on `io`, on the `background` connections.
    fn start(io: &IoThread, background: Database) -> Self {
        let undropped = Undropped::default();
        io.spawn(undropped.clone().drop_pending(background));
        undropped
    }

    /// Leaves `claims` to the dropping task.
    fn add(&self, claims: impl IntoIterator<Item = KeyClaim>) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(claims);
        self.added.notify_one();
    }

    /// Drops the pending claims whenever some are added: after a pause,
    /// then after longer ones while the database refuses. A claim past its
    /// end has lapsed, and is no longer dropped.
    async fn drop_pending(self, background: Database) {
        loop {
            self.added.notified().await;
            let mut pause = DROP_PAUSES.0;
            loop {
                tokio::time::sleep(pause).await;
                let now = Timestamp::now();
                let batch: Vec<KeyClaim> = {
                    let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                    pending.retain(|claim| claim.until > now);
                    let take = pending.len().min(MOST_DROPPED);
                    pending.drain(..take).collect()
                };
                if batch.is_empty() {
                    break;
                }
                match drop_claims(&background, &batch).await {
                    Ok(()) => {
                        tracing::info!(
                            claims = batch.len(),
                            "idempotency keys' claims of failed requests dropped after a failed try"
                        );
                        pause = Duration::ZERO;
                    }
                    Err(err) => {
                        tracing::warn!(claims = batch.len(), error = %crate::telemetry::cause_chain(&err), "idempotency keys' claims of failed requests could not be dropped; trying again shortly");
                        self.add(batch);
                        pause = (pause * 2).clamp(DROP_PAUSES.0, DROP_PAUSES.1);
                    }
                }
            }
        }
    }
}

impl Keys {
    /// Starts the claiming and answering tasks on `io`, each statement
    /// waiting up to `window` for more requests when the node is busy;
    /// claims that a failed statement may have left are dropped on
    /// `background`.
    pub fn start(
        io: &IoThread,
        database: Database,
        background: Database,
        window: Duration,
    ) -> Self {
        let shape = batcher::Shape {
            in_flight: IN_FLIGHT,
            most: MOST_AT_ONCE,
            window,
        };
        let claiming = database.clone();
        let undropped = Undropped::start(io, background);
        let dropping = undropped.clone();
        let claims = batcher::start(io, shape, move |batch| {
            let (database, undropped) = (claiming.clone(), dropping.clone());
            async move { claim_batch(&database, &undropped, batch).await }
        });
        let answers = batcher::start(io, shape, move |batch| {
            let database = database.clone();
            async move { answer_batch(&database, batch).await }
        });
        Keys {
            claims,
            answers,
            undropped,
        }
    }
}

impl PgStore {
    /// See [`crate::storage::Store::idempotency_begin`]: the claim shares
    /// one statement with the claims of concurrent requests, and is judged
    /// at the moment that statement runs, not at `now` (when the request
    /// asked, which is no later).
    pub async fn idempotency_begin(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        until: Timestamp,
        _expires: Timestamp,
        _now: Timestamp,
    ) -> Result<Begin, StoreError> {
        let key = KeyClaim {
            scope,
            fingerprint,
            until,
        };
        batcher::ask(&self.keys.claims, |verdict| Claim { key, verdict }).await
    }

    /// See [`crate::storage::Store::idempotency_answer`]: shares one
    /// statement with the answers of concurrent requests.
    pub async fn idempotency_answer(
        &self,
        scope: [u8; 32],
        fingerprint: [u8; 32],
        answer: StoredAnswer,
        expires: Timestamp,
    ) -> Result<(), StoreError> {
        let row = AnswerRow {
            scope,
            fingerprint,
            answer,
            expires,
        };
        batcher::ask(&self.keys.answers, |recorded| Answer { row, recorded }).await
    }

    /// See [`crate::storage::Store::idempotency_forget`]: at once on the
    /// request's connections; when that fails, again in the background.
    pub async fn idempotency_forget(&self, claim: KeyClaim) -> Result<(), StoreError> {
        let dropped = drop_claims(&self.database, &[claim]).await;
        if dropped.is_err() {
            self.keys.undropped.add([claim]);
        }
        dropped
    }

    /// See [`crate::storage::Store::idempotency_purge`]: on the background
    /// connections.
    pub async fn idempotency_purge(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .background
            .query(
                "purging idempotency keys",
                "WITH gone AS (DELETE FROM idempotency_keys WHERE scope IN \
                   (SELECT scope FROM idempotency_keys WHERE live_until <= $1 LIMIT $2 \
                    FOR UPDATE SKIP LOCKED) \
                   RETURNING 1) SELECT count(*) AS n FROM gone",
                &[&time(now), &limit],
            )
            .await?;
        let purged = match rows.first() {
            Some(row) => rows::get::<i64>(row, "n")?,
            None => 0,
        };
        Ok(usize::try_from(purged).unwrap_or(0))
    }
}

/// Serves a batch of claims with one statement (two when some of its
/// keys are held).
async fn claim_batch(database: &Database, undropped: &Undropped, batch: Vec<Claim>) {
    // Each scope once: an insert may not touch a row twice (the batch's
    // later requests of a scope are judged by [`verdicts`]).
    let mut seen = HashSet::with_capacity(batch.len());
    let firsts: Vec<KeyClaim> = batch
        .iter()
        .map(|claim| claim.key)
        .filter(|key| seen.insert(key.scope))
        .collect();
    let mut found = match claim_scopes(database, &firsts).await {
        Ok(claimed) => claimed,
        Err(err) => {
            // The statement may have run, its answer lost: its claims
            // would hold their keys for a minute, for requests refused.
            undropped.add(firsts);
            return batcher::fail_all(batch.into_iter().map(|claim| claim.verdict), err);
        }
    };
    let held: Vec<&[u8]> = firsts
        .iter()
        .filter(|key| !found.contains_key(&key.scope))
        .map(|key| key.scope.as_slice())
        .collect();
    // A failed read of the keys held fails only their requests: the keys
    // claimed are this batch's, and their requests run.
    let mut unread = None;
    if !held.is_empty() {
        match read_held(database, &held).await {
            Ok(rows) => found.extend(rows),
            Err(err) => unread = Some(err),
        }
    }
    let now = Timestamp::now();
    let asked: Vec<_> = batch
        .iter()
        .map(|claim| (claim.key.scope, claim.key.fingerprint, claim.key.until))
        .collect();
    let mut failed = Vec::new();
    for (claim, verdict) in batch.into_iter().zip(verdicts(&asked, &found, now)) {
        if unread.is_some() && !found.contains_key(&claim.key.scope) {
            failed.push(claim.verdict);
        } else {
            let _ = claim.verdict.send(Ok(verdict));
        }
    }
    if let Some(err) = unread {
        batcher::fail_all(failed, err);
    }
}

/// Claims the scopes of `claims` (each scope once): the scopes claimed.
async fn claim_scopes(
    database: &Database,
    claims: &[KeyClaim],
) -> Result<HashMap<[u8; 32], Found>, StoreError> {
    let (scopes, fingerprints, untils) = columns(claims);
    let now = time(Timestamp::now());
    let claimed = database
        .query(
            "idempotency keys",
            CLAIM_SQL,
            &[&scopes, &fingerprints, &untils, &now],
        )
        .await?;
    claimed
        .iter()
        .map(|row| Ok((scope_of(row)?, Found::Claimed)))
        .collect()
}

/// The scopes, fingerprints and ends of `claims`, as statement arrays.
fn columns(claims: &[KeyClaim]) -> (Vec<&[u8]>, Vec<&[u8]>, Vec<SystemTime>) {
    let scopes = claims.iter().map(|c| c.scope.as_slice()).collect();
    let fingerprints = claims.iter().map(|c| c.fingerprint.as_slice()).collect();
    let untils = claims.iter().map(|c| time(c.until)).collect();
    (scopes, fingerprints, untils)
}

/// The rows that hold `scopes`.
async fn read_held(
    database: &Database,
    scopes: &[&[u8]],
) -> Result<Vec<([u8; 32], Found)>, StoreError> {
    let rows = database
        .query_planned_with(
            "held idempotency keys",
            BACKGROUND_SESSION,
            HELD_SQL,
            &[&scopes],
        )
        .await?;
    rows.iter()
        .map(|row| Ok((scope_of(row)?, Found::Held(record(row)?))))
        .collect()
}

/// The `scope` column of `row`.
fn scope_of(row: &Row) -> Result<[u8; 32], StoreError> {
    let scope = rows::get::<Vec<u8>>(row, "scope")?;
    <[u8; 32]>::try_from(scope.as_slice()).map_err(StoreError::codec)
}

/// What the claim found for a scope (a scope neither claimed nor read is
/// one whose row went away between the two statements).
#[derive(Debug)]
enum Found {
    /// Claimed for the first request of the batch that asked for it.
    Claimed,
    /// Not claimed: the row that holds it.
    Held(KeyRecord),
}

/// The verdict of each request asked (scope, fingerprint, claim's end), in
/// order, from what the statement found at `now`: the first request of a
/// claimed scope runs, and a later one of the batch meets its claim.
fn verdicts(
    asked: &[([u8; 32], [u8; 32], Timestamp)],
    found: &HashMap<[u8; 32], Found>,
    now: Timestamp,
) -> Vec<Begin> {
    let mut running: HashMap<[u8; 32], KeyRecord> = HashMap::new();
    asked
        .iter()
        .map(|(scope, fingerprint, until)| {
            if let Some(claim) = running.get(scope) {
                return claim.verdict(fingerprint, now);
            }
            match found.get(scope) {
                Some(Found::Claimed) => {
                    running.insert(*scope, KeyRecord::running(*fingerprint, *until));
                    Begin::Run
                }
                Some(Found::Held(record)) if record.live(now) => record.verdict(fingerprint, now),
                // Gone, or lapsed since: the next try claims it.
                _ => Begin::Running { for_ms: 1 },
            }
        })
        .collect()
}

/// Runs [`FORGET_SQL`] for `claims` on `database`, without sequential
/// scans whatever its sessions' settings. Its answer lost, it may be run
/// again: it drops each claim only while it is its request's.
async fn drop_claims(database: &Database, claims: &[KeyClaim]) -> Result<(), StoreError> {
    let (scopes, fingerprints, untils) = columns(claims);
    database
        .query_planned_with(
            "dropping idempotency keys' claims",
            BACKGROUND_SESSION,
            FORGET_SQL,
            &[&scopes, &fingerprints, &untils],
        )
        .await
        .map(drop)
}

/// Records a batch of answers with one statement; when that fails, tells
/// their requests so and goes on trying in the background, so that a
/// connection cut at that moment costs no replay.
async fn answer_batch(database: &Database, batch: Vec<Answer>) {
    let (mut rows, recorded): (Vec<AnswerRow>, Vec<_>) = batch
        .into_iter()
        .map(|answer| (answer.row, answer.recorded))
        .unzip();
    // Rows updated in one order by every node.
    rows.sort_by_key(|row| row.scope);
    let Err(err) = record_answers(database, &rows).await else {
        for recorded in recorded {
            let _ = recorded.send(Ok(()));
        }
        return;
    };
    batcher::fail_all(recorded, err);
    let database = database.clone();
    tokio::spawn(async move {
        let mut last = None;
        for pause in ANSWERED_AGAIN_AFTER {
            tokio::time::sleep(pause).await;
            match record_answers(&database, &rows).await {
                Ok(()) => {
                    tracing::info!(
                        answers = rows.len(),
                        "idempotency keys' answers recorded after a failed try"
                    );
                    return;
                }
                Err(err) => last = Some(err),
            }
        }
        if let Some(err) = last {
            tracing::warn!(answers = rows.len(), error = %crate::telemetry::cause_chain(&err), "idempotency keys' answers could not be recorded; a retry of their requests runs again once their claims lapse");
        }
    });
}

/// Records `rows`: in one statement, or in one per answer of a key that
/// comes twice (an insert may not touch a row twice; two requests hold one
/// key only when the first one's claim lapsed while it ran, and the row
/// keeps the answer of the one whose fingerprint it has).
async fn record_answers(database: &Database, rows: &[AnswerRow]) -> Result<(), StoreError> {
    if rows.windows(2).all(|pair| pair[0].scope != pair[1].scope) {
        return record_answers_once(database, rows).await;
    }
    for row in rows {
        record_answers_once(database, std::slice::from_ref(row)).await?;
    }
    Ok(())
}

/// Runs the answer statement for `rows`, each key once.
async fn record_answers_once(database: &Database, rows: &[AnswerRow]) -> Result<(), StoreError> {
    let headers = rows
        .iter()
        .map(|row| serde_json::to_string(&row.answer.headers).map_err(StoreError::codec))
        .collect::<Result<Vec<String>, StoreError>>()?;
    let scopes: Vec<&[u8]> = rows.iter().map(|r| r.scope.as_slice()).collect();
    let fingerprints: Vec<&[u8]> = rows.iter().map(|r| r.fingerprint.as_slice()).collect();
    let expires: Vec<SystemTime> = rows.iter().map(|r| time(r.expires)).collect();
    let statuses: Vec<i32> = rows.iter().map(|r| i32::from(r.answer.status)).collect();
    let bodies: Vec<&[u8]> = rows.iter().map(|r| r.answer.body.as_slice()).collect();
    database
        .query(
            "idempotency keys' answers",
            ANSWER_SQL,
            &[
                &scopes,
                &fingerprints,
                &expires,
                &statuses,
                &headers,
                &bodies,
            ],
        )
        .await
        .map(drop)
}

/// The record of a row of [`HELD_SQL`].
fn record(row: &Row) -> Result<KeyRecord, StoreError> {
    let fingerprint = rows::get::<Vec<u8>>(row, "fingerprint")?;
    let fingerprint = <[u8; 32]>::try_from(fingerprint.as_slice()).map_err(StoreError::codec)?;
    let until = stamp(rows::get::<SystemTime>(row, "live_until")?).millis();
    let state = if rows::get::<bool>(row, "answered")? {
        let headers: Option<String> = rows::get(row, "headers")?;
        let headers: Vec<(String, String)> = match headers {
            Some(text) => serde_json::from_str(&text).map_err(StoreError::codec)?,
            None => Vec::new(),
        };
        KeyState::Answered {
            answer: StoredAnswer {
                status: u16::try_from(rows::get::<Option<i32>>(row, "status")?.unwrap_or(500))
                    .unwrap_or(500),
                headers,
                body: rows::get::<Option<Vec<u8>>>(row, "body")?.unwrap_or_default(),
            },
            expires: until,
        }
    } else {
        KeyState::Running { until }
    };
    Ok(KeyRecord { fingerprint, state })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_runs_the_first_request_of_a_claimed_scope_and_holds_its_others() {
        let now = Timestamp(10_000);
        let until = Timestamp(70_000);
        let (a, b, c, d) = ([1; 32], [2; 32], [3; 32], [4; 32]);
        let answered = KeyRecord::answered(
            [9; 32],
            StoredAnswer {
                status: 201,
                headers: Vec::new(),
                body: b"{}".to_vec(),
            },
            Timestamp(20_000),
        );
        let found = HashMap::from([
            (a, Found::Claimed),
            (b, Found::Held(answered)),
            (
                d,
                Found::Held(KeyRecord::running([9; 32], Timestamp(9_000))),
            ),
        ]);
        let asked = [
            (a, [9; 32], until),
            (a, [9; 32], until),
            (a, [8; 32], until),
            (b, [9; 32], until),
            (b, [8; 32], until),
            (c, [9; 32], until),
            (d, [9; 32], until),
        ];
        let verdicts = verdicts(&asked, &found, now);
        assert_eq!(verdicts[0], Begin::Run);
        assert_eq!(
            verdicts[1],
            Begin::Running { for_ms: 60_000 },
            "the same request, sent twice at once"
        );
        assert_eq!(verdicts[2], Begin::Reused, "another request under the key");
        assert!(matches!(&verdicts[3], Begin::Replay(answer) if answer.status == 201));
        assert_eq!(verdicts[4], Begin::Reused);
        assert_eq!(
            verdicts[5],
            Begin::Running { for_ms: 1 },
            "gone since: try again"
        );
        assert_eq!(
            verdicts[6],
            Begin::Running { for_ms: 1 },
            "lapsed since: try again"
        );
        assert_eq!(verdicts.len(), asked.len());
    }
}
