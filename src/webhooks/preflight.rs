//! The webhook test (CONTRACT §6): `test.preflight` sent at once, and the
//! passed tests waiting to be saved (valid for 15 minutes, once). On sled
//! they are kept in memory: a test is a moment's proof that the endpoint
//! answers, not state worth surviving a restart. On PostgreSQL they are
//! kept in the database, because the test and the save may reach
//! different nodes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use actix_web::web::Bytes;
use serde::Serialize;

use crate::domain::delivery::{envelope, AttemptOutcome, LogRecord};
use crate::domain::error::ApiError;
use crate::domain::event::{Event, EventKind};
use crate::domain::representation::representation;
use crate::domain::webhook::{EventSet, PassedTest};
use crate::ids::{DeliveryId, OrgId, TestId};
use crate::secrets::Secret;
use crate::storage::Store;
use crate::time::Timestamp;
use crate::webhooks::client::{attempt, build_client, AttemptRequest, ClientSettings};
use crate::webhooks::url::WebhookUrl;

/// How long a passed test can be saved.
pub const TEST_VALIDITY: Duration = Duration::from_secs(15 * 60);

/// Passed tests by id.
pub struct PendingTests {
    /// Where they are kept when several nodes share the store.
    store: Store,
    tests: Mutex<HashMap<TestId, PassedTest>>,
}

impl PendingTests {
    /// Passed tests, in `store` when other nodes share it, else in memory.
    pub fn new(store: Store) -> Self {
        PendingTests {
            store,
            tests: Mutex::new(HashMap::new()),
        }
    }

    /// Remembers a passed test (and forgets expired ones).
    pub async fn insert(&self, id: TestId, test: PassedTest) -> Result<(), ApiError> {
        if let Store::Postgres(shared) = &self.store {
            return Ok(shared.put_passed_test(id, &test, TEST_VALIDITY).await?);
        }
        let mut tests = self.tests.lock().unwrap_or_else(|e| e.into_inner());
        tests.retain(|_, t| t.passed_at.elapsed() < TEST_VALIDITY);
        tests.insert(id, test);
        Ok(())
    }

    /// A test of `org`, still valid and unused, left in place.
    pub async fn get(&self, org: OrgId, id: TestId) -> Result<Option<PassedTest>, ApiError> {
        if let Store::Postgres(shared) = &self.store {
            return Ok(shared.passed_test(org, id, TEST_VALIDITY, false).await?);
        }
        let tests = self.tests.lock().unwrap_or_else(|e| e.into_inner());
        Ok(tests
            .get(&id)
            .filter(|t| t.organization_id == org && t.passed_at.elapsed() < TEST_VALIDITY)
            .cloned())
    }

    /// Takes a test of `org` for saving: `None` when unknown, of another
    /// organization, expired or already used. A taken test cannot be reused.
    pub async fn take(&self, org: OrgId, id: TestId) -> Result<Option<PassedTest>, ApiError> {
        if let Store::Postgres(shared) = &self.store {
            return Ok(shared.passed_test(org, id, TEST_VALIDITY, true).await?);
        }
        let mut tests = self.tests.lock().unwrap_or_else(|e| e.into_inner());
        match tests.get(&id) {
            Some(test) if test.organization_id == org => {}
            _ => return Ok(None),
        }
        Ok(tests
            .remove(&id)
            .filter(|t| t.passed_at.elapsed() < TEST_VALIDITY))
    }
}

/// The `data` of `test.preflight`: what the test would save.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PreflightData {
    /// The organization.
    pub organization_id: OrgId,
    /// The URL tested.
    pub url: String,
    /// The event ids that would be subscribed, in the seed's order.
    pub events: Vec<String>,
    /// Pass to `PUT …/webhook` as `test_id` to save this endpoint.
    pub test_id: TestId,
}

/// Sends the `test.preflight` envelope to `url` once, synchronously, signed
/// with `secret`; gives the outcome and the attempt's delivery-log record.
pub async fn send_preflight(
    settings: &ClientSettings,
    org: OrgId,
    url: &WebhookUrl,
    events: EventSet,
    secret: &Secret,
    test_id: TestId,
) -> Result<(AttemptOutcome, LogRecord), ApiError> {
    let event = Event {
        kind: EventKind::TestPreflight,
        occurred_at: Timestamp::now(),
        data: representation(&PreflightData {
            organization_id: org,
            url: url.as_str().to_owned(),
            events: events.ids().into_iter().map(str::to_owned).collect(),
            test_id,
        })?,
    };
    let body = envelope(&event)?;
    let delivery_id = DeliveryId::generate();
    let delivery = delivery_id.to_string();
    let request = AttemptRequest {
        url: url.as_str(),
        secret,
        event: EventKind::TestPreflight.id(),
        delivery_id: &delivery,
        attempt: 1,
        body: Bytes::from(body.clone()),
    };
    // A test is rare: a client of its own, on this request's thread.
    let outcome = attempt(&build_client(settings), settings, request).await;
    let record = LogRecord::of_attempt(
        org,
        delivery_id,
        EventKind::TestPreflight.id(),
        1,
        &outcome,
        body,
    );
    Ok((outcome, record))
}
