//! The log actor: appends delivery-log records (and the outbox updates they
//! imply) in batches, one transaction per batch, and prunes each
//! organization's log to the newest `webhooks.log_retention` records.
//!
//! Pruning must not read whole logs: the actor counts each log once and
//! then keeps count itself ([`LogLengths`]); once a log exceeds its
//! retention by a tenth (exactly, for retentions under 10) it deletes the
//! oldest surplus. The passes run on the blocking pool, off the thread the
//! dispatcher shares: there they delayed healthy deliveries by up to a
//! second.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use crate::actors::log_lengths::{LogLengths, Pass};
use crate::actors::messages::{AppendLog, FlushLog, Touched};
use crate::ids::OrgId;
use crate::metrics::Metrics;
use crate::storage::{Storage, Write};

/// A batch is committed at this size, or after [`BATCH_WINDOW`].
const BATCH_MAX: usize = 512;
/// Longest a record waits in the buffer.
const BATCH_WINDOW: Duration = Duration::from_millis(5);
/// How often touched organizations are pruned.
const PRUNE_EVERY: Duration = Duration::from_millis(500);

/// Batches delivery-log writes.
pub struct LogActor {
    storage: Storage,
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
    /// A log actor writing to `storage`, keeping `retention` records per org.
    pub fn new(storage: Storage, metrics: Arc<Metrics>, retention: usize) -> Self {
        LogActor {
            storage,
            metrics,
            retention,
            buffer: Vec::new(),
            touched: HashSet::new(),
            lengths: LogLengths::new(retention),
            flush_scheduled: false,
        }
    }

    fn flush(&mut self) {
        self.flush_scheduled = false;
        if self.buffer.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.buffer);
        match self.storage.commit(&batch) {
            Ok(()) => self
                .metrics
                .delivery_logged(batch.iter().filter_map(|w| match w {
                    Write::Log(record) => Some(record),
                    _ => None,
                })),
            Err(err) => {
                tracing::error!(error = %err, records = batch.len(), "writing the delivery log failed");
                for write in &batch {
                    if let Write::Log(record) = write {
                        self.lengths.not_written(record.organization_id);
                    }
                }
            }
        }
    }

    /// Notes one more record of `org`.
    fn note(&mut self, org: OrgId) {
        self.touched.insert(org);
        self.lengths.noted(org);
    }

    /// Starts the pruning pass each touched organization needs, on the
    /// blocking pool.
    fn prune(&mut self, ctx: &mut Context<Self>) {
        for org in std::mem::take(&mut self.touched) {
            let Some(pass) = self.lengths.start_pass(org) else {
                continue;
            };
            let (storage, keep) = (self.storage.clone(), self.retention);
            let run = actix_web::rt::task::spawn_blocking(move || match pass {
                Pass::Count => storage.prune_delivery_log(org, keep),
                Pass::Trim(count) => storage.trim_delivery_log(org, count),
            });
            ctx.spawn(run.into_actor(self).map(move |result, actor, _| {
                let outcome = result
                    .map_err(|err| err.to_string())
                    .and_then(|done| done.map_err(|err| err.to_string()));
                match outcome {
                    Ok(n) if pass == Pass::Count => actor.lengths.counted(org, n),
                    Ok(n) => actor.lengths.trimmed(org, n),
                    Err(err) => {
                        actor.lengths.failed(org);
                        tracing::error!(error = %err, "pruning the delivery log failed");
                    }
                }
            }));
        }
    }
}

impl Actor for LogActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(PRUNE_EVERY, |actor, ctx| {
            actor.flush();
            actor.prune(ctx);
        });
    }

    fn stopping(&mut self, _: &mut Self::Context) -> Running {
        self.flush();
        Running::Stop
    }
}

impl Handler<AppendLog> for LogActor {
    type Result = ();

    fn handle(&mut self, msg: AppendLog, ctx: &mut Self::Context) {
        self.note(msg.record.organization_id);
        self.buffer.push(Write::Log(msg.record));
        self.buffer.extend(msg.job);
        if self.buffer.len() >= BATCH_MAX {
            self.flush();
        } else if !self.flush_scheduled {
            self.flush_scheduled = true;
            ctx.run_later(BATCH_WINDOW, |actor, _| actor.flush());
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
    type Result = ();

    fn handle(&mut self, _: FlushLog, ctx: &mut Self::Context) {
        self.flush();
        self.prune(ctx);
    }
}
