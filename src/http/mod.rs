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
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;

use crate::accounts::Accounts;
use crate::actors::dispatcher::GetQueueDepth;
use crate::actors::messages::{AppendLog, Mutate, OrgCommand};
use crate::actors::registry::Registry;
use crate::commit::CommitPath;
use crate::domain::access::Caller;
use crate::domain::commands::Reply;
use crate::domain::error::ApiError;
use crate::http::route_table::RouteSpec;
use crate::ids::OrgId;
use crate::metrics::Metrics;
use crate::state::accounts::AccountTable;
use crate::state::directory::Directory;
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
        let reply = self
            .mutate(access.org_id(), access.caller(), req, route, command)
            .await?;
        Ok(reply_response(reply, status))
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
        let msg = Mutate {
            caller,
            request_id: extract::request_id(req),
            needs: route.needs(),
            command,
        };
        self.registry.mutate(org, msg).await
    }
}

/// A JSON response with `status`.
pub fn json_response<T: Serialize>(status: StatusCode, body: &T) -> HttpResponse {
    HttpResponse::build(status).json(body)
}

/// The response for a command's reply; `status` is used for bodies.
pub fn reply_response(reply: Reply, status: StatusCode) -> HttpResponse {
    match reply {
        Reply::Role(view, etag) => HttpResponse::build(status)
            .insert_header(("ETag", etag))
            .json(view),
        Reply::Member(view) => json_response(status, &view),
        Reply::Organization(org) => json_response(status, &org),
        Reply::Webhook(view) => json_response(status, &view),
        Reply::Secret(secret) => {
            json_response(status, &serde_json::json!({ "secret": secret.expose() }))
        }
        Reply::Deleted => HttpResponse::NoContent().finish(),
    }
}

/// Parses an id from the path: 404 naming `what` when it is not a UUID.
pub fn path_id<T>(
    raw: &str,
    what: &'static str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, ApiError> {
    parse(raw).ok_or(ApiError::NotFound(what))
}
