//! The log actor: appends delivery-log records (and the outbox updates they
//! imply) in batches, one transaction per batch, and prunes each
//! organization's log to the newest `webhooks.log_retention` records.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

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
                tracing::error!(error = %err, records = batch.len(), "writing the delivery log failed")
            }
        }
    }

    fn prune(&mut self) {
        for org in std::mem::take(&mut self.touched) {
            if let Err(err) = self.storage.prune_delivery_log(org, self.retention) {
                tracing::error!(error = %err, "pruning the delivery log failed");
            }
        }
    }
}

impl Actor for LogActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(PRUNE_EVERY, |actor, _| {
            actor.flush();
            actor.prune();
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
        self.touched.insert(msg.record.organization_id);
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
        self.touched.insert(msg.0);
    }
}

impl Handler<FlushLog> for LogActor {
    type Result = ();

    fn handle(&mut self, _: FlushLog, _: &mut Self::Context) {
        self.flush();
        self.prune();
    }
}
