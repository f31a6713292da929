//! The dispatcher: decides which delivery runs next.
//!
//! Each organization has its own FIFO of due jobs and at most
//! `max_in_flight_per_org` attempts in flight; organizations take turns
//! (round robin) under a global bound. A slow or dead endpoint therefore
//! fills only its own organization's slots, and only delays that
//! organization. Retries wait on a timer: due `retry_delay_ms` after the
//! first attempt ended.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::actors::delivery::{endpoint_removed, DeliveryActor};
use crate::actors::log::LogActor;
use crate::actors::messages::{AppendLog, AttemptFinished, Deliver, Drain, DropOrg, Enqueue};
use crate::domain::delivery::{AttemptOutcome, Job, LogRecord};
use crate::ids::OrgId;
use crate::storage::Write;
use crate::time::Timestamp;

/// Concurrency limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Attempts in flight per organization.
    pub per_org: usize,
    /// Attempts in flight in all.
    pub total: usize,
}

#[derive(Default)]
struct OrgQueue {
    ready: VecDeque<Job>,
    in_flight: usize,
    /// Whether the org is in the rotation (it has ready jobs and a free slot).
    queued: bool,
}

/// Schedules attempts.
pub struct Dispatcher {
    queues: HashMap<OrgId, OrgQueue>,
    rotation: VecDeque<OrgId>,
    in_flight: usize,
    /// Jobs waiting on a timer (retries, recovered jobs not yet due).
    scheduled: usize,
    limits: Limits,
    retry_delay: Duration,
    workers: Vec<Addr<DeliveryActor>>,
    next_worker: usize,
    log: Addr<LogActor>,
    /// Endpoint removals: jobs created at or before are dropped.
    removed: HashMap<OrgId, Timestamp>,
    draining: bool,
    drained: Vec<oneshot::Sender<()>>,
}

impl Dispatcher {
    /// A dispatcher with no workers yet (see [`Dispatcher::set_workers`]).
    pub fn new(limits: Limits, retry_delay: Duration, log: Addr<LogActor>) -> Self {
        Dispatcher {
            queues: HashMap::new(),
            rotation: VecDeque::new(),
            in_flight: 0,
            scheduled: 0,
            limits,
            retry_delay,
            workers: Vec::new(),
            next_worker: 0,
            log,
            removed: HashMap::new(),
            draining: false,
            drained: Vec::new(),
        }
    }

    fn is_removed(&self, job: &Job) -> bool {
        self.removed
            .get(&job.organization_id)
            .is_some_and(|at| job.created_at <= *at)
    }

    /// Puts a due job in its organization's queue.
    fn ready(&mut self, job: Job) {
        if self.is_removed(&job) {
            self.finish(job, endpoint_removed());
            return;
        }
        let org = job.organization_id;
        let queue = self.queues.entry(org).or_default();
        queue.ready.push_back(job);
        if !queue.queued && queue.in_flight < self.limits.per_org {
            queue.queued = true;
            self.rotation.push_back(org);
        }
    }

    /// Queues `job` now, or when it is due.
    fn schedule(&mut self, job: Job, ctx: &mut Context<Self>) {
        let wait = job.due_at.millis() - Timestamp::now().millis();
        if wait <= 0 {
            self.ready(job);
        } else {
            self.scheduled += 1;
            ctx.run_later(Duration::from_millis(wait as u64), move |act, _| {
                act.scheduled = act.scheduled.saturating_sub(1);
                act.ready(job);
                act.pump();
            });
        }
    }

    /// Starts attempts while there are free slots, organizations taking turns.
    fn pump(&mut self) {
        while !self.draining && self.in_flight < self.limits.total && !self.workers.is_empty() {
            let Some(org) = self.rotation.pop_front() else {
                break;
            };
            let Some(queue) = self.queues.get_mut(&org) else {
                continue;
            };
            let Some(job) = queue.ready.pop_front() else {
                queue.queued = false;
                continue;
            };
            queue.in_flight += 1;
            if !queue.ready.is_empty() && queue.in_flight < self.limits.per_org {
                self.rotation.push_back(org);
            } else {
                queue.queued = false;
            }
            self.in_flight += 1;
            let worker = &self.workers[self.next_worker % self.workers.len()];
            self.next_worker = self.next_worker.wrapping_add(1);
            worker.do_send(Deliver(job));
        }
    }

