//! The dispatcher: starts attempts as slots free up ([`FairQueue`]),
//! decides what becomes of each delivery after an attempt
//! ([`next_step`]), and hands the result to the log actor. Retries wait on
//! a timer: due `retry_delay_ms` after the attempt ended. It holds only a
//! window of each organization's deliveries ([`Backlog`]); the rest wait in
//! the outbox and are read in order as the window empties. When nodes
//! share one queue, it delivers only the organizations whose leases it
//! holds ([`super::shared`]).

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::actors::backlog::{Backlog, Read, Spill};
use crate::actors::fair_queue::{FairQueue, Limits};
use crate::actors::messages::{
    AppendLog, AttemptFinished, AttemptNotMade, Deliver, Drain, DropOrg, Enqueue, NotMade,
};
use crate::actors::shared::{Shared, UNCHECKED_PAUSE};
use crate::actors::unwritten::Unwritten;
use crate::admissions::Admissions;
use crate::domain::change::Write;
use crate::domain::delivery::{next_step, AttemptOutcome, Job, LogRecord, NextStep};
use crate::ids::{DeliveryId, OrgId};
use crate::storage::postgres::{Lease, SharedQueue};
use crate::storage::Store;
use crate::time::Timestamp;

mod sharing;
pub use sharing::{ReleaseLeases, Wake};

/// How long a failed read of the outbox waits before it is tried again.
const READ_RETRY: Duration = Duration::from_secs(1);
/// Jobs one move out of the database's memory takes at most (one
/// transaction); another follows while more wait.
const SPILL_AT_MOST: usize = 8192;
/// How long a failed move out of memory waits before it is tried again.
const SPILL_RETRY: Duration = Duration::from_secs(10);

/// Schedules attempts.
pub struct Dispatcher {
    pub(super) queue: FairQueue,
    /// Which deliveries are held, and which wait in the outbox.
    pub(super) backlog: Backlog,
    /// Where the backlog waits (reads only: results go through the log actor).
    store: Store,
    /// Jobs waiting on a timer (retries, recovered jobs not yet due).
    scheduled: usize,
    retry_delay: Duration,
    /// The delivery actors, one per delivery thread, used in turn.
    workers: Vec<Recipient<Deliver>>,
    next_worker: usize,
    log: Recipient<AppendLog>,
    pub(super) draining: bool,
    drained: Vec<oneshot::Sender<()>>,
    /// The queue other nodes share, when they do.
    pub(super) shared: Option<Shared>,
}

impl Dispatcher {
    /// A dispatcher starting attempts on `workers`, recording their results
    /// with `log`, and holding at most `window` deliveries of an
    /// organization (the rest it reads from `store`'s outbox).
    pub fn new(
        limits: Limits,
        retry_delay: Duration,
        window: usize,
        store: Store,
        workers: Vec<Recipient<Deliver>>,
        log: Recipient<AppendLog>,
    ) -> Self {
        Dispatcher {
            queue: FairQueue::new(limits),
            backlog: Backlog::new(window),
            store,
            scheduled: 0,
            retry_delay,
            workers,
            next_worker: 0,
            log,
            draining: false,
            drained: Vec::new(),
            shared: None,
        }
    }

    /// Delivers on `queue`, shared with other nodes: only the
    /// organizations whose leases this node holds; `unwritten` counts the
    /// outcomes sent to the log actor (which tells it of each once durable)
    /// until they are, since a lease is given up only then. Attempts start within
    /// twice the limits, and their requests wait for permits within them
    /// ([`crate::actors::send_permits`]).
    pub fn sharing(
        mut self,
        queue: SharedQueue,
        unwritten: Arc<Unwritten>,
        admissions: Arc<Admissions>,
    ) -> Self {
        let limits = self.queue.limits();
        self.queue = FairQueue::new(limits.doubled());
        self.shared = Some(Shared::new(queue, unwritten, admissions, limits));
        self
    }

    /// Queues `job` now, or when it is due; on a shared queue only while
    /// this node holds the organization's lease.
    fn schedule(&mut self, job: Job, ctx: &mut Context<Self>) {
        let lease = self.lease_of(job.organization_id);
        if !self.holds(job.organization_id, lease) {
            return;
        }
        let wait = job.due_at.millis() - Timestamp::now().millis();
        if wait <= 0 {
            self.queue.push(job);
        } else {
            self.scheduled += 1;
            ctx.run_later(Duration::from_millis(wait as u64), move |act, _| {
                act.scheduled = act.scheduled.saturating_sub(1);
                // Not if the lease was lost meanwhile: the job is another node's.
                if act.holds(job.organization_id, lease) {
                    act.queue.push(job);
                    act.pump();
                }
            });
        }
    }

