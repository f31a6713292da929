//! Webhook deliveries: the outbox job (a delivery not yet finished) and the
//! delivery-log record (one per attempt, or one `skipped` per unsubscribed
//! event).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::event::{Event, EventKind};
use crate::ids::{DeliveryId, LogId, OrgId};
use crate::time::Timestamp;

/// Most response-body bytes kept in the log (seed §8).
pub const LOGGED_BODY_MAX: usize = 4096;

/// The envelope of seed 2.7, serialized once so every attempt sends the same bytes.
pub fn envelope(event: &Event) -> Vec<u8> {
    #[derive(Serialize)]
    struct Envelope<'a> {
        event: &'static str,
        occurred_at: crate::time::Timestamp,
        data: &'a serde_json::Value,
    }
    let envelope = Envelope {
        event: event.kind.id(),
        occurred_at: event.occurred_at,
        data: &event.data,
    };
    serde_json::to_vec(&envelope).unwrap_or_default()
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptOutcome {
    /// 2xx.
    pub succeeded: bool,
    /// The status, when a response arrived.
    pub status: Option<u16>,
    /// At most 4096 bytes of the response body.
    pub body: Option<String>,
    /// Wall time of the attempt.
    pub latency_ms: u64,
    /// What went wrong.
    pub error: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
}

/// A delivery waiting for its next attempt, as stored in the outbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Same on every attempt (`X-Service-Delivery`, `webhook-id`).
    pub delivery_id: DeliveryId,
    /// The organization.
    pub organization_id: OrgId,
    /// The event id.
    pub event: String,
    /// The envelope bytes.
    pub body: Vec<u8>,
    /// Attempts already made (0 or 1).
    pub attempts_made: u8,
    /// When the next attempt is due.
    pub due_at: Timestamp,
    /// When the event was queued.
    pub created_at: Timestamp,
}

impl Job {
    /// A new delivery of `body`, due now.
    pub fn new(organization_id: OrgId, event: EventKind, body: Vec<u8>) -> Job {
        let now = Timestamp::now();
        Job {
            delivery_id: DeliveryId::generate(),
            organization_id,
            event: event.id().to_owned(),
            body,
            attempts_made: 0,
            due_at: now,
            created_at: now,
        }
    }
}

/// How an attempt (or an unsubscribed event) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// 2xx.
    Succeeded,
    /// Network error, timeout, 3xx, 4xx, 5xx, or the endpoint was removed.
    Failed,
    /// The event was not subscribed.
    Skipped,
}

/// One delivery-log record as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Time-ordered record id (the storage key suffix).
    pub id: LogId,
    /// The organization.
    pub organization_id: OrgId,
    /// The delivery this attempt belongs to.
    pub delivery_id: DeliveryId,
    /// The event id.
    pub event: String,
    /// 1 or 2; `None` for skipped records.
    pub attempt: Option<u8>,
    /// How it ended.
    pub outcome: Outcome,
    /// The subscriber's status code, when one arrived.
    pub response_code: Option<u16>,
    /// At most 4096 bytes of the subscriber's body.
    pub response_body: Option<String>,
    /// How long the attempt took.
    pub latency_ms: Option<u64>,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// When the attempt started (or the event was skipped).
    pub attempted_at: Timestamp,
    /// The envelope, for redelivery.
    pub envelope: Vec<u8>,
}

impl LogRecord {
    /// The record of an unsubscribed event.
    pub fn skipped(organization_id: OrgId, event: EventKind, envelope: Vec<u8>) -> LogRecord {
        LogRecord {
            id: LogId::generate(),
            organization_id,
            delivery_id: DeliveryId::generate(),
            event: event.id().to_owned(),
            attempt: None,
            outcome: Outcome::Skipped,
            response_code: None,
            response_body: None,
            latency_ms: None,
            error: None,
            attempted_at: Timestamp::now(),
            envelope,
        }
    }

    /// The record of attempt number `attempt` of a delivery.
    pub fn of_attempt(
        organization_id: OrgId,
        delivery_id: DeliveryId,
        event: &str,
        attempt: u8,
        outcome: &AttemptOutcome,
        envelope: Vec<u8>,
    ) -> LogRecord {
        LogRecord {
            id: LogId::generate(),
            organization_id,
            delivery_id,
            event: event.to_owned(),
            attempt: Some(attempt),
            outcome: if outcome.succeeded {
                Outcome::Succeeded
            } else {
                Outcome::Failed
            },
            response_code: outcome.status,
            response_body: outcome.body.clone(),
            latency_ms: Some(outcome.latency_ms),
            error: outcome.error.clone(),
            attempted_at: outcome.started_at,
            envelope,
        }
    }

    /// The REST representation.
    pub fn view(&self) -> LogView {
        LogView {
            id: self.id,
            delivery_id: self.delivery_id,
            event: self.event.clone(),
            attempt: self.attempt,
            outcome: self.outcome,
            response_code: self.response_code,
            response_body: self.response_body.clone(),
            latency_ms: self.latency_ms,
            error: self.error.clone(),
            attempted_at: self.attempted_at,
        }
    }
}

/// A delivery-log record as `GET …/webhook/deliveries` returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct LogView {
    /// Record id.
    pub id: LogId,
    /// The delivery (same on both attempts).
    pub delivery_id: DeliveryId,
    /// The event id.
    pub event: String,
    /// 1, 2, or null for skipped records.
    pub attempt: Option<u8>,
    /// `succeeded`, `failed` or `skipped`.
    pub outcome: Outcome,
    /// The subscriber's status code.
    pub response_code: Option<u16>,
    /// At most 4096 bytes of the subscriber's body.
    pub response_body: Option<String>,
    /// Attempt latency.
    pub latency_ms: Option<u64>,
    /// What went wrong.
    pub error: Option<String>,
    /// When the attempt started.
    pub attempted_at: Timestamp,
}
