//! The log actor: appends delivery-log records (and the outbox updates they
//! imply) in batches, one transaction per batch through the commit path,
//! and prunes each organization's log to the newest
//! `webhooks.log_retention` records.
//!
//! Batches are committed one at a time, in order (the actor waits for each
//! commit), so a job's retry update can never land after its final delete.
//! Their durability is confirmed later, with the next flush others cause:
//! waiting for it before the next batch cost about 7 % more CPU per event
//! in a burst (BENCHMARKS.md). A batch counts as written once durable; a
//! failed flush loses it and every batch committed after it, which go back
//! to the front of the buffer, in order, to be written again.
//!
//! Pruning must not read whole logs: the actor counts each log once and
//! then keeps count itself ([`LogLengths`]); once a log exceeds its
//! retention by a tenth (exactly, for retentions under 10) it deletes the
//! oldest surplus. On a queue several nodes share, where other nodes write
//! the same logs, every pass keeps the newest records by the count the
//! store keeps instead. The passes run off the thread the dispatcher
//! shares: there they delayed healthy deliveries by up to a second.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use crate::actors::log_lengths::{LogLengths, Pass};
use crate::actors::messages::{AppendLog, FlushLog, Touched};
use crate::actors::unwritten::Unwritten;
use crate::commit::CommitPath;
use crate::domain::change::Write;
use crate::ids::{LogId, OrgId};
use crate::metrics::Metrics;
use crate::storage::{Durability, StoreError};

/// A batch is committed at this size, or after [`BATCH_WINDOW`].
const BATCH_MAX: usize = 512;
/// ... or at this many bytes of envelopes and bodies, so that one batch
/// never needs more room on the disk than a full one has to spare.
const BATCH_BYTES: usize = 1024 * 1024;
/// Longest a record waits in the buffer.
const BATCH_WINDOW: Duration = Duration::from_millis(5);
/// How often touched organizations are pruned.
const PRUNE_EVERY: Duration = Duration::from_millis(500);
/// How long a batch the store refused waits before it is written again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Most writes kept while the store refuses them: delivery results of the
/// attempts in flight and queued in memory; beyond it the oldest go (their
/// jobs stay in the outbox, so they are attempted again after a restart).
const BUFFER_MAX: usize = 65_536;

/// Batches delivery-log writes.
pub struct LogActor {
    commit: Arc<CommitPath>,
    metrics: Arc<Metrics>,
    retention: usize,
    buffer: Vec<Write>,
    /// Organizations with new records since the last prune.
    touched: HashSet<OrgId>,
    /// Each organization's log length, as far as known.
    lengths: LogLengths,
    flush_scheduled: bool,
    /// A batch the store refused is waiting to be written again.
    retry_scheduled: bool,
    /// How many writes at the front of the buffer may have landed already
    /// (their write failed with its answer lost): written again without
    /// the records the store holds.
    in_doubt: usize,
    /// Envelope bytes appended since the last flush was started.
    buffered_bytes: usize,
    /// Batches committed but not yet durable, oldest first, by number.
    unconfirmed: VecDeque<(u64, Vec<Write>)>,
    /// The number of the next batch.
    next_batch: u64,
    /// Counts the results not yet durable, on a queue nodes share.
    unwritten: Option<Arc<Unwritten>>,
}

impl LogActor {
    /// A log actor writing through `commit`, keeping `retention` records per org.
    pub fn new(commit: Arc<CommitPath>, metrics: Arc<Metrics>, retention: usize) -> Self {
        LogActor {
            commit,
            metrics,
            retention,
            buffer: Vec::new(),
            touched: HashSet::new(),
            lengths: LogLengths::new(retention),
            flush_scheduled: false,
            retry_scheduled: false,
            in_doubt: 0,
            buffered_bytes: 0,
            unconfirmed: VecDeque::new(),
            next_batch: 0,
            unwritten: None,
        }
    }

    /// On a queue several nodes share: tells `unwritten` of each result
    /// once it is durable (the dispatcher counted it when it sent it), and
    /// prunes each log by the count the store keeps, since other nodes
    /// write it too ([`LogLengths::shared`]).
    pub fn on_shared_queue(mut self, unwritten: Arc<Unwritten>) -> Self {
        self.unwritten = Some(unwritten);
        self.lengths = LogLengths::shared(self.retention);
        self
    }

    /// `writes`' results are durable, or given up.
    fn written(&self, writes: &[Write]) {
        if let Some(unwritten) = &self.unwritten {
            unwritten.written(writes.iter().filter_map(|write| match write {
                Write::Log(record) => Some((record.organization_id, record.delivery_id)),
                _ => None,
            }));
        }
    }

