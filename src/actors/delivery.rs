//! Delivery actors: one per arbiter thread, each with its own keep-alive
//! HTTP client, running many attempts at once as independent futures, so
//! no attempt waits for another.
//!
//! An attempt is three steps: [`endpoint_now`] reads the endpoint as it is
//! when the attempt starts (CONTRACT §6: URL and secret are read then; on a
//! store other nodes share, after checking the organization's revision
//! there, so that a secret rotated on another node is dead for every later
//! attempt; when that check cannot be made, the attempt is not made, and
//! goes back to the dispatcher to wait) and finds a removed one;
//! [`attempt`] calls it; the outcome goes back to the dispatcher, which
//! records it. On a shared store the request waits at its [`Gate`] (the
//! in-flight limits) after the check, so that checks overlap other
//! requests.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actix_web::web::Bytes;

use crate::actors::endpoint_health::Attempted;
use crate::actors::messages::{AttemptFinished, AttemptNotMade, Deliver, NotMade};
use crate::actors::send_permits::{Gate, LeaseLapsed};
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
    /// Where attempts not made go back.
    not_made: Recipient<AttemptNotMade>,
    /// What each attempt says of its endpoint goes there.
    health: Recipient<Attempted>,
}

/// An attempt that waited longer than this for its permits reads its
/// endpoint again before its request, so that the endpoint it calls is
/// never much older than the request.
const READ_AGAIN_AFTER: Duration = Duration::from_millis(50);

impl DeliveryActor {
    /// A delivery actor reading endpoints through `commit`, reporting
    /// outcomes to `finished`, attempts not made to `not_made`, and what
    /// attempts say of their endpoints to `health`.
    pub fn new(
        settings: ClientSettings,
        commit: Arc<CommitPath>,
        finished: Recipient<AttemptFinished>,
        not_made: Recipient<AttemptNotMade>,
        health: Recipient<Attempted>,
    ) -> Self {
        DeliveryActor {
            client: None,
            settings,
            commit,
            finished,
            not_made,
            health,
        }
    }
}

impl Actor for DeliveryActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Self::Context) {
        self.client = Some(build_client(&self.settings));
    }
}

/// The endpoint to attempt `job` at, as it is now on a store other nodes
/// share; the outcome instead when the job's endpoint has been removed
/// since it was queued; [`NotMade::Unchecked`] when the store cannot be
/// asked.
async fn endpoint_now(
    commit: &CommitPath,
    job: &Job,
) -> Result<Result<Arc<WebhookEndpoint>, AttemptOutcome>, NotMade> {
    match commit.current_snapshot(job.organization_id).await {
        Ok(state) => Ok(endpoint_of(job, state)),
        Err(err) => {
            tracing::debug!(error = %crate::telemetry::cause_chain(&err), "the organization's revision could not be checked before an attempt; the attempt waits");
            Err(NotMade::Unchecked)
        }
    }
}

/// `job`'s endpoint in `state`, or the outcome of a removed or disabled one.
fn endpoint_of(
    job: &Job,
    state: Option<Arc<OrgState>>,
) -> Result<Arc<WebhookEndpoint>, AttemptOutcome> {
    match state.and_then(|org| org.webhook.clone()) {
        Some(endpoint) if job.orphaned_by(Some(&endpoint)) => {
            Err(AttemptOutcome::EndpointRemoved {
                at: Timestamp::now(),
            })
        }
        Some(endpoint) if endpoint.disabled.is_some() => Err(AttemptOutcome::EndpointDisabled {
            at: Timestamp::now(),
        }),
        Some(endpoint) => Ok(endpoint),
        None => Err(AttemptOutcome::EndpointRemoved {
            at: Timestamp::now(),
        }),
    }
}

impl Handler<Deliver> for DeliveryActor {
    type Result = ();

    fn handle(&mut self, Deliver(job, gate): Deliver, _: &mut Self::Context) {
        // One node alone: the snapshot in memory is the endpoint as it is.
        let known = (!self.commit.store().shared())
            .then(|| endpoint_of(&job, self.commit.snapshot(job.organization_id)));
        let run = Run {
            commit: self.commit.clone(),
            client: self
                .client
                .get_or_insert_with(|| build_client(&self.settings))
                .clone(),
            settings: self.settings.clone(),
            health: self.health.clone(),
        };
        let (finished, not_made) = (self.finished.clone(), self.not_made.clone());
        actix_web::rt::spawn(async move {
            let outcome = match (known, gate) {
                (Some(endpoint), _) => run.attempt(&job, endpoint).await,
                (None, gate) => match run.checked(&job, gate).await {
                    Ok(outcome) => outcome,
                    Err(why) => {
                        not_made.do_send(AttemptNotMade { job, why });
                        return;
                    }
                },
            };
            finished.do_send(AttemptFinished { job, outcome });
        });
    }
}

/// What one attempt needs.
struct Run {
    commit: Arc<CommitPath>,
    client: awc::Client,
    settings: ClientSettings,
    health: Recipient<Attempted>,
}

impl Run {
    /// An attempt on a shared store: its endpoint read after a check of
    /// the revision, its request made once through `gate`, and read again
    /// first if the wait there was long.
    async fn checked(&self, job: &Job, gate: Option<Gate>) -> Result<AttemptOutcome, NotMade> {
        let mut endpoint = endpoint_now(&self.commit, job).await?;
        let _permits = match (&endpoint, gate) {
            (Ok(_), Some(gate)) => {
                let permits = gate
                    .enter()
                    .await
                    .map_err(|LeaseLapsed| NotMade::LeaseLapsed)?;
                if permits.waited > READ_AGAIN_AFTER {
                    endpoint = endpoint_now(&self.commit, job).await?;
                }
                Some(permits)
            }
            _ => None,
        };
        Ok(self.attempt(job, endpoint).await)
    }

    /// Calls `endpoint` with `job`, or gives the outcome of a removed one.
    async fn attempt(
        &self,
        job: &Job,
        endpoint: Result<Arc<WebhookEndpoint>, AttemptOutcome>,
    ) -> AttemptOutcome {
        let endpoint = match endpoint {
            Ok(endpoint) => endpoint,
            Err(outcome) => return outcome,
        };
        let delivery_id = job.delivery_id.to_string();
        let request = AttemptRequest {
            url: &endpoint.url,
            secret: &endpoint.secret,
            event: &job.event,
            delivery_id: &delivery_id,
            attempt: job.attempts_made + 1,
            body: Bytes::from(job.body.clone()),
        };
        let outcome = attempt(&self.client, &self.settings, request).await;
        if let Some(seen) = Attempted::at(&endpoint, &outcome) {
            self.health.do_send(seen);
        }
        outcome
    }
}
