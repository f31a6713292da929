//! Delivery actors: one per arbiter thread, each with its own keep-alive
//! HTTP client, running many attempts at once as independent futures, so
//! no attempt waits for another.

use std::sync::Arc;

use actix::prelude::*;
use actix_web::web::Bytes;

use crate::actors::dispatcher::Dispatcher;
use crate::actors::messages::{AttemptFinished, Deliver};
use crate::domain::delivery::AttemptOutcome;
use crate::services::Services;
use crate::time::Timestamp;
use crate::webhooks::client::{attempt, build_client, AttemptRequest, ClientSettings};

/// Makes attempts.
pub struct DeliveryActor {
    client: Option<awc::Client>,
    settings: ClientSettings,
    services: Arc<Services>,
    dispatcher: Addr<Dispatcher>,
}

impl DeliveryActor {
    /// A delivery actor reporting to `dispatcher`.
    pub fn new(
        settings: ClientSettings,
        services: Arc<Services>,
        dispatcher: Addr<Dispatcher>,
    ) -> Self {
        DeliveryActor {
            client: None,
            settings,
            services,
            dispatcher,
        }
    }
}

impl Actor for DeliveryActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Self::Context) {
        // Built here, on the actor's own arbiter thread: awc clients are not Send.
        self.client = Some(build_client(&self.settings));
    }
}

/// The outcome of an attempt that could not be made because the endpoint is gone.
pub fn endpoint_removed() -> AttemptOutcome {
    AttemptOutcome {
        succeeded: false,
        status: None,
        body: None,
        latency_ms: 0,
        error: Some("endpoint removed".into()),
        started_at: Timestamp::now(),
    }
}

impl Handler<Deliver> for DeliveryActor {
    type Result = ();

    fn handle(&mut self, Deliver(job): Deliver, _: &mut Self::Context) {
        let client = self
            .client
            .get_or_insert_with(|| build_client(&self.settings))
            .clone();
        let settings = self.settings.clone();
        // URL and secret are read when the attempt starts (CONTRACT §6).
        let endpoint = self
            .services
            .directory
            .get(job.organization_id)
            .and_then(|org| org.webhook.clone());
        let dispatcher = self.dispatcher.clone();
        actix_web::rt::spawn(async move {
            let outcome = match endpoint {
                None => endpoint_removed(),
                Some(endpoint) => {
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
            dispatcher.do_send(AttemptFinished { job, outcome });
        });
    }
}