    /// This node's lease on `org` (`None` also when no queue is shared).
    fn lease_of(&self, org: OrgId) -> Option<Lease> {
        self.shared
            .as_ref()
            .and_then(|shared| shared.leases.of(org))
    }

    /// Whether this node delivers `org` under `lease`: always when no queue
    /// is shared, else while that lease is the one held.
    pub(super) fn holds(&self, org: OrgId, lease: Option<Lease>) -> bool {
        match &self.shared {
            None => true,
            Some(shared) => lease.is_some() && shared.leases.of(org) == lease,
        }
    }

    /// Starts attempts while there are free slots.
    fn pump(&mut self) {
        if self.draining || self.workers.is_empty() {
            return;
        }
        let now = std::time::Instant::now();
        let mut untrusted = false;
        while let Some(job) = self.queue.start_next() {
            // On a shared queue, not under a lease that was not renewed in time.
            let gate = match self.shared.as_mut().map(|shared| shared.start(&job, now)) {
                None => None,
                Some(Some(gate)) => Some(gate),
                Some(None) => {
                    self.slot_freed(job.organization_id);
                    untrusted = true;
                    continue;
                }
            };
            let worker = &self.workers[self.next_worker % self.workers.len()];
            self.next_worker = self.next_worker.wrapping_add(1);
            worker.do_send(Deliver(job, gate));
        }
        if untrusted {
            let lost = self.shared.as_mut().map(|shared| shared.expired(now));
            for org in lost.unwrap_or_default() {
                self.lose(org);
            }
        }
    }

    /// An attempt of `org` ended or was not made: its slot is free (and,
    /// with none left started, its permits are forgotten).
    fn slot_freed(&mut self, org: OrgId) {
        self.queue.finished(org);
        if self.queue.in_flight_of(org) == 0 {
            if let Some(shared) = self.shared.as_mut() {
                shared.permits.forget(org);
            }
        }
    }

    /// Reads the next part of `org`'s backlog when its window has room.
    pub(super) fn read_backlog(&mut self, org: OrgId, ctx: &mut Context<Self>) {
        if self.shared.is_some() {
            self.claim_backlog(org, ctx);
            return;
        }
        let Some(read) = self.backlog.next_read(org) else {
            return;
        };
        let store = self.store.clone();
        let reading = async move { store.outbox_after(read.org, read.after, read.limit).await };
        ctx.spawn(
            reading
                .into_actor(self)
                .map(move |result, act, ctx| act.backlog_read(read, result, ctx)),
        );
    }

    fn backlog_read(
        &mut self,
        read: Read,
        result: Result<Vec<Job>, crate::storage::StoreError>,
        ctx: &mut Context<Self>,
    ) {
        match result {
            Ok(jobs) => self.read_done(read, jobs, ctx),
            Err(err) => self.read_failed(read, &err, ctx),
        }
    }

    /// `read` returned `jobs`: they are held, and the next read follows
    /// (after a move out of memory, if one is due).
    pub(super) fn read_done(&mut self, read: Read, jobs: Vec<Job>, ctx: &mut Context<Self>) {
        for job in self.backlog.read_done(read, jobs) {
            self.schedule(job, ctx);
        }
        self.pump();
        self.spill_backlog(read.org, ctx);
        self.read_backlog(read.org, ctx);
        self.offer_room(read.org);
    }

    /// Moves the cold part of `org`'s backlog out of the database's memory
    /// once it has grown long (on a store that needs it, and one no other
    /// node shares: there the outbox is the shared queue's).
    fn spill_backlog(&mut self, org: OrgId, ctx: &mut Context<Self>) {
        if self.shared.is_some() || !self.store.spills() {
            return;
        }
        let Some(spill) = self.backlog.next_spill(org) else {
            return;
        };
        let store = self.store.clone();
        let moving = async move {
            store
                .spill(spill.org, spill.after, spill.keep, SPILL_AT_MOST)
                .await
        };
        ctx.spawn(
            moving
                .into_actor(self)
                .map(move |result, act, ctx| act.spilled(spill, result, ctx)),
        );
    }