    /// Writes the buffered batch; the actor handles nothing else meanwhile.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        self.flush_scheduled = false;
        if let Some(write) = self.write_batch() {
            ctx.wait(write);
        }
    }

    /// The write of the next batch from the buffer, if any (none while a
    /// refused batch waits to be written again).
    fn write_batch(&mut self) -> Option<impl ActorFuture<Self, Output = ()> + 'static> {
        if self.buffer.is_empty() || self.retry_scheduled {
            return None;
        }
        let mut bytes = 0;
        let count = self
            .buffer
            .iter()
            .take(BATCH_MAX)
            .take_while(|write| {
                bytes += weight(write);
                bytes <= BATCH_BYTES
            })
            .count()
            .max(1);
        let batch: Vec<Write> = self.buffer.drain(..count).collect();
        let doubtful = self.in_doubt.min(batch.len());
        self.in_doubt -= doubtful;
        let commit = self.commit.clone();
        let write = async move {
            let result = write_again(&commit, &batch, doubtful).await;
            (batch, result)
        };
        Some(
            write
                .into_actor(self)
                .map(move |(batch, result), actor, ctx| actor.committed(batch, result, ctx)),
        )
    }

    /// Waits for a committed batch to be durable (without holding up the
    /// next); gives a refused one back, in order, to write again once the
    /// store takes writes (deliveries carry on meanwhile).
    fn committed(
        &mut self,
        batch: Vec<Write>,
        result: Result<Durability, StoreError>,
        ctx: &mut Context<Self>,
    ) {
        match result {
            Ok(durability) => {
                let number = self.next_batch;
                self.next_batch += 1;
                self.unconfirmed.push_back((number, batch));
                ctx.spawn(
                    durability
                        .wait()
                        .into_actor(self)
                        .map(move |result, actor, ctx| actor.durable(number, result, ctx)),
                );
                // A flush writes everything buffered, a batch at a time.
                if !self.buffer.is_empty() {
                    self.flush(ctx);
                }
            }
            Err(err) => self.lost(vec![batch], &err, ctx),
        }
    }

    /// Counts batch `number` as written once durable; a failed flush lost
    /// it and every batch committed after it.
    fn durable(&mut self, number: u64, result: Result<(), StoreError>, ctx: &mut Context<Self>) {
        match result {
            Ok(()) => {
                while self
                    .unconfirmed
                    .front()
                    .is_some_and(|(first, _)| *first <= number)
                {
                    let Some((_, batch)) = self.unconfirmed.pop_front() else {
                        break;
                    };
                    self.written(&batch);
                    self.metrics
                        .delivery_logged(batch.iter().filter_map(|w| match w {
                            Write::Log(record) => Some(record),
                            _ => None,
                        }));
                }
            }
            Err(err) => {
                let lost: Vec<Vec<Write>> = self.unconfirmed.drain(..).map(|(_, b)| b).collect();
                if !lost.is_empty() {
                    self.lost(lost, &err, ctx);
                }
            }
        }
    }

    /// Puts `batches` (oldest first) back at the front of the buffer and
    /// writes them again once the store takes writes.
    fn lost(&mut self, batches: Vec<Vec<Write>>, err: &StoreError, ctx: &mut Context<Self>) {
        let writes: Vec<Write> = batches.into_iter().flatten().collect();
        tracing::warn!(
            error = %crate::telemetry::cause_chain(err), writes = writes.len(),
            "writing the delivery log failed; it is written again once the store takes writes"
        );
        self.in_doubt += writes.len();
        let newer = std::mem::replace(&mut self.buffer, writes);
        self.buffer.extend(newer);
        let excess = self.buffer.len().saturating_sub(BUFFER_MAX);
        self.in_doubt = self.in_doubt.saturating_sub(excess);
        if excess > 0 {
            tracing::error!(
                writes = excess,
                "the unwritten delivery log is full; its oldest results are dropped \
                 (their deliveries stay in the outbox and are attempted again after a restart)"
            );
            let dropped: Vec<Write> = self.buffer.drain(..excess).collect();
            self.written(&dropped);
            for write in dropped {
                if let Write::Log(record) = write {
                    self.lengths.not_written(record.organization_id);
                }
            }
        }
        self.retry_scheduled = true;
        ctx.run_later(RETRY_AFTER, |actor, ctx| {
            actor.retry_scheduled = false;
            actor.flush(ctx);
        });
    }

    /// Notes one more record of `org`.
    fn note(&mut self, org: OrgId) {
        self.touched.insert(org);
        self.lengths.noted(org);
    }

    /// Starts the pruning pass each touched organization needs.
    fn prune(&mut self, ctx: &mut Context<Self>) {
        for org in std::mem::take(&mut self.touched) {
            let Some(pass) = self.lengths.start_pass(org) else {
                continue;
            };
            let (commit, keep) = (self.commit.clone(), self.retention);
            let run = async move {
                match pass {
                    Pass::Count => commit.prune_delivery_log(org, keep).await,
                    Pass::Trim(count) => commit.trim_delivery_log(org, count).await,
                }
            };
            ctx.spawn(
                run.into_actor(self)
                    .map(move |result, actor, _| match result {
                        Ok(n) if pass == Pass::Count => actor.lengths.counted(org, n),
                        Ok(n) => actor.lengths.trimmed(org, n),
                        Err(err) => {
                            actor.lengths.failed(org);
                            tracing::error!(
                                error = %crate::telemetry::cause_chain(&err),
                                "pruning the delivery log failed"
                            );
                        }
                    }),
            );
        }
    }
}

