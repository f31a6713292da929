//! Webhook deliveries: the outbox job (a delivery not yet finished) and the
//! delivery-log record (one per attempt, or one `skipped` per unsubscribed
//! event).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::event::{Event, EventKind};
use crate::ids::{DeliveryId, LogId, OrgId};
use crate::time::Timestamp;

/// Most response-body bytes kept in the log (seed §8).
pub const LOGGED_BODY_MAX: usize = 4096;

/// The envelope of seed 2.7, serialized once so every attempt sends the same bytes.
pub fn envelope(event: &Event) -> Result<Vec<u8>, ApiError> {
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
    serde_json::to_vec(&envelope).map_err(ApiError::internal)
}

/// An answer of the endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// At most 4096 bytes of the response body.
    pub body: String,
    /// Wall time of the attempt.
    pub latency_ms: u64,
    /// When the attempt started.
    pub started_at: Timestamp,
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The endpoint answered: 2xx is success, anything else (3xx included,
    /// redirects are not followed) a failure.
    Answered(Answer),
    /// No answer: the URL policy, the connection, TLS, reading the body, or
    /// the timeout failed.
    Unanswered {
        /// What failed, for the delivery log.
        error: String,
        /// Wall time of the attempt.
        latency_ms: u64,
        /// When the attempt started.
        started_at: Timestamp,
    },
    /// The endpoint was removed (or removed and saved anew) after the
    /// delivery was queued: no request was made (CONTRACT §6).
    EndpointRemoved {
        /// When this was found.
        at: Timestamp,
    },
    /// The endpoint is disabled (CONTRACT §10): no request was made.
    EndpointDisabled {
        /// When this was found.
        at: Timestamp,
    },
}

/// Why an organization's queued deliveries stop at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Its endpoint was removed.
    Removed,
    /// Its endpoint was disabled.
    Disabled,
}

impl Stopped {
    /// The outcome recorded for each delivery dropped so, at `at`.
    pub fn outcome(self, at: Timestamp) -> AttemptOutcome {
        match self {
            Stopped::Removed => AttemptOutcome::EndpointRemoved { at },
            Stopped::Disabled => AttemptOutcome::EndpointDisabled { at },
        }
    }
}

impl AttemptOutcome {
    /// The endpoint answered 2xx.
    pub fn succeeded(&self) -> bool {
        matches!(self, AttemptOutcome::Answered(answer) if (200..300).contains(&answer.status))
    }

    /// The status code, when an answer arrived.
    pub fn status(&self) -> Option<u16> {
        match self {
            AttemptOutcome::Answered(answer) => Some(answer.status),
            _ => None,
        }
    }

    /// The kept response body, when an answer arrived.
    pub fn body(&self) -> Option<&str> {
        match self {
            AttemptOutcome::Answered(answer) => Some(&answer.body),
            _ => None,
        }
    }

    /// Wall time of the attempt (0 when none was made).
    pub fn latency_ms(&self) -> u64 {
        match self {
            AttemptOutcome::Answered(answer) => answer.latency_ms,
            AttemptOutcome::Unanswered { latency_ms, .. } => *latency_ms,
            AttemptOutcome::EndpointRemoved { .. } | AttemptOutcome::EndpointDisabled { .. } => 0,
        }
    }

    /// When the attempt started (or was found impossible).
    pub fn started_at(&self) -> Timestamp {
        match self {
            AttemptOutcome::Answered(answer) => answer.started_at,
            AttemptOutcome::Unanswered { started_at, .. } => *started_at,
            AttemptOutcome::EndpointRemoved { at } | AttemptOutcome::EndpointDisabled { at } => *at,
        }
    }