    /// `spill` is over: reads may follow, and the next move if more wait.
    fn spilled(
        &mut self,
        spill: Spill,
        result: Result<crate::storage::Spilled, crate::storage::StoreError>,
        ctx: &mut Context<Self>,
    ) {
        let more = match result {
            Ok(spilled) => spilled.more,
            Err(err) => {
                // The jobs stay in the outbox, in memory's way only.
                tracing::warn!(
                    organization_id = %spill.org, error = %crate::telemetry::cause_chain(&err),
                    "moving a backlog out of memory failed; trying again shortly"
                );
                ctx.run_later(SPILL_RETRY, move |act, ctx| {
                    act.backlog.spill_again(spill.org);
                    act.spill_backlog(spill.org, ctx);
                });
                false
            }
        };
        self.backlog.spill_done(spill.org, more);
        self.read_backlog(spill.org, ctx);
        self.spill_backlog(spill.org, ctx);
    }

    /// `read` failed: it is tried again shortly.
    pub(super) fn read_failed(
        &mut self,
        read: Read,
        err: &crate::storage::StoreError,
        ctx: &mut Context<Self>,
    ) {
        self.backlog.read_failed(read);
        tracing::warn!(
            organization_id = %read.org, error = %crate::telemetry::cause_chain(err),
            "reading the outbox failed; trying again shortly"
        );
        ctx.run_later(READ_RETRY, move |act, ctx| act.read_backlog(read.org, ctx));
    }

    /// A held delivery `id` of `org` finished: its place goes to the next one.
    fn released(&mut self, org: OrgId, id: DeliveryId, ctx: &mut Context<Self>) {
        self.backlog.released(org, id);
        self.read_backlog(org, ctx);
        self.offer_room(org);
    }

    /// Records an attempt and decides the job's fate: done, or attempted
    /// again later (then returned).
    fn record(&mut self, mut job: Job, outcome: AttemptOutcome) -> Option<Job> {
        if let Some(shared) = &self.shared {
            shared.unwritten.sent(job.organization_id, job.delivery_id);
        }
        let attempt = job.attempts_made + 1;
        let step = next_step(attempt, &outcome, Timestamp::now(), self.retry_delay);
        // Ids and the error only: the endpoint URL may carry credentials of the subscriber's.
        let error = outcome.error();
        if step == NextStep::Done && error.is_some() {
            tracing::warn!(
                organization_id = %job.organization_id, delivery_id = %job.delivery_id,
                event = %job.event, attempt, error = error.as_deref().unwrap_or(""),
                "delivery failed; not retried"
            );
        } else {
            tracing::debug!(
                organization_id = %job.organization_id, delivery_id = %job.delivery_id,
                event = %job.event, attempt, succeeded = outcome.succeeded(),
                error = error.as_deref().unwrap_or(""), "delivery attempt"
            );
        }
        match step {
            NextStep::Done => {
                // A finished job's envelope moves into its record.
                let envelope = std::mem::take(&mut job.body);
                let record = LogRecord::of_attempt(
                    job.organization_id,
                    job.delivery_id,
                    &job.event,
                    attempt,
                    &outcome,
                    envelope,
                );
                let delete = Write::DeleteJob(job.organization_id, job.delivery_id);
                self.log.do_send(AppendLog {
                    record,
                    job: Some(delete),
                });
                None
            }
            NextStep::RetryAt(due) => {
                let record = LogRecord::of_attempt(
                    job.organization_id,
                    job.delivery_id,
                    &job.event,
                    attempt,
                    &outcome,
                    job.body.clone(),
                );
                job.attempts_made = attempt;
                job.due_at = due;
                self.log.do_send(AppendLog {
                    record,
                    job: Some(Write::RetryJob(job.clone())),
                });
                Some(job)
            }
        }
    }

