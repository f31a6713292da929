//! The HTTP API: routes per resource, extractors, problem+json errors, and
//! the OpenAPI document generated from the same route registrations.

pub mod body;
pub mod credential;
pub mod extract;
pub mod idempotency;
pub mod observe;
pub mod org_routes;
pub mod paging;
pub mod problem;
pub mod rate_limit;
pub mod request_id;
pub mod resource_routes;
pub mod route_table;
pub mod route_template;
pub mod routes;
pub mod schema;
pub mod tls;

use std::sync::Arc;

use actix::Recipient;
use actix_web::http::header::{CONTENT_TYPE, ETAG};
use actix_web::http::StatusCode;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, ResponseError};
use serde::Serialize;

use crate::accounts::Accounts;
use crate::actors::dispatcher::GetQueueDepth;
use crate::actors::messages::{AppendLog, Mutate, OrgCommand, RecordAnswer};
use crate::actors::registry::Registry;
use crate::commit::CommitPath;
use crate::domain::access::Caller;
use crate::domain::commands::Reply;
use crate::domain::error::ApiError;
use crate::domain::idempotency::StoredAnswer;
use crate::http::route_table::RouteSpec;
use crate::ids::OrgId;
use crate::metrics::Metrics;
use crate::state::accounts::AccountTable;
use crate::state::directory::Directory;
use crate::state::recent_checks::ENDPOINT_CHANGE_WAIT;
use crate::storage::{Store, UserKey};
use crate::webhooks::client::ClientSettings;
use crate::webhooks::preflight::PendingTests;

/// What the handlers use, each a narrow handle given at construction.
pub struct AppContext {
    /// Reads of what is not held in memory: logs and workspace resources.
    pub store: Store,
    /// Every change that is not an organization command.
    pub commit: Arc<CommitPath>,
    /// Organization snapshots: what every organization request is judged on.
    pub directory: Arc<Directory>,
    /// Users and tokens: who a bearer token is.
    pub accounts: Arc<AccountTable>,
    /// User and token changes of the admin API.
    pub account_changes: Accounts,
    /// Organization actors: organization commands.
    pub registry: Arc<Registry>,
    /// Passed webhook tests waiting to be saved.
    pub tests: PendingTests,
    /// Outbound client settings, for the webhook test.
    pub client: ClientSettings,
    /// Where webhook tests' attempts are logged.
    pub log: Recipient<AppendLog>,
    /// The dispatcher's queue depth, for metrics.
    pub queue_depth: Recipient<GetQueueDepth>,
    /// The application's metrics.
    pub metrics: Arc<Metrics>,
    /// Delivery-log records kept per organization: how far back a
    /// recovery can look.
    pub log_retention: usize,
    /// SHA-256 of the admin token.
    pub admin_token_sha256: [u8; 32],
    /// SHA-256 of the token `/metrics` requires, when one is configured.
    pub metrics_token_sha256: Option<[u8; 32]>,
    /// Per-token rate limits; `None` when `api.rate_limit_per_second` is 0.
    pub rate_limiter: Option<crate::http::rate_limit::RateLimiter>,
    /// How long a request body may take, and the memory bodies may hold.
    pub bodies: body::BodyLimits,
    /// How long the answers of requests with an `Idempotency-Key` are kept.
    pub idempotency_ttl: std::time::Duration,
    /// The routes that take an `Idempotency-Key`.
    pub keyed_routes: idempotency::KeyedRoutes,
}

impl AppContext {
    /// Runs a member's `command`, needing what `route` needs, on the
    /// organization's actor; answers its reply with `status`.
    pub async fn run_command(
        &self,
        access: &extract::OrgAccess,
        req: &HttpRequest,
        route: RouteSpec,
        command: OrgCommand,
        status: StatusCode,
    ) -> Result<HttpResponse, ApiError> {
        // Under an idempotency key, the answer is recorded with the change.
        let keyed = req.extensions().get::<idempotency::Keyed>().cloned();
        let answer = keyed.clone().map(|keyed| {
            RecordAnswer(Arc::new(move |reply: &Reply| {
                stored_reply(reply, status).map(|answer| keyed.record(answer))
            }))
        });
        let waits = command.changes_endpoint() && self.store.shared();
        let msg = Mutate {
            answer,
            ..self.message(access.caller(), req, route, command)
        };
        let reply = self.registry.mutate(access.org_id(), msg).await?;
        if waits {
            // No other node's attempt that starts after this answer can
            // use a revision read before the change (`recent_checks`).
            actix_web::rt::time::sleep(ENDPOINT_CHANGE_WAIT).await;
        }
        // Recorded exactly when the reply is kept and renders, as the
        // response does (the same renderer).
        let kept = kept_reply(&reply);
        let response = reply_response(reply, status);
        let recorded = keyed.is_some() && kept && response.status().is_success();
        Ok(if recorded {
            idempotency::answered_with_change(response)
        } else {
            response
        })
    }

