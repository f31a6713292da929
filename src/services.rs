//! The shared services every request handler and actor reaches.

use std::sync::{Arc, OnceLock};

use actix::Addr;
use std::time::Duration;

use crate::accounts::Accounts;
use crate::actors::dispatcher::Dispatcher;
use crate::actors::log::LogActor;
use crate::actors::messages::{AppendLog, DropOrg, Enqueue, Touched};
use crate::directory::Directory;
use crate::domain::delivery::LogRecord;
use crate::domain::event::EventSink;
use crate::domain::org_state::Edit;
use crate::metrics::Metrics;
use crate::storage::Storage;
use crate::storage::Write;
use crate::time::Timestamp;
use crate::webhooks::client::ClientSettings;
use crate::webhooks::preflight::PendingTests;

/// Shared, long-lived services.
pub struct Services {
    /// The database.
    pub storage: Storage,
    /// Organization snapshots.
    pub directory: Directory,
    /// Users and tokens.
    pub accounts: Accounts,
    /// Where mutations put their events.
    pub events: Arc<dyn EventSink>,
    /// SHA-256 of the admin token.
    pub admin_token_sha256: [u8; 32],
    /// SHA-256 of the token `/metrics` requires, when one is configured.
    pub metrics_token_sha256: Option<[u8; 32]>,
    /// How long an organization actor lives without messages.
    pub org_idle_timeout: Duration,
    /// The delivery pipeline.
    pub delivery: Delivery,
    /// Passed webhook tests waiting to be saved.
    pub tests: PendingTests,
    /// Outbound client settings (timeout, URL policy, TLS).
    pub client: ClientSettings,
}

/// Addresses of the delivery actors, set once they are started, and the
/// metrics that count what they log.
pub struct Delivery {
    dispatcher: OnceLock<Addr<Dispatcher>>,
    log: OnceLock<Addr<LogActor>>,
    metrics: Arc<Metrics>,
}

impl Delivery {
    /// No actors yet; records will be counted in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Delivery {
            dispatcher: OnceLock::new(),
            log: OnceLock::new(),
            metrics,
        }
    }

    /// The application's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Records the started actors.
    pub fn set(&self, dispatcher: Addr<Dispatcher>, log: Addr<LogActor>) {
        let _ = self.dispatcher.set(dispatcher);
        let _ = self.log.set(log);
    }

    /// The dispatcher, once started.
    pub fn dispatcher(&self) -> Option<&Addr<Dispatcher>> {
        self.dispatcher.get()
    }

    /// The log actor, once started.
    pub fn log(&self) -> Option<&Addr<LogActor>> {
        self.log.get()
    }

    /// After a durable commit: schedule its new jobs, drop the queue of a
    /// removed endpoint, and note logs that may need pruning.
    pub fn committed(&self, writes: &[Write]) {
        let mut jobs = Vec::new();
        for write in writes {
            match write {
                Write::PutJob(job) => jobs.push(job.clone()),
                Write::Log(record) => {
                    self.metrics.delivery_logged([record]);
                    if let Some(log) = self.log() {
                        log.do_send(Touched(record.organization_id));
                    }
                }
                Write::Edit(Edit::DeleteWebhook(org)) => {
                    if let Some(dispatcher) = self.dispatcher() {
                        dispatcher.do_send(DropOrg {
                            organization_id: *org,
                            at: Timestamp::now(),
                        });
                    }
                }
                _ => {}
            }
        }
        if let (false, Some(dispatcher)) = (jobs.is_empty(), self.dispatcher()) {
            dispatcher.do_send(Enqueue(jobs));
        }
    }

    /// Appends a record that belongs to no outbox job (a test attempt).
    pub fn append_log(&self, record: LogRecord) {
        if let Some(log) = self.log() {
            log.do_send(AppendLog { record, job: None });
        }
    }
}
