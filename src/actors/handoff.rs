//! What the commit path hands committed deliveries to: new jobs and
//! endpoint removals to the dispatcher, skipped-event records to the
//! metrics and the log actor's pruning.

use std::sync::Arc;

use actix::prelude::*;

use crate::actors::messages::{DropOrg, Enqueue, Touched};
use crate::commit::Deliveries;
use crate::domain::delivery::{Job, LogRecord};
use crate::ids::OrgId;
use crate::metrics::Metrics;

/// The delivery pipeline's entry, for the commit path.
pub struct Handoff {
    /// Schedules new jobs and drops a removed endpoint's.
    pub enqueue: Recipient<Enqueue>,
    /// Drops a removed endpoint's queued jobs.
    pub drop_org: Recipient<DropOrg>,
    /// Prunes the logs records were written to.
    pub touched: Recipient<Touched>,
    /// Counts delivery-log records.
    pub metrics: Arc<Metrics>,
}

impl Deliveries for Handoff {
    fn enqueue(&self, jobs: Vec<Job>) {
        self.enqueue.do_send(Enqueue(jobs));
    }

    fn endpoint_removed(&self, org: OrgId) {
        self.drop_org.do_send(DropOrg(org));
    }

    fn logged(&self, records: &[&LogRecord]) {
        self.metrics.delivery_logged(records.iter().copied());
        for record in records {
            self.touched.do_send(Touched(record.organization_id));
        }
    }
}
