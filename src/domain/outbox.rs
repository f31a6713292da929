//! The webhook outbox: how a change's events become writes of the change's
//! own transaction. A subscribed event becomes a delivery job, an
//! unsubscribed one a `skipped` log record (a subscribed one too while the
//! endpoint is disabled, with the error `endpoint disabled`), and with no endpoint configured
//! nothing is recorded (CONTRACT §6). So no event exists for a change that
//! did not happen, and none is lost for one that did.

use crate::domain::change::Write;
use crate::domain::delivery::{envelope, Job, LogRecord};
use crate::domain::error::ApiError;
use crate::domain::event::Event;
use crate::domain::org_state::OrgState;
use crate::domain::webhook::ENDPOINT_DISABLED;

/// The writes that record `events` for the organization in `state` (its
/// endpoint and subscription as of the change).
pub fn stage(state: &OrgState, events: &[Event]) -> Result<Vec<Write>, ApiError> {
    let Some(endpoint) = &state.webhook else {
        return Ok(Vec::new());
    };
    events
        .iter()
        .map(|event| {
            let body = envelope(event)?;
            Ok(if !endpoint.events.contains(event.kind) {
                Write::Log(LogRecord::skipped(state.id(), event.kind, body, None))
            } else if endpoint.disabled.is_some() {
                Write::Log(LogRecord::skipped(
                    state.id(),
                    event.kind,
                    body,
                    Some(ENDPOINT_DISABLED),
                ))
            } else {
                Write::PutJob(Job::new(state.id(), event.kind, body))
            })
        })
        .collect()
}
