//! The event sink that records events for delivery: a subscribed event
//! becomes an outbox job, an unsubscribed one a `skipped` log record; with
//! no endpoint configured nothing is recorded. Both are writes of the
//! mutation's own transaction.

use crate::domain::delivery::{envelope, Job, LogRecord};
use crate::domain::event::{Event, EventSink};
use crate::domain::org_state::OrgState;
use crate::storage::Write;

/// The webhook outbox.
pub struct Outbox;

impl EventSink for Outbox {
    fn stage(&self, state: &OrgState, events: &[Event]) -> Vec<Write> {
        let Some(endpoint) = &state.webhook else {
            return Vec::new();
        };
        events
            .iter()
            .map(|event| {
                let body = envelope(event);
                if endpoint.events.contains(event.kind) {
                    Write::PutJob(Job::new(state.id(), event.kind, body))
                } else {
                    Write::Log(LogRecord::skipped(state.id(), event.kind, body))
                }
            })
            .collect()
    }
}
