//! The log actor: appends delivery-log records (and the outbox updates they
//! imply) in batches, one transaction per batch, and prunes each
//! organization's log to the newest `webhooks.log_retention` records.
//!
//! Pruning must not cost a scan of every touched log every cycle (that grew
//! with the log and slowed a 100k-event burst by a fifth), so the actor
//! keeps an upper bound of each log's length, learnt by one scan when an
//! organization is first touched and then counted up; only when the bound
//! exceeds the retention by a tenth (exactly, for retentions under 10) does
//! it count exactly and delete back to the retention. So a busy log is
//! scanned every few thousand records, not every cycle.

use std::collections::{HashMap, HashSet};
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
    /// At least as many records as each organization's log holds.
    lengths: HashMap<OrgId, usize>,
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
            lengths: HashMap::new(),
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

    /// Notes one more record of `org`.
    fn note(&mut self, org: OrgId) {
        self.touched.insert(org);
        if let Some(length) = self.lengths.get_mut(&org) {
            *length += 1;
        }
    }

    fn prune(&mut self) {
        for org in std::mem::take(&mut self.touched) {
            let storage = &self.storage;
            let bound = *self
                .lengths
                .entry(org)
                .or_insert_with(|| storage.delivery_log_len(org));
            if bound <= self.retention + self.retention / 10 {
                continue;
            }
            match self.storage.prune_delivery_log(org, self.retention) {
                Ok(remaining) => {
                    self.lengths.insert(org, remaining);
                }
                Err(err) => tracing::error!(error = %err, "pruning the delivery log failed"),
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

    fn handle(&mut self, _: FlushLog, _: &mut Self::Context) {
        self.flush();
        self.prune();
    }
}