/// About how many bytes a write of the log actor stores.
fn weight(write: &Write) -> usize {
    match write {
        Write::Log(record) => {
            record.envelope.len() + record.response_body.as_ref().map_or(0, String::len)
        }
        Write::PutJob(job) | Write::RetryJob(job) => job.body.len(),
        _ => 0,
    }
}

impl Actor for LogActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(PRUNE_EVERY, |actor, ctx| {
            actor.flush(ctx);
            actor.prune(ctx);
        });
    }
}

impl Handler<AppendLog> for LogActor {
    type Result = ();

    fn handle(&mut self, msg: AppendLog, ctx: &mut Self::Context) {
        self.note(msg.record.organization_id);
        self.buffered_bytes += msg.record.envelope.len();
        self.buffer.push(Write::Log(msg.record));
        self.buffer.extend(msg.job);
        if self.buffer.len() >= BATCH_MAX || self.buffered_bytes >= BATCH_BYTES {
            self.buffered_bytes = 0;
            self.flush(ctx);
        } else if !self.flush_scheduled {
            self.flush_scheduled = true;
            ctx.run_later(BATCH_WINDOW, |actor, ctx| actor.flush(ctx));
        }
    }
}

impl Handler<Touched> for LogActor {
    type Result = ();

    fn handle(&mut self, msg: Touched, _: &mut Self::Context) {
        self.note(msg.0);
    }
}

/// Writes everything `log` holds. A flush answers once its first batch is
/// written, and sets the rest going before the actor handles anything else;
/// so a second flush answers once those are written too.
pub async fn flush_all(log: &Recipient<FlushLog>) -> Result<(), actix::MailboxError> {
    log.send(FlushLog).await?;
    log.send(FlushLog).await
}

impl Handler<FlushLog> for LogActor {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _: FlushLog, ctx: &mut Self::Context) -> Self::Result {
        self.prune(ctx);
        match self.write_batch() {
            Some(write) => AtomicResponse::new(Box::pin(write)),
            None => AtomicResponse::new(Box::pin(fut::ready(()))),
        }
    }
}

/// Writes `batch`, whose first `doubtful` writes may have landed already:
/// a write whose answer was lost. The store is asked which of their log
/// records it holds, and those are left out; the rest of such a write
/// (deleting a finished job, updating one to retry) is the same done twice.
/// Without this, the insert of a record already there failed every time,
/// and no outcome was written again (#30).
async fn write_again(
    commit: &CommitPath,
    batch: &[Write],
    doubtful: usize,
) -> Result<Durability, StoreError> {
    let keys: Vec<(OrgId, LogId)> = batch[..doubtful]
        .iter()
        .filter_map(|write| match write {
            Write::Log(record) => Some((record.organization_id, record.id)),
            _ => None,
        })
        .collect();
    if keys.is_empty() {
        return commit.record_attempts(batch).await;
    }
    let landed: HashSet<(OrgId, LogId)> = commit
        .store()
        .logged_already(&keys)
        .await?
        .into_iter()
        .collect();
    if landed.is_empty() {
        return commit.record_attempts(batch).await;
    }
    tracing::info!(
        records = landed.len(),
        "delivery-log records a write whose answer was lost had written; not written again"
    );
    let rest: Vec<Write> = batch
        .iter()
        .enumerate()
        .filter(|(at, write)| match write {
            Write::Log(record) => {
                *at >= doubtful || !landed.contains(&(record.organization_id, record.id))
            }
            _ => true,
        })
        .map(|(_, write)| write.clone())
        .collect();
    commit.record_attempts(&rest).await
}