    /// What went wrong, in the delivery log's words; `None` on success.
    pub fn error(&self) -> Option<String> {
        match self {
            AttemptOutcome::Answered(answer) if (200..300).contains(&answer.status) => None,
            AttemptOutcome::Answered(answer) => {
                Some(format!("the endpoint answered {}", answer.status))
            }
            AttemptOutcome::Unanswered { error, .. } => Some(error.clone()),
            AttemptOutcome::EndpointRemoved { .. } => Some("endpoint removed".to_owned()),
            AttemptOutcome::EndpointDisabled { .. } => {
                Some(crate::domain::webhook::ENDPOINT_DISABLED.to_owned())
            }
        }
    }
}

/// Attempts a delivery gets at most (seed §8: one retry).
pub const MAX_ATTEMPTS: u8 = 2;

/// What becomes of a delivery after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextStep {
    /// Finished: delivered, failed for good, or its endpoint is gone.
    Done,
    /// Attempted again at this time.
    RetryAt(Timestamp),
}

/// Seed §8: a failed attempt is retried once, `retry_delay` after it
/// ended; a success, a last attempt or a removed or disabled endpoint end
/// the delivery.
/// `attempt` is the number of the attempt that just ended (1-based).
pub fn next_step(
    attempt: u8,
    outcome: &AttemptOutcome,
    ended_at: Timestamp,
    retry_delay: std::time::Duration,
) -> NextStep {
    let retriable = !outcome.succeeded()
        && !matches!(
            outcome,
            AttemptOutcome::EndpointRemoved { .. } | AttemptOutcome::EndpointDisabled { .. }
        );
    if retriable && attempt < MAX_ATTEMPTS {
        let delay = i64::try_from(retry_delay.as_millis()).unwrap_or(i64::MAX);
        NextStep::RetryAt(Timestamp(ended_at.millis().saturating_add(delay)))
    } else {
        NextStep::Done
    }
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
    #[serde(with = "crate::domain::bytes")]
    pub body: Vec<u8>,
    /// Attempts already made (0 or 1).
    pub attempts_made: u8,
    /// When the next attempt is due.
    pub due_at: Timestamp,
    /// When the event was queued.
    pub created_at: Timestamp,
    /// On a queue several nodes share: the committing node takes this new
    /// job into memory at once, under its lease (never stored on sled).
    #[serde(skip)]
    pub held_under: Option<HeldUnder>,
    /// On a queue several nodes share: the other node known to hold the
    /// organization's lease, told of this new job in its commit's own
    /// statement, so this node makes no claim to tell it (never stored).
    #[serde(skip)]
    pub holder_told: Option<HolderTold>,
}

/// The node holding a new job's organization elsewhere, told of it by
/// the commit: with the job itself, held under `handed` (its epoch), when
/// that node takes handed jobs; else only that jobs wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HolderTold {
    /// The holder.
    pub node: uuid::Uuid,
    /// The epoch under which it takes handed jobs, if it does.
    pub handed: Option<i64>,
}

/// The lease a committing node holds a new job under, and the number of
/// the commit that marks its row so: the row carries both, so no read of
/// that lease takes it again (see `outbox.claim` in the PostgreSQL
/// schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldUnder {
    /// The lease's epoch.
    pub epoch: i64,
    /// The commit's number: read again when its answer was lost.
    pub mark: i64,
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
            held_under: None,
            holder_told: None,
        }
    }

    /// A new delivery of a logged delivery's envelope (`redeliver`): a new
    /// delivery id, attempts counted from 1, due now.
    pub fn redelivery(record: &LogRecord) -> Job {
        let now = Timestamp::now();
        Job {
            delivery_id: DeliveryId::generate(),
            organization_id: record.organization_id,
            event: record.event.clone(),
            body: record.envelope.clone(),
            attempts_made: 0,
            due_at: now,
            created_at: now,
            held_under: None,
            holder_told: None,
        }
    }

    /// Whether this job was queued for an endpoint that has been removed
    /// since: there is no endpoint now, or the current one was created
    /// after the job (removed and saved anew; CONTRACT §6 drops such jobs).
    pub fn orphaned_by(&self, endpoint: Option<&crate::domain::webhook::WebhookEndpoint>) -> bool {
        endpoint.is_none_or(|endpoint| endpoint.created_at > self.created_at)
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
    /// Not sent: the event was not subscribed (`error` null), or the
    /// endpoint was disabled (`error` "endpoint disabled").
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
    #[serde(with = "crate::domain::bytes")]
    pub envelope: Vec<u8>,
}

