//! Delivery actors: one per arbiter thread, each with its own keep-alive
//! HTTP client, running many attempts at once as independent futures, so
//! no attempt waits for another.
//!
//! An attempt is three steps: [`endpoint_now`] reads the endpoint as it is
//! when the attempt starts (CONTRACT §6: URL and secret are read then; on a
//! store other nodes share, after checking the organization's revision
//! there, so that a secret rotated on another node is dead for every later
//! attempt) and finds a removed one; [`attempt`] calls it; the outcome goes
//! back to the dispatcher, which records it.

use std::sync::Arc;

use actix::prelude::*;
use actix_web::web::Bytes;

use crate::actors::messages::{AttemptFinished, Deliver};
use crate::commit::CommitPath;
use crate::domain::delivery::{AttemptOutcome, Job};
use crate::domain::org_state::OrgState;
use crate::domain::webhook::WebhookEndpoint;
use crate::time::Timestamp;
use crate::webhooks::client::{attempt, build_client, AttemptRequest, ClientSettings};

/// Makes attempts.
pub struct DeliveryActor {
    /// Built on the actor's own thread when it starts: awc clients are not `Send`.
    client: Option<awc::Client>,
    settings: ClientSettings,
    /// Where each attempt reads its endpoint.
    commit: Arc<CommitPath>,
    /// Where each outcome goes.
    finished: Recipient<AttemptFinished>,
}

impl DeliveryActor {
    /// A delivery actor reading endpoints through `commit` and reporting
    /// outcomes to `finished`.
    pub fn new(
        settings: ClientSettings,
        commit: Arc<CommitPath>,
        finished: Recipient<AttemptFinished>,
    ) -> Self {
        DeliveryActor {
            client: None,
            settings,
            commit,
            finished,
        }
    }
}

impl Actor for DeliveryActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Self::Context) {
        self.client = Some(build_client(&self.settings));
    }
}

/// The endpoint to attempt `job` at, as it is now; the outcome instead when
/// the job's endpoint has been removed since it was queued. When the store
/// cannot be asked, the snapshot this node holds.
pub async fn endpoint_now(
    commit: &CommitPath,
    job: &Job,
) -> Result<Arc<WebhookEndpoint>, AttemptOutcome> {
    let org = job.organization_id;
    let state = match commit.current_snapshot(org).await {
        Ok(state) => state,
        Err(err) => {
            tracing::warn!(error = %crate::telemetry::cause_chain(&err), "the organization's revision could not be checked before an attempt; using this node's snapshot");
            commit.snapshot(org)
        }
    };
    endpoint_of(job, state)
}

/// `job`'s endpoint in `state`, or the outcome of a removed one.
fn endpoint_of(
    job: &Job,
    state: Option<Arc<OrgState>>,
) -> Result<Arc<WebhookEndpoint>, AttemptOutcome> {
    match state.and_then(|org| org.webhook.clone()) {
        Some(endpoint) if !job.orphaned_by(Some(&endpoint)) => Ok(endpoint),
        _ => Err(AttemptOutcome::EndpointRemoved {
            at: Timestamp::now(),
        }),
    }
}

impl Handler<Deliver> for DeliveryActor {
    type Result = ();

    fn handle(&mut self, Deliver(job): Deliver, _: &mut Self::Context) {
        // One node alone: the snapshot in memory is the endpoint as it is.
        let known = (!self.commit.store().shared())
            .then(|| endpoint_of(&job, self.commit.snapshot(job.organization_id)));
        let commit = self.commit.clone();
        let client = self
            .client
            .get_or_insert_with(|| build_client(&self.settings))
            .clone();
        let settings = self.settings.clone();
        let finished = self.finished.clone();
        actix_web::rt::spawn(async move {
            let endpoint = match known {
                Some(endpoint) => endpoint,
                None => endpoint_now(&commit, &job).await,
            };
            let outcome = match endpoint {
                Err(outcome) => outcome,
                Ok(endpoint) => {
                    let delivery_id = job.delivery_id.to_string();
                    let request = AttemptRequest {
                        url: &endpoint.url,
                        secret: &endpoint.secret,
                        event: &job.event,
                        delivery_id: &delivery_id,
                        attempt: job.attempts_made + 1,
                        body: Bytes::from(job.body.clone()),
                    };
                    attempt(&client, &settings, request).await
                }
            };
            finished.do_send(AttemptFinished { job, outcome });
        });
    }
}
