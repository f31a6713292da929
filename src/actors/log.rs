//! The log actor: appends delivery-log records (and the outbox updates they
//! imply) in batches, one transaction per batch through the commit path,
//! and prunes each organization's log to the newest
//! `webhooks.log_retention` records.
//!
//! Batches are written one at a time, in order (the actor waits for each),
//! so a job's retry update can never land after its final delete.
//!
//! Pruning must not read whole logs: the actor counts each log once and
//! then keeps count itself ([`LogLengths`]); once a log exceeds its
//! retention by a tenth (exactly, for retentions under 10) it deletes the
//! oldest surplus. The passes run off the thread the dispatcher shares:
//! there they delayed healthy deliveries by up to a second.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use crate::actors::log_lengths::{LogLengths, Pass};
use crate::actors::messages::{AppendLog, FlushLog, Touched};
use crate::commit::CommitPath;
use crate::domain::change::Write;
use crate::ids::OrgId;
use crate::metrics::Metrics;
use crate::storage::StoreError;

/// A batch is committed at this size, or after [`BATCH_WINDOW`].
const BATCH_MAX: usize = 512;
/// Longest a record waits in the buffer.
const BATCH_WINDOW: Duration = Duration::from_millis(5);
/// How often touched organizations are pruned.
const PRUNE_EVERY: Duration = Duration::from_millis(500);

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
        }
    }

    /// Writes the buffered batch; the actor handles nothing else meanwhile.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        self.flush_scheduled = false;
        if let Some(write) = self.write_batch() {
            ctx.wait(write);
        }
    }

    /// The write of the buffered batch, if any.
    fn write_batch(&mut self) -> Option<impl ActorFuture<Self, Output = ()> + 'static> {
        if self.buffer.is_empty() {
            return None;
        }
        let batch = std::mem::take(&mut self.buffer);
        let orgs: Vec<OrgId> = batch
            .iter()
            .filter_map(|w| match w {
                Write::Log(record) => Some(record.organization_id),
                _ => None,
            })
            .collect();
        let commit = self.commit.clone();
        let write = async move { commit.record_attempts(batch).await };
        Some(
            write
                .into_actor(self)
                .map(move |result, actor, _| actor.written(result, orgs)),
        )
    }

    fn written(&mut self, result: Result<Vec<Write>, StoreError>, orgs: Vec<OrgId>) {
        match result {
            Ok(batch) => self
                .metrics
                .delivery_logged(batch.iter().filter_map(|w| match w {
                    Write::Log(record) => Some(record),
                    _ => None,
                })),
            Err(err) => {
                tracing::error!(
                    error = %crate::telemetry::cause_chain(&err), records = orgs.len(),
                    "writing the delivery log failed"
                );
                for org in orgs {
                    self.lengths.not_written(org);
                }
            }
        }
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
        self.buffer.push(Write::Log(msg.record));
        self.buffer.extend(msg.job);
        if self.buffer.len() >= BATCH_MAX {
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
