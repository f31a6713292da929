//! The delivery queue several nodes share (CONTRACT §8), as SQL: one node
//! at a time delivers an organization, the holder of its lease
//! (`delivery_leases`), and it marks the outbox rows it holds in memory
//! with its epoch (`outbox.claim`) and the number of the read or commit
//! that marked them (`claim_read`: rows marked by a statement whose answer
//! was lost are taken again, see [`LostReads`]). A node that dies stops
//! renewing; once its leases run out another node claims them, under a new
//! epoch, and so takes over every row the dead node held: the same rows,
//! with their delivery ids, bodies and attempt numbers.
//!
//! A statement that changes several leases locks them first, in the order
//! of their organization ids: statements that overlap (a claim beside a
//! renewal, a release beside a claim) then wait for each other instead of
//! deadlocking, which would stall both for PostgreSQL's `deadlock_timeout`
//! and fail one.
//!
//! The statements made for every batch of events take their arrays through
//! scalar subqueries, so that PostgreSQL keeps one plan for them instead of
//! planning each call again (see `checks`). A read of waiting jobs finds
//! each lease by primary key (a lateral subquery kept apart by its LIMIT);
//! a claim names its leases with `= ANY` of the array instead of joining
//! it, which PostgreSQL serves from the primary key (the background
//! connections plan without sequential scans, see `connect`).
//!
//! Nodes wake each other with `NOTIFY`: a node with new jobs of an
//! organization another node holds tells that node, on its own channel,
//! in its lease claim, or in the commit itself once a claim has named the
//! holder (see `admissions`), then handing it the jobs themselves when it
//! takes them (see `handed`);
//! a stopping node tells every node which organizations it left with jobs
//! waiting. A slow poll for organizations whose lease ran out with jobs
//! waiting is the backstop for a lost notification or a killed node.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::channels::{own_channel, stopped, RELEASED_CHANNEL};
use super::connect::{Connector, IoThread};
use super::handed::HANDED;
use super::listener::{self, Listening, Wakeup};
use super::lost_reads::LostReads;
use super::rows;
use super::transact::Database;
use crate::domain::delivery::Job;
use crate::ids::{DeliveryId, OrgId};
use crate::storage::StoreError;

/// A node's hold on delivering one organization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The organization.
    pub org: OrgId,
    /// Which holder this is: every new holder gets the next one.
    pub epoch: i64,
}

/// Another node's hold on an organization, as a claim found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldElsewhere {
    /// The organization.
    pub org: OrgId,
    /// The node holding its lease (told of the claim's jobs).
    pub node: Uuid,
    /// The epoch under which that node takes jobs handed to it in
    /// notifications; `None` for a node of an earlier release.
    pub handed: Option<i64>,
    /// How long that lease had left when the claim ran.
    pub left: Duration,
}

/// What a lease claim answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claimed {
    /// The leases this node now holds.
    pub leases: Vec<Lease>,
    /// The organizations another node holds, whose holder was told.
    pub elsewhere: Vec<HeldElsewhere>,
}

/// This node's side of the shared delivery queue.
#[derive(Clone)]
pub struct SharedQueue {
    database: Database,
    connector: Arc<Connector>,
    io: Arc<IoThread>,
    /// This run of this node.
    node: Uuid,
    /// How long a lease lasts unless renewed, in milliseconds.
    lease_ms: i64,
    /// Reads of waiting jobs whose answer was lost.
    lost: Arc<LostReads>,
}

/// A node's claim of the leases of some organizations ($1) for itself
/// ($2, lasting $3 ms): those nobody holds, whose holder stopped renewing,
/// or that name it already, locked in organization order; the holders of
/// the others are told, in the same statement, that jobs of theirs wait,
/// and named in the answer with the time their leases have left and the
/// epoch under which they take handed jobs (if they do: see migration 9).
/// Public for the test of its plans.
pub const CLAIM_SQL: &str = "WITH locked AS ( \
           SELECT organization_id FROM delivery_leases \
            WHERE organization_id = ANY((SELECT $1::uuid[])::uuid[]) \
              AND (node IS NULL OR until <= now() OR node = $2) \
            ORDER BY organization_id FOR UPDATE), \
         claimed AS ( \
           UPDATE delivery_leases l SET node = $2, epoch = l.epoch + 1, handed_epoch = l.epoch + 1, \
                  until = now() + $3::int8 * interval '1 millisecond' \
            WHERE l.organization_id = ANY(ARRAY(SELECT organization_id FROM locked)) \
              AND (l.node IS NULL OR l.until <= now() OR l.node = $2) \
           RETURNING l.organization_id, l.epoch), \
         told AS ( \
           SELECT l.organization_id, l.node, \
                  GREATEST(0, extract(epoch FROM l.until - now()) * 1000)::int8 AS left_ms, \
                  CASE WHEN l.handed_epoch = l.epoch THEN l.epoch END AS handed, \
                  pg_notify('rolecall_deliveries_' || replace(l.node::text, '-', ''), \
                            l.organization_id::text) \
             FROM delivery_leases l \
            WHERE l.organization_id = ANY((SELECT $1::uuid[])::uuid[]) \
              AND l.node <> $2 AND l.until > now() \
              AND l.organization_id <> ALL(ARRAY(SELECT organization_id FROM claimed))) \
         SELECT organization_id, epoch, NULL::uuid AS holder, NULL::int8 AS left_ms, \
                NULL::int8 AS handed FROM claimed \
         UNION ALL SELECT organization_id, NULL::int8, node, left_ms, handed FROM told";

