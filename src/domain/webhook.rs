//! The webhook endpoint of an organization (seed 2.5, CONTRACT §6): the
//! stored record (with its secret) and the representation GET returns
//! (without it).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::ids::OrgId;
use crate::secrets::Secret;
use crate::time::Timestamp;

/// A set of subscribable event ids, as a bitset over [`EventKind::ALL`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventSet(u32);

impl EventSet {
    /// Whether `kind` is in the set.
    #[inline]
    pub fn contains(self, kind: EventKind) -> bool {
        self.0 & (1 << kind as u32) != 0
    }

    /// The ids, in the seed's order.
    pub fn ids(self) -> Vec<&'static str> {
        EventKind::ALL
            .iter()
            .filter(|k| self.contains(**k))
            .map(|k| k.id())
            .collect()
    }

    /// Parses subscription ids: 400 UNKNOWN_EVENT for ids outside seed §6
    /// and for `test.preflight`, which is never subscribed.
    pub fn parse(ids: &[String]) -> Result<EventSet, ApiError> {
        let mut bits = 0u32;
        let mut unknown = Vec::new();
        for id in ids {
            match EventKind::parse(id) {
                Some(kind) if kind != EventKind::TestPreflight => bits |= 1 << kind as u32,
                _ => unknown.push(id.clone()),
            }
        }
        if unknown.is_empty() {
            Ok(EventSet(bits))
        } else {
            Err(ApiError::UnknownEvent(unknown))
        }
    }
}

impl Serialize for EventSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            self.ids().serialize(serializer)
        } else {
            serializer.serialize_u32(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for EventSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            let ids = Vec::<String>::deserialize(deserializer)?;
            EventSet::parse(&ids).map_err(|_| serde::de::Error::custom("unknown event ids"))
        } else {
            u32::deserialize(deserializer).map(EventSet)
        }
    }
}

/// A webhook test that passed, waiting to be saved (CONTRACT §6: valid for
/// 15 minutes, once).
#[derive(Clone, Debug)]
pub struct PassedTest {
    /// The organization that ran it.
    pub organization_id: OrgId,
    /// The tested URL.
    pub url: String,
    /// The events to subscribe.
    pub events: EventSet,
    /// The candidate secret it was signed with and revealed; `None` when it
    /// was signed with the endpoint's current secret.
    pub candidate_secret: Option<Secret>,
    /// When it passed.
    pub passed_at: std::time::Instant,
}

/// The endpoint as stored. Never serialized to a client: see [`WebhookView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    /// The organization.
    pub organization_id: OrgId,
    /// Where deliveries go.
    pub url: String,
    /// Subscribed events.
    pub events: EventSet,
    /// The signing secret.
    #[serde(with = "crate::secrets::plaintext")]
    pub secret: Secret,
    /// When first saved.
    pub created_at: Timestamp,
    /// When last saved or rotated.
    pub updated_at: Timestamp,
    /// Set when deliveries stopped: the endpoint said it is gone, or kept
    /// failing (CONTRACT §10); cleared by the next save.
    pub disabled: Option<Disabled>,
    /// When the run of failed attempts under way began: the first failure
    /// since the last success or save.
    pub failing_since: Option<Timestamp>,
}

/// Why and when an endpoint was disabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disabled {
    /// When.
    pub at: Timestamp,
    /// Why.
    pub reason: DisabledReason,
}

/// Why an endpoint was disabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DisabledReason {
    /// It answered 410 Gone to an attempt.
    Gone,
    /// Every attempt failed for `webhooks.disable_after_failing_ms`, with
    /// at least `webhooks.disable_after_failures` of them.
    Failing,
}

impl DisabledReason {
    /// Its name, as the API and the metrics say it.
    pub fn as_str(self) -> &'static str {
        match self {
            DisabledReason::Gone => "gone",
            DisabledReason::Failing => "failing",
        }
    }
}

/// Whether deliveries go to the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndpointStatus {
    /// Attempts are made.
    Enabled,
    /// Nothing is sent; new events are logged skipped (`endpoint disabled`).
    Disabled,
}

/// The error of log records of deliveries not made because the endpoint
/// was disabled (skipped events, and dropped attempts).
pub const ENDPOINT_DISABLED: &str = "endpoint disabled";

impl WebhookEndpoint {
    /// The REST representation: the secret is reduced to its last four characters.
    pub fn view(&self) -> WebhookView {
        WebhookView {
            url: self.url.clone(),
            events: self.events.ids(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            secret_last4: last4(&self.secret),
            status: if self.disabled.is_some() {
                EndpointStatus::Disabled
            } else {
                EndpointStatus::Enabled
            },
            disabled_at: self.disabled.map(|d| d.at),
            disabled_reason: self.disabled.map(|d| d.reason),
        }
    }
}

/// The endpoint as `GET …/webhook` returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct WebhookView {
    /// Where deliveries go.
    pub url: String,
    /// Subscribed event ids.
    pub events: Vec<&'static str>,
    /// When first saved.
    pub created_at: Timestamp,
    /// When last saved or rotated.
    pub updated_at: Timestamp,
    /// The last four characters of the signing secret.
    pub secret_last4: String,
    /// `disabled` once the endpoint answered 410 Gone to an attempt, or
    /// kept failing; a passing test then a save enable it again.
    pub status: EndpointStatus,
    /// When it was disabled; null while enabled.
    pub disabled_at: Option<Timestamp>,
    /// Why it was disabled (`gone`: it answered 410; `failing`: every
    /// attempt failed for `webhooks.disable_after_failing_ms`); null while enabled.
    pub disabled_reason: Option<DisabledReason>,
}

/// The last four characters of a secret, safe to show.
pub fn last4(secret: &Secret) -> String {
    let text = secret.expose();
    let start = text
        .char_indices()
        .rev()
        .nth(3)
        .map(|(i, _)| i)
        .unwrap_or(0);
    text[start..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_refuse_unknown_ids_and_preflight() {
        let ok = EventSet::parse(&[
            "member.added".into(),
            "task.completed".into(),
            "member.added".into(),
        ]);
        let Ok(set) = ok else {
            panic!("known ids must parse")
        };
        assert!(set.contains(EventKind::MemberAdded) && set.contains(EventKind::TaskCompleted));
        assert!(!set.contains(EventKind::MemberRemoved));
        assert_eq!(set.ids(), vec!["task.completed", "member.added"]);
        let refused = EventSet::parse(&[
            "test.preflight".into(),
            "nope".into(),
            "member.added".into(),
        ]);
        assert!(
            matches!(refused, Err(ApiError::UnknownEvent(ids)) if ids == vec!["test.preflight", "nope"])
        );
    }
}