impl LogRecord {
    /// The record of an event not sent: unsubscribed (`why` is `None`), or
    /// `why` (the endpoint is disabled).
    pub fn skipped(
        organization_id: OrgId,
        event: EventKind,
        envelope: Vec<u8>,
        why: Option<&str>,
    ) -> LogRecord {
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
            error: why.map(str::to_owned),
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
            outcome: if outcome.succeeded() {
                Outcome::Succeeded
            } else {
                Outcome::Failed
            },
            response_code: outcome.status(),
            response_body: outcome.body().map(str::to_owned),
            latency_ms: Some(outcome.latency_ms()),
            error: outcome.error(),
            attempted_at: outcome.started_at(),
            envelope,
        }
    }

    /// Whether this record is of an event not delivered that recovery
    /// sends again: a failed attempt, or an event skipped because the
    /// endpoint was disabled (not one skipped for not being subscribed).
    pub fn not_sent(&self) -> bool {
        match self.outcome {
            Outcome::Failed => true,
            Outcome::Skipped => {
                self.error.as_deref() == Some(crate::domain::webhook::ENDPOINT_DISABLED)
            }
            Outcome::Succeeded => false,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn answered(status: u16) -> AttemptOutcome {
        AttemptOutcome::Answered(Answer {
            status,
            body: String::new(),
            latency_ms: 5,
            started_at: Timestamp(1_000),
        })
    }

    fn unanswered() -> AttemptOutcome {
        AttemptOutcome::Unanswered {
            error: "timed out after 8000 ms".into(),
            latency_ms: 8_000,
            started_at: Timestamp(1_000),
        }
    }

    #[test]
    fn a_failed_first_attempt_is_retried_once_after_the_delay() {
        let ended = Timestamp(10_000);
        let delay = Duration::from_millis(2_000);
        for failed in [answered(500), answered(302), answered(404), unanswered()] {
            assert_eq!(
                next_step(1, &failed, ended, delay),
                NextStep::RetryAt(Timestamp(12_000)),
                "{failed:?}"
            );
            assert_eq!(
                next_step(2, &failed, ended, delay),
                NextStep::Done,
                "{failed:?}"
            );
        }
    }

    #[test]
    fn success_and_a_removed_endpoint_end_the_delivery() {
        let (ended, delay) = (Timestamp(10_000), Duration::from_millis(2_000));
        for status in [200, 201, 204, 299] {
            assert_eq!(
                next_step(1, &answered(status), ended, delay),
                NextStep::Done
            );
        }
        let removed = AttemptOutcome::EndpointRemoved { at: ended };
        assert_eq!(next_step(1, &removed, ended, delay), NextStep::Done);
    }

    #[test]
    fn outcomes_say_what_failed_in_the_logs_words() {
        assert_eq!(answered(204).error(), None);
        assert!(answered(204).succeeded());
        assert_eq!(
            answered(503).error().as_deref(),
            Some("the endpoint answered 503")
        );
        assert_eq!(answered(503).status(), Some(503));
        assert_eq!(
            unanswered().error().as_deref(),
            Some("timed out after 8000 ms")
        );
        assert_eq!(unanswered().status(), None);
        let removed = AttemptOutcome::EndpointRemoved { at: Timestamp(7) };
        assert_eq!(removed.error().as_deref(), Some("endpoint removed"));
        assert_eq!(
            (removed.latency_ms(), removed.started_at()),
            (0, Timestamp(7))
        );
        assert!(!removed.succeeded());
    }
}