/// The claim of waiting jobs ([`SharedQueue::claim_jobs`]): per lease
/// ($1 organizations, $2 epochs, $3 limits) still this node's ($4), the
/// jobs not yet held under it, marked with its epoch and the read's number
/// ($5); rows marked by the reads in $6 (answers lost) are taken again,
/// but none of the deliveries in $7 (held in memory here).
/// The update finds each row it marks by the tuple id its locking read
/// returned: joined by key instead, PostgreSQL may hash the picked rows and
/// read the whole outbox, dead rows included, on every call (it did, with
/// two nodes: about a thousand pages a call). Public for the test of its
/// plans.
pub fn claim_jobs_sql() -> String {
    format!(
        "WITH wanted AS ( \
           SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::int8[]), (SELECT $3::int8[])) \
               AS w(org, epoch, lim)), \
         picked AS ( \
           SELECT p.ctid AS picked_tid, w.epoch AS picked_epoch \
             FROM wanted w \
            CROSS JOIN LATERAL ( \
              SELECT 1 FROM delivery_leases l \
               WHERE l.organization_id = w.org AND l.node = $4 AND l.epoch = w.epoch \
               LIMIT 1) held \
            CROSS JOIN LATERAL ( \
              SELECT ctid FROM outbox \
               WHERE organization_id = w.org \
                 AND (claim IS DISTINCT FROM w.epoch OR claim_read = ANY((SELECT $6::int8[])::int8[])) \
                 AND delivery_id <> ALL((SELECT $7::uuid[])::uuid[]) \
               ORDER BY delivery_id LIMIT w.lim FOR UPDATE SKIP LOCKED) p) \
         UPDATE outbox SET claim = picked.picked_epoch, claim_read = $5 FROM picked \
          WHERE outbox.ctid = ANY(ARRAY(SELECT picked_tid FROM picked)) \
            AND outbox.ctid = picked.picked_tid \
         RETURNING {}",
        rows::JOB
    )
}

/// How a claim of waiting jobs is planned, on top of the background
/// connections' settings: by an index scan in key order, never a bitmap
/// scan. A queue table is mostly dead rows between vacuums (each job is
/// inserted and deleted within milliseconds, and autovacuum visits once a
/// minute); an index scan learns which entries are dead and skips them on
/// the next call, while a bitmap scan visits the page of every entry of the
/// organization, dead or not, on every call. In 60 s runs on two nodes the
/// planner switched to the bitmap scan once the statistics showed a small
/// table, and each read then cost 5 to 28 ms instead of tens of µs.
/// Public for the test of its plans.
pub const CLAIM_JOBS_SESSION: &[(&str, &str)] =
    &[("enable_seqscan", "off"), ("enable_bitmapscan", "off")];

impl SharedQueue {
    /// This node's side, for a run identified by a new id.
    pub(super) fn new(
        database: Database,
        connector: Arc<Connector>,
        io: Arc<IoThread>,
        lease: Duration,
    ) -> Self {
        SharedQueue {
            database,
            connector,
            io,
            node: Uuid::now_v7(),
            lease_ms: i64::try_from(lease.as_millis()).unwrap_or(i64::MAX),
            lost: Arc::default(),
        }
    }

    /// The numbers of this node's reads and commits that mark rows, and
    /// of those whose answer was lost.
    pub fn lost_reads(&self) -> Arc<LostReads> {
        self.lost.clone()
    }

    /// This run's node id.
    pub fn node(&self) -> Uuid {
        self.node
    }