    /// Logs an attempt and decides the job's fate: done, or retried once.
    fn finish(&mut self, mut job: Job, outcome: AttemptOutcome) -> Option<Job> {
        let attempt = job.attempts_made + 1;
        let removed = outcome.error.as_deref() == Some("endpoint removed");
        let done = outcome.succeeded || attempt >= 2 || removed;
        // Ids and the error only: the endpoint URL may carry credentials of the subscriber's.
        if !outcome.succeeded && done {
            tracing::warn!(
                organization_id = %job.organization_id, delivery_id = %job.delivery_id,
                event = %job.event, attempt, error = outcome.error.as_deref().unwrap_or(""),
                "delivery failed; not retried"
            );
        } else {
            tracing::debug!(
                organization_id = %job.organization_id, delivery_id = %job.delivery_id,
                event = %job.event, attempt, succeeded = outcome.succeeded,
                error = outcome.error.as_deref().unwrap_or(""), "delivery attempt"
            );
        }
        // A finished job's envelope moves into its record; a retried one keeps it.
        let envelope = if done {
            std::mem::take(&mut job.body)
        } else {
            job.body.clone()
        };
        let record = LogRecord::of_attempt(
            job.organization_id,
            job.delivery_id,
            &job.event,
            attempt,
            &outcome,
            envelope,
        );
        if done {
            self.log.do_send(AppendLog {
                record,
                job: Some(Write::DeleteJob(job.delivery_id)),
            });
            return None;
        }
        job.attempts_made = attempt;
        job.due_at = Timestamp(Timestamp::now().millis() + self.retry_delay.as_millis() as i64);
        self.log.do_send(AppendLog {
            record,
            job: Some(Write::PutJob(job.clone())),
        });
        Some(job)
    }

    fn notify_if_drained(&mut self) {
        if self.draining && self.in_flight == 0 {
            for waiter in self.drained.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;
}

/// Hands the dispatcher its delivery actors (they need its address first).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetWorkers(pub Vec<Addr<DeliveryActor>>);

impl Handler<SetWorkers> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: SetWorkers, _: &mut Self::Context) {
        self.workers = msg.0;
        self.pump();
    }
}

impl Handler<Enqueue> for Dispatcher {
    type Result = ();

    fn handle(&mut self, Enqueue(jobs): Enqueue, ctx: &mut Self::Context) {
        for job in jobs {
            self.schedule(job, ctx);
        }
        self.pump();
    }
}

impl Handler<AttemptFinished> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: AttemptFinished, ctx: &mut Self::Context) {
        let org = msg.job.organization_id;
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(queue) = self.queues.get_mut(&org) {
            queue.in_flight = queue.in_flight.saturating_sub(1);
            if !queue.ready.is_empty() && !queue.queued {
                queue.queued = true;
                self.rotation.push_back(org);
            }
            if queue.ready.is_empty() && queue.in_flight == 0 {
                self.queues.remove(&org);
            }
        }
        if let Some(retry) = self.finish(msg.job, msg.outcome) {
            self.schedule(retry, ctx);
        }
        self.pump();
        self.notify_if_drained();
    }
}

impl Handler<DropOrg> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: DropOrg, _: &mut Self::Context) {
        self.removed.insert(msg.organization_id, msg.at);
        let dropped: Vec<Job> = self
            .queues
            .get_mut(&msg.organization_id)
            .map(|queue| queue.ready.drain(..).collect())
            .unwrap_or_default();
        for job in dropped {
            self.finish(job, endpoint_removed());
        }
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
            ready: self.queues.values().map(|q| q.ready.len()).sum(),
            in_flight: self.in_flight,
            scheduled: self.scheduled,
        }
    }
}

impl Handler<Drain> for Dispatcher {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Drain, _: &mut Self::Context) -> Self::Result {
        self.draining = true;
        let (tx, rx) = oneshot::channel();
        self.drained.push(tx);
        self.notify_if_drained();
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}