    /// On a store other nodes share, reads the user an invitation names
    /// (`user_id` or `email`) into memory, where the command looks for it:
    /// another node may have created it. The command validates the body.
    pub async fn learn_invitee(&self, input: &crate::domain::input::Input) -> Result<(), ApiError> {
        if !self.store.shared() {
            return Ok(());
        }
        let Ok(body) = input.parse::<serde_json::Value>() else {
            return Ok(());
        };
        let folded = body["email"]
            .as_str()
            .map(|e| crate::domain::names::fold(e.trim()));
        let by = match (
            body["user_id"].as_str().and_then(crate::ids::UserId::parse),
            &folded,
        ) {
            (Some(id), _) => UserKey::Id(id),
            (None, Some(email)) => UserKey::Email(email),
            (None, None) => return Ok(()),
        };
        self.account_changes.user(by).await.map(drop)
    }

    /// Runs `command`, needing what `route` needs, on the organization's actor.
    pub async fn mutate(
        &self,
        org: OrgId,
        caller: Caller,
        req: &HttpRequest,
        route: RouteSpec,
        command: OrgCommand,
    ) -> Result<Reply, ApiError> {
        let msg = self.message(caller, req, route, command);
        self.registry.mutate(org, msg).await
    }

    /// The message running `command` for `caller`, with no answer to record.
    fn message(
        &self,
        caller: Caller,
        req: &HttpRequest,
        route: RouteSpec,
        command: OrgCommand,
    ) -> Mutate {
        Mutate {
            caller,
            request_id: extract::request_id(req),
            needs: route.needs(),
            command,
            answer: None,
        }
    }
}

/// A JSON response with `status`.
pub fn json_response<T: Serialize>(status: StatusCode, body: &T) -> HttpResponse {
    HttpResponse::build(status).json(body)
}

/// A command's reply as answered.
struct Rendered<'a> {
    /// The route's status, or 204 for no body.
    status: StatusCode,
    etag: Option<&'a str>,
    /// The JSON body, if any.
    body: Option<Vec<u8>>,
}

/// `reply` as answered with `status`.
fn rendered(reply: &Reply, status: StatusCode) -> serde_json::Result<Rendered<'_>> {
    use serde_json::to_vec as json;
    let (etag, body) = match reply {
        Reply::Role(view, etag) => (Some(etag.as_str()), json(view)?),
        Reply::Member(view) => (None, json(view)?),
        Reply::Organization(org) => (None, json(org)?),
        Reply::Webhook(view) => (None, json(view)?),
        Reply::Secret(secret) => (
            None,
            json(&serde_json::json!({ "secret": secret.expose() }))?,
        ),
        Reply::Deleted => {
            return Ok(Rendered {
                status: StatusCode::NO_CONTENT,
                etag: None,
                body: None,
            })
        }
    };
    Ok(Rendered {
        status,
        etag,
        body: Some(body),
    })
}

/// The response for a command's reply; `status` is used for bodies.
pub fn reply_response(reply: Reply, status: StatusCode) -> HttpResponse {
    let rendered = match rendered(&reply, status) {
        Ok(rendered) => rendered,
        Err(err) => return ApiError::internal(err).error_response(),
    };
    let mut response = HttpResponse::build(rendered.status);
    if let Some(etag) = rendered.etag {
        response.insert_header((ETAG, etag));
    }
    match rendered.body {
        Some(body) => response.content_type(idempotency::JSON).body(body),
        None => response.finish(),
    }
}

/// Whether a reply's answer is kept under an idempotency key: all but one
/// that shows a secret.
fn kept_reply(reply: &Reply) -> bool {
    !matches!(reply, Reply::Secret(_))
}

/// The answer [`reply_response`] makes of `reply`, as an idempotency key
/// keeps it; none for a reply that shows a secret, which is not kept.
fn stored_reply(reply: &Reply, status: StatusCode) -> Option<StoredAnswer> {
    if !kept_reply(reply) {
        return None;
    }
    let rendered = rendered(reply, status).ok()?;
    let mut headers = Vec::new();
    if rendered.body.is_some() {
        headers.push((
            CONTENT_TYPE.as_str().to_owned(),
            idempotency::JSON.to_owned(),
        ));
    }
    if let Some(etag) = rendered.etag {
        headers.push((ETAG.as_str().to_owned(), etag.to_owned()));
    }
    Some(StoredAnswer {
        status: rendered.status.as_u16(),
        headers,
        body: rendered.body.unwrap_or_default(),
    })
}

/// Parses an id from the path: 404 naming `what` when it is not a UUID.
pub fn path_id<T>(
    raw: &str,
    what: &'static str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, ApiError> {
    parse(raw).ok_or(ApiError::NotFound(what))
}
