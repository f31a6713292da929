//! What the commit path hands committed deliveries to: new jobs and
//! endpoint removals to the dispatcher, skipped-event records to the
//! metrics and the log actor's pruning.

use std::sync::Arc;

use actix::prelude::*;

use crate::actors::dispatcher::Wake;
use crate::actors::messages::{DropOrg, Enqueue, Touched};
use crate::admissions::{Admissions, Taken};
use crate::commit::Deliveries;
use crate::domain::change::Write;
use crate::domain::delivery::{Job, LogRecord, Stopped};
use crate::ids::OrgId;
use crate::metrics::Metrics;
use crate::storage::postgres::Wakeup;

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
    /// On a queue several nodes share: the room the dispatcher offers new
    /// jobs, and where it hears of organizations to read.
    pub admissions: Option<(Arc<Admissions>, Recipient<Wake>)>,
}

impl Deliveries for Handoff {
    fn take(&self, writes: &mut [Write]) -> Option<Taken> {
        let (admissions, _) = self.admissions.as_ref()?;
        admissions.take(writes)
    }

    fn not_committed(&self, taken: Taken) {
        if let Some((admissions, wake)) = &self.admissions {
            admissions.failed(&taken);
            for org in taken.orgs() {
                wake.do_send(Wake(Wakeup::Jobs(org)));
            }
        }
    }

    fn enqueue(&self, jobs: Vec<Job>) {
        self.enqueue.do_send(Enqueue(jobs));
    }

    fn endpoint_stopped(&self, org: OrgId, why: Stopped) {
        self.drop_org.do_send(DropOrg(org, why));
    }

    fn logged(&self, records: &[&LogRecord]) {
        self.metrics.delivery_logged(records.iter().copied());
        for record in records {
            self.touched.do_send(Touched(record.organization_id));
        }
    }
}