    /// How long a lease lasts unless renewed.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.max(0) as u64)
    }

    /// Claims the leases of `orgs` that nobody holds, whose holder stopped
    /// renewing, or that still name this node (which stopped trusting them
    /// when it could not renew them: after a database outage it goes on at
    /// once instead of waiting for them to run out); for each held by
    /// another node, tells that node in the same statement that jobs of it
    /// wait.
    pub async fn claim(&self, orgs: &[OrgId]) -> Result<Claimed, StoreError> {
        let ids: Vec<Uuid> = orgs.iter().map(|org| org.0).collect();
        let rows = self
            .database
            .query(
                "a delivery lease claim",
                CLAIM_SQL,
                &[&ids, &self.node, &self.lease_ms],
            )
            .await?;
        let mut claimed = Claimed::default();
        for row in &rows {
            let org = OrgId(row.try_get(0).map_err(StoreError::codec)?);
            let epoch: Option<i64> = row.try_get(1).map_err(StoreError::codec)?;
            let holder: Option<Uuid> = row.try_get(2).map_err(StoreError::codec)?;
            let left_ms: Option<i64> = row.try_get(3).map_err(StoreError::codec)?;
            let handed: Option<i64> = row.try_get(4).map_err(StoreError::codec)?;
            match (epoch, holder, left_ms) {
                (Some(epoch), _, _) => claimed.leases.push(Lease { org, epoch }),
                (None, Some(node), Some(left_ms)) => claimed.elsewhere.push(HeldElsewhere {
                    org,
                    node,
                    handed,
                    left: Duration::from_millis(left_ms.max(0) as u64),
                }),
                _ => {}
            }
        }
        Ok(claimed)
    }

    /// Claims up to `limit` leases whose organizations have jobs waiting
    /// and nobody delivering them: released, left by a node that stopped
    /// renewing (killed), or naming this node although it holds none of
    /// them (not one of `known`, those it holds or is releasing). A look
    /// or release whose answer was lost leaves such a lease, and so does
    /// one this node stopped trusting before it ran out: taken again now,
    /// its jobs would otherwise wait until it ran out (CONTRACT §9).
    pub async fn claim_abandoned(
        &self,
        limit: usize,
        known: &[OrgId],
    ) -> Result<Vec<Lease>, StoreError> {
        const SQL: &str = "WITH free AS ( \
               SELECT l.organization_id FROM delivery_leases l \
                WHERE (l.node IS NULL OR l.until <= now() \
                       OR (l.node = $1 AND l.organization_id NOT IN (SELECT unnest($4::uuid[])))) \
                  AND EXISTS (SELECT 1 FROM outbox o WHERE o.organization_id = l.organization_id) \
                LIMIT $3 FOR UPDATE OF l SKIP LOCKED) \
             UPDATE delivery_leases l SET node = $1, epoch = l.epoch + 1, \
                    handed_epoch = l.epoch + 1, \
                    until = now() + $2::int8 * interval '1 millisecond' \
               FROM free WHERE l.organization_id = free.organization_id \
             RETURNING l.organization_id, l.epoch";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let known: Vec<Uuid> = known.iter().map(|org| org.0).collect();
        let rows = self
            .database
            .query(
                "a look for abandoned deliveries",
                SQL,
                &[&self.node, &self.lease_ms, &limit, &known],
            )
            .await?;
        leases(&rows)
    }

    /// Extends `held`; answers the organizations still held (any other was
    /// taken over: this node's lease had run out).
    pub async fn renew(&self, held: &[Lease]) -> Result<Vec<OrgId>, StoreError> {
        const SQL: &str = "WITH locked AS ( \
               SELECT l.organization_id FROM delivery_leases l \
                 JOIN unnest($3::uuid[], $4::int8[]) AS h(id, epoch) \
                   ON l.organization_id = h.id AND l.epoch = h.epoch \
                WHERE l.node = $1 ORDER BY l.organization_id FOR UPDATE OF l) \
             UPDATE delivery_leases l \
                SET until = now() + $2::int8 * interval '1 millisecond' \
               FROM locked k \
              WHERE l.organization_id = k.organization_id AND l.node = $1 \
             RETURNING l.organization_id";
        let (ids, epochs) = columns(held);
        let rows = self
            .database
            .query(
                "a delivery lease renewal",
                SQL,
                &[&self.node, &self.lease_ms, &ids, &epochs],
            )
            .await?;
        rows.iter()
            .map(|row| row.try_get("organization_id").map(OrgId))
            .collect::<Result<_, _>>()
            .map_err(StoreError::codec)
    }

    /// Gives up every lease this node holds (at shutdown), telling every
    /// node which of them have jobs waiting, and that this node stopped
    /// (so that their commits stop telling it of new jobs).
    pub async fn release_all(&self) -> Result<usize, StoreError> {
        const SQL: &str = "WITH locked AS ( \
               SELECT organization_id FROM delivery_leases WHERE node = $1 \
                ORDER BY organization_id FOR UPDATE), \
             released AS ( \
               UPDATE delivery_leases l SET node = NULL, until = '-infinity' FROM locked k \
                WHERE l.organization_id = k.organization_id AND l.node = $1 \
               RETURNING l.organization_id), \
             told AS ( \
               SELECT pg_notify($2, r.organization_id::text) FROM released r \
                WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.organization_id = r.organization_id)), \
             stop AS (SELECT pg_notify($2, $3)) \
             SELECT (SELECT count(*) FROM released), (SELECT count(*) FROM told), \
                    (SELECT count(*) FROM stop)";
        let rows = self
            .database
            .query(
                "a release of this node's delivery leases",
                SQL,
                &[&self.node, &RELEASED_CHANNEL, &stopped(self.node)],
            )
            .await?;
        let released: i64 = match rows.first() {
            Some(row) => row.try_get(0).map_err(StoreError::codec)?,
            None => 0,
        };
        Ok(usize::try_from(released).unwrap_or(0))
    }

    /// Gives up `held`, telling every node which of them have jobs waiting.
    pub async fn release(&self, held: &[Lease]) -> Result<(), StoreError> {
        const SQL: &str = "WITH locked AS ( \
               SELECT l.organization_id FROM delivery_leases l \
                 JOIN unnest($2::uuid[], $3::int8[]) AS h(id, epoch) \
                   ON l.organization_id = h.id AND l.epoch = h.epoch \
                WHERE l.node = $1 ORDER BY l.organization_id FOR UPDATE OF l), \
             released AS ( \
               UPDATE delivery_leases l SET node = NULL, until = '-infinity' FROM locked k \
                WHERE l.organization_id = k.organization_id AND l.node = $1 \
               RETURNING l.organization_id), \
             told AS ( \
               SELECT pg_notify($4, r.organization_id::text) FROM released r \
                WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.organization_id = r.organization_id)) \
             SELECT count(*) FROM told";
        if held.is_empty() {
            return Ok(());
        }
        let (ids, epochs) = columns(held);
        self.database
            .query(
                "a delivery lease release",
                SQL,
                &[&self.node, &ids, &epochs, &RELEASED_CHANNEL],
            )
            .await?;
        Ok(())
    }

    /// For each of `reads`, up to its limit of the jobs of the lease's
    /// organization not yet held under it, now marked held: one statement
    /// for all, oldest first per organization; none for a lease that is
    /// another node's by now. Jobs marked by a read of this node whose
    /// answer was lost are taken again: they are held nowhere; so are jobs
    /// handed to this node in notifications it did not take, with
    /// `handed`: every such job but those it did take (`handed`'s ids).
    pub async fn claim_jobs(
        &self,
        reads: &[(Lease, usize)],
        handed: Option<&[DeliveryId]>,
    ) -> Result<Vec<Job>, StoreError> {
        let sql = claim_jobs_sql();
        let (leases, limits): (Vec<Lease>, Vec<i64>) = reads
            .iter()
            .map(|(lease, limit)| (*lease, i64::try_from(*limit).unwrap_or(i64::MAX)))
            .unzip();
        let (orgs, epochs) = columns(&leases);
        let number = self.lost.number();
        let mut again = self.lost.to_take_again(std::time::Instant::now());
        let taken: Vec<Uuid> = handed.unwrap_or_default().iter().map(|id| id.0).collect();
        if handed.is_some() {
            again.push(HANDED);
        }
        let rows = self
            .database
            .query_planned_with(
                "a claim of waiting jobs",
                CLAIM_JOBS_SESSION,
                &sql,
                &[&orgs, &epochs, &limits, &self.node, &number, &again, &taken],
            )
            .await
            .inspect_err(|_| self.lost.failed(number, std::time::Instant::now()))?;
        let mut jobs: Vec<Job> = rows.iter().map(rows::job).collect::<Result<_, _>>()?;
        jobs.sort_by_key(|job| (job.organization_id, job.delivery_id));
        Ok(jobs)
    }

    /// Listens for this node's wake-ups (see [`listener`]); stops when the
    /// answer is dropped.
    pub fn listen(&self, wake: impl Fn(Wakeup) + Send + Sync + 'static) -> Listening {
        let channels = vec![own_channel(self.node), RELEASED_CHANNEL.to_owned()];
        let limits = listener::Limits {
            round: self.database.round_limit(),
            probe: super::idle_probe::answer_within(self.database.timeout),
        };
        listener::listen(&self.io, self.connector.clone(), channels, limits, wake)
    }
}

/// Leases from rows of (organization_id, epoch).
fn leases(rows: &[tokio_postgres::Row]) -> Result<Vec<Lease>, StoreError> {
    rows.iter()
        .map(|row| {
            Ok(Lease {
                org: OrgId(row.try_get(0).map_err(StoreError::codec)?),
                epoch: row.try_get(1).map_err(StoreError::codec)?,
            })
        })
        .collect()
}

/// The organizations and epochs of `leases`, as two arrays.
fn columns(leases: &[Lease]) -> (Vec<Uuid>, Vec<i64>) {
    leases
        .iter()
        .map(|lease| (lease.org.0, lease.epoch))
        .unzip()
}