    fn notify_if_drained(&mut self) {
        if self.draining && self.queue.in_flight() == 0 {
            for waiter in self.drained.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;

    /// Holds each organization's first window of unfinished deliveries
    /// (never attempted, waiting for their retry, or in flight at a crash:
    /// at-least-once); no message is handled before.
    fn started(&mut self, ctx: &mut Self::Context) {
        if self.shared.is_some() {
            self.start_sharing(ctx);
            return;
        }
        let (store, window) = (self.store.clone(), self.backlog.window());
        let loading = async move { store.outbox_windows(window).await };
        ctx.wait(loading.into_actor(self).map(|loaded, act, ctx| match loaded {
            Ok(windows) => {
                for window in windows {
                    act.backlog.restore(window.org, &window.jobs, window.more);
                    for job in window.jobs {
                        act.schedule(job, ctx);
                    }
                    act.spill_backlog(window.org, ctx);
                }
                act.pump();
            }
            Err(err) => {
                // Left in the outbox; delivered after the next start.
                tracing::error!(
                    error = %crate::telemetry::cause_chain(&err),
                    "reading the outbox at start failed; its deliveries wait for the next start"
                );
            }
        }));
    }
}

impl Handler<Enqueue> for Dispatcher {
    type Result = ();

    /// New durable deliveries: held when their organization's window has
    /// room, else they wait in the outbox and are read in their turn.
    fn handle(&mut self, Enqueue(jobs): Enqueue, ctx: &mut Self::Context) {
        if self.shared.is_some() {
            self.committed(jobs, ctx);
            return;
        }
        for job in jobs {
            let org = job.organization_id;
            if self.backlog.admit(&job) {
                self.schedule(job, ctx);
            } else {
                self.spill_backlog(org, ctx);
            }
        }
        self.pump();
    }
}

impl Handler<AttemptFinished> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: AttemptFinished, ctx: &mut Self::Context) {
        let (org, id) = (msg.job.organization_id, msg.job.delivery_id);
        self.slot_freed(org);
        // An attempt of a lease lost meanwhile is recorded, nothing more.
        let orphan = self
            .shared
            .as_mut()
            .is_some_and(|shared| shared.finished(&msg.job));
        match self.record(msg.job, msg.outcome) {
            Some(retry) if !orphan => self.schedule(retry, ctx),
            None if !orphan => self.released(org, id, ctx),
            _ => {}
        }
        self.pump();
        self.notify_if_drained();
    }
}

impl Handler<AttemptNotMade> for Dispatcher {
    type Result = ();

    /// The job waits for its next start, unless its lease was lost
    /// meanwhile (then it is the next holder's): for [`UNCHECKED_PAUSE`]
    /// when its organization's revision could not be read.
    fn handle(&mut self, not_made: AttemptNotMade, ctx: &mut Self::Context) {
        let AttemptNotMade { mut job, why } = not_made;
        self.slot_freed(job.organization_id);
        let unchecked = why == NotMade::Unchecked;
        let orphan = match self.shared.as_mut() {
            Some(shared) if unchecked => {
                shared.unchecked(std::time::Instant::now());
                shared.finished(&job)
            }
            Some(shared) => shared.finished(&job),
            None => false,
        };
        if !orphan {
            if unchecked {
                let pause = UNCHECKED_PAUSE.as_millis() as i64;
                job.due_at = Timestamp(Timestamp::now().millis().saturating_add(pause));
            }
            self.schedule(job, ctx);
        }
        self.pump();
        self.notify_if_drained();
    }
}

impl Handler<DropOrg> for Dispatcher {
    type Result = ();

    /// Due jobs are dropped at once; jobs waiting for their retry, and
    /// attempts in flight, find the endpoint gone or disabled when they
    /// next start.
    fn handle(&mut self, DropOrg(org, why): DropOrg, ctx: &mut Self::Context) {
        let at = Timestamp::now();
        for job in self.queue.drop_org(org) {
            let id = job.delivery_id;
            self.record(job, why.outcome(at));
            self.backlog.released(org, id);
        }
        // What waits in the outbox is read in turn and found orphaned.
        self.read_backlog(org, ctx);
    }
}

/// Asks for the queue depth by state (for metrics).
#[derive(Message)]
#[rtype(result = "QueueDepth")]
pub struct GetQueueDepth;

/// Unfinished deliveries by state.
#[derive(Clone, Copy, Debug, Default, MessageResponse)]
pub struct QueueDepth {
    /// Due, waiting for a free slot.
    pub ready: usize,
    /// Being attempted.
    pub in_flight: usize,
    /// Waiting for their due time.
    pub scheduled: usize,
}

impl Handler<GetQueueDepth> for Dispatcher {
    type Result = QueueDepth;

    fn handle(&mut self, _: GetQueueDepth, _: &mut Self::Context) -> QueueDepth {
        QueueDepth {
            ready: self.queue.ready(),
            in_flight: self.queue.in_flight(),
            scheduled: self.scheduled,
        }
    }
}

impl Handler<Drain> for Dispatcher {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Drain, _: &mut Self::Context) -> Self::Result {
        self.draining = true;
        if let Some(shared) = &self.shared {
            shared.admissions.withdraw_all();
        }
        let (tx, rx) = oneshot::channel();
        self.drained.push(tx);
        self.notify_if_drained();
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}
