//! `Idempotency-Key` (issue 31), as Stripe and Svix take it: a client that
//! cannot tell whether its POST happened sends it again with the same key,
//! and gets the first answer again instead of a second change.
//!
//! - It applies to every POST that creates or changes (not the permission
//!   check, which changes nothing) and to the webhook's PUT, when the
//!   request carries a live token; a key is 1 to 255 printable ASCII
//!   characters (else 400 VALIDATION_FAILED naming the header). The
//!   request's body is JSON or none at all (a rotation, a freeze).
//! - The key is scoped to the token and the organization of the path (the
//!   token alone on `/admin`): what is stored is the SHA-256 of the three,
//!   with the SHA-256 of the request (method, path and query, body).
//! - The first request claims the key in the store, runs, and its answer
//!   (status, Content-Type, Location, ETag, body) is stored durably for
//!   `api.idempotency_ttl_hours`, on every engine and for every node. A
//!   later request with the key and the same fingerprint gets that answer
//!   with `Idempotent-Replayed: true`, and nothing runs; with another
//!   fingerprint, 422 IDEMPOTENCY_KEY_REUSED; while the first one runs, 409
//!   IDEMPOTENCY_KEY_IN_PROGRESS with Retry-After.
//! - 5xx answers are not stored (a retry may succeed); 4xx are, as Stripe
//!   does (CONTRACT §10). Nor are answers that show a secret (a rotation,
//!   a passed first test, an issued token): a secret is shown once and
//!   never kept in clear, so their retry runs again. A request without a live token, or over
//!   its rate limit, is answered before any key is looked at.
//! - A route that can render its answer before committing its change
//!   records the answer in the change's own transaction ([`respond_with`]),
//!   so that no stop of the node can leave the change made and its key
//!   unanswered: the workspace resources' creates and actions do, and the
//!   organization's commands ([`crate::http::AppContext::run_command`]).
//!   For the others, a node that stops between the change and the record
//!   of its answer leaves the key claimed: after [`CLAIM`] a retry runs
//!   the request again.

use std::time::Duration;

use actix_web::body::{to_bytes, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use actix_web::http::{Method, StatusCode, Uri};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpResponse, ResponseError};
use bytes::Bytes;

use crate::domain::change::Write;
use crate::domain::error::ApiError;
use crate::domain::idempotency::{Begin, KeyAnswer, KeyClaim, StoredAnswer};
use crate::domain::input::Input;
use crate::http::body::{read_input, ReadBody};
use crate::http::credential::bearer_token;
use crate::http::extract::Prechecked;
use crate::http::AppContext;
use crate::ids::OrgId;
use crate::secrets::{constant_time_eq, sha256};
use crate::time::Timestamp;

/// The request header.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header of a replayed answer.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// The longest key.
pub const KEY_MAX: usize = 255;
/// How long a request's claim on its key holds: past it, another request
/// with the key may take it over (the first one's node stopped).
pub const CLAIM: Duration = Duration::from_secs(60);
/// The headers a replay repeats.
const KEPT_HEADERS: [&str; 3] = ["content-type", "location", "etag"];

/// A keyed request's claim, left in its extensions for the handler: see
/// [`respond_with`].
#[derive(Clone, Debug)]
pub struct Keyed {
    claim: KeyClaim,
    /// When the answer is forgotten.
    expires: Timestamp,
}

impl Keyed {
    /// The write that records `answer` as this request's.
    pub fn record(&self, answer: StoredAnswer) -> Write {
        Write::KeyAnswer(Box::new(KeyAnswer {
            scope: self.claim.scope,
            fingerprint: self.claim.fingerprint,
            answer,
            expires: self.expires,
        }))
    }
}

/// In a response's extensions: its answer was committed with its change,
/// so the middleware has nothing to record.
struct AnsweredWithChange;

/// Marks `response` as one whose answer was committed with its change
/// (see [`AnsweredWithChange`]).
pub fn answered_with_change(mut response: HttpResponse) -> HttpResponse {
    response.extensions_mut().insert(AnsweredWithChange);
    response
}

/// In a response's extensions: it shows a secret (a rotated one, a passed
/// first test's, an issued token), which is not kept at rest in clear, nor
/// shown again: a retry runs again, as after a failure of ours.
struct RevealsSecret;

/// Marks `response` as one that shows a secret (see [`RevealsSecret`]).
pub fn reveals_secret(mut response: HttpResponse) -> HttpResponse {
    response.extensions_mut().insert(RevealsSecret);
    response
}

/// A JSON answer rendered before its change is committed.
#[derive(Debug)]
pub struct JsonAnswer {
    status: StatusCode,
    body: Bytes,
    /// Whether its record under the request's key is one of the change's
    /// writes.
    recorded: bool,
}

impl JsonAnswer {
    /// The response, the same bytes as `HttpResponse::build(status).json(value)`.
    pub fn into_response(self) -> HttpResponse {
        let response = HttpResponse::build(self.status)
            .content_type(JSON)
            .body(self.body);
        if self.recorded {
            answered_with_change(response)
        } else {
            response
        }
    }
}

/// The content type of JSON answers.
pub const JSON: &str = "application/json";

/// What a handler hands the workspace to answer with `status` and the
/// JSON of the resource it changes: the answer and, for a keyed request,
/// the write that records it under the key, committed with the change.
pub fn respond_with<T: serde::Serialize>(
    keyed: Option<&Keyed>,
    status: StatusCode,
) -> impl Fn(&T) -> Result<(JsonAnswer, Option<Write>), ApiError> + '_ {
    move |value| {
        let body = Bytes::from(serde_json::to_vec(value).map_err(ApiError::internal)?);
        let record = keyed.map(|keyed| {
            keyed.record(StoredAnswer {
                status: status.as_u16(),
                headers: vec![(CONTENT_TYPE.as_str().to_owned(), JSON.to_owned())],
                body: body.to_vec(),
            })
        });
        let answer = JsonAnswer {
            status,
            body,
            recorded: record.is_some(),
        };
        Ok((answer, record))
    }
}

/// How often records past their time are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(600);
/// Records one purge statement deletes at most.
const PURGE_AT_ONCE: usize = 1000;

/// Deletes the records past their time every [`PURGE_EVERY`], in batches,
/// while the process runs (a lapsed record is never read as live anyway).
pub fn start_purging(store: crate::storage::Store) {
    actix_web::rt::spawn(async move {
        loop {
            actix_web::rt::time::sleep(PURGE_EVERY).await;
            loop {
                match store
                    .idempotency_purge(Timestamp::now(), PURGE_AT_ONCE)
                    .await
                {
                    Ok(purged) if purged == PURGE_AT_ONCE => continue,
                    Ok(_) => break,
                    Err(err) => {
                        tracing::warn!(error = %crate::telemetry::cause_chain(&err), "purging expired idempotency keys failed; trying again later");
                        break;
                    }
                }
            }
        }
    });
}

/// The routes that take a key, as path templates of the OpenAPI document
/// (which lists every route): a request that matches none (a method the
/// path does not have, an unknown path) is left to its 404 or 405.
#[derive(Debug, Default)]
pub struct KeyedRoutes {
    routes: Vec<(Method, Vec<String>)>,
}

impl KeyedRoutes {
    /// The routes of `document` that take a key.
    pub fn of(document: &utoipa::openapi::OpenApi) -> Self {
        let mut routes = Vec::new();
        for (template, item) in &document.paths.paths {
            for (method, operation) in [(Method::POST, &item.post), (Method::PUT, &item.put)] {
                if operation.is_some() && takes_key(&method, template) {
                    routes.push((method, segments(template).map(str::to_owned).collect()));
                }
            }
        }
        KeyedRoutes { routes }
    }

    /// Whether a request of `method` on `path` is one of them. The path is
    /// split once, not once per route.
    pub fn matches(&self, method: &Method, path: &str) -> bool {
        let parts: Vec<&str> = segments(path).collect();
        self.routes.iter().any(|(m, template)| {
            m == method
                && parts.len() == template.len()
                && parts
                    .iter()
                    .zip(template)
                    .all(|(part, pattern)| pattern.starts_with('{') || part == pattern)
        })
    }
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|part| !part.is_empty())
}

/// Whether a request of `method` on `path` takes a key.
pub fn takes_key(method: &Method, path: &str) -> bool {
    match *method {
        Method::POST => !path.ends_with("/permissions/check"),
        Method::PUT => path.ends_with("/webhook"),
        _ => false,
    }
}

/// A key as sent, or why it is refused.
fn valid_key(value: &HeaderValue) -> Result<&str, ApiError> {
    let refused = || {
        ApiError::invalid(
            "Idempotency-Key",
            format!("1 to {KEY_MAX} printable ASCII characters"),
        )
    };
    let key = value.to_str().map_err(|_| refused())?;
    if key.is_empty() || key.len() > KEY_MAX || !key.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(refused());
    }
    Ok(key)
}

/// Middleware body (for `actix_web::middleware::from_fn`).
pub async fn idempotency(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, BoxBody>>, actix_web::Error> {
    let Some(value) = req.headers().get(IDEMPOTENCY_KEY).cloned() else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let Some(ctx) = req
        .app_data::<web::Data<AppContext>>()
        .filter(|ctx| ctx.keyed_routes.matches(req.method(), req.path()))
        .cloned()
    else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let key = match valid_key(&value) {
        Ok(key) => key.to_owned(),
        Err(refused) => return Ok(answer(req, refused.error_response())),
    };
    // Only for a live token: the handler answers the others (401), and a
    // request without one leaves nothing in the store.
    let token = match live_token(&ctx, &req).await {
        Ok(Some(token)) => token,
        Ok(None) => return Ok(next.call(req).await?.map_into_left_body()),
        Err(err) => return Ok(answer(req, err.error_response())),
    };
    let payload = req.take_payload();
    let input = match read_input(req.request(), payload).await {
        Ok(input) => input,
        Err(refused) => return Ok(answer(req, refused.error_response())),
    };
    let fingerprint = request_fingerprint(&req, &input);
    req.extensions_mut().insert(ReadBody(input));
    let Some(fingerprint) = fingerprint else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let now = Timestamp::now();
    let claim = KeyClaim {
        scope: scope(&token, req.path(), &key),
        fingerprint,
        until: later(now, CLAIM),
    };
    let expires = later(now, ctx.idempotency_ttl);
    let begun = ctx
        .store
        .idempotency_begin(claim.scope, fingerprint, claim.until, expires, now)
        .await;
    if let Some(refused) = not_run(begun) {
        return Ok(answer(req, refused));
    }
    req.extensions_mut().insert(Keyed { claim, expires });
    match next.call(req).await {
        Ok(response) => Ok(settle(&ctx, claim, expires, response).await),
        Err(err) => {
            let _ = ctx.store.idempotency_forget(claim).await;
            Err(err)
        }
    }
}

/// The fingerprint of a request whose body is `input`: `None` when there
/// is no body to judge it by (not JSON, too large, broken), which the
/// handler refuses, and nothing is kept.
fn request_fingerprint(req: &ServiceRequest, input: &Input) -> Option<[u8; 32]> {
    match input {
        Input::Json(body) => Some(fingerprint(req.method(), req.request().uri(), body)),
        // A POST with no body at all (a rotation, a capsule's freeze).
        Input::NotJson if sends_no_body(req.headers()) => {
            Some(fingerprint(req.method(), req.request().uri(), b""))
        }
        _ => None,
    }
}

/// The answer to a keyed request that is not to run, from what claiming
/// its key found (`None`: it runs).
fn not_run(begun: Result<Begin, crate::storage::StoreError>) -> Option<HttpResponse> {
    match begun {
        Ok(Begin::Run) => None,
        Ok(Begin::Replay(stored)) => Some(replayed(&stored)),
        Ok(Begin::Running { .. }) => Some(ApiError::IdempotencyKeyInProgress.error_response()),
        Ok(Begin::Reused) => Some(ApiError::IdempotencyKeyReused.error_response()),
        Err(err) => Some(ApiError::from(err).error_response()),
    }
}

/// What becomes of `claim` once its request ran and answered `response`:
/// over if the answer was committed with the change; dropped if the
/// answer is not kept; else the answer recorded under it.
async fn settle<B: MessageBody + 'static>(
    ctx: &AppContext,
    claim: KeyClaim,
    expires: Timestamp,
    response: ServiceResponse<B>,
) -> ServiceResponse<EitherBody<B, BoxBody>> {
    let (answered, secret) = {
        let extensions = response.response().extensions();
        (
            extensions.contains::<AnsweredWithChange>(),
            extensions.contains::<RevealsSecret>(),
        )
    };
    if answered {
        ctx.store
            .idempotency_answered(claim.scope, &claim.fingerprint);
        return response.map_into_left_body();
    }
    let status = response.status();
    if !kept(status) || secret {
        if let Err(err) = ctx.store.idempotency_forget(claim).await {
            tracing::warn!(error = %crate::telemetry::cause_chain(&err), "an idempotency key's claim could not be dropped at once; a retry meets it until it is");
        }
        return response.map_into_left_body();
    }
    let (request, response) = response.into_parts();
    let (head, body) = response.into_parts();
    let Ok(body) = to_bytes(body).await else {
        let _ = ctx.store.idempotency_forget(claim).await;
        let failed = ApiError::internal(std::io::Error::other("the answer could not be read"));
        return ServiceResponse::new(request, failed.error_response()).map_into_right_body();
    };
    let stored = StoredAnswer {
        status: status.as_u16(),
        headers: KEPT_HEADERS
            .iter()
            .filter_map(|name| {
                let value = head.headers().get(*name)?.to_str().ok()?;
                Some(((*name).to_owned(), value.to_owned()))
            })
            .collect(),
        body: body.to_vec(),
    };
    if let Err(err) = ctx
        .store
        .idempotency_answer(claim.scope, claim.fingerprint, stored, expires)
        .await
    {
        // The change is made and answered; only its replay waits (the
        // store may go on trying) or is lost.
        tracing::warn!(error = %crate::telemetry::cause_chain(&err), "an idempotency key's answer could not be stored at once");
    }
    let response = head.set_body(body).map_into_boxed_body();
    ServiceResponse::new(request, response).map_into_right_body()
}

/// Whether an answer of `status` is kept for replays: every one but a
/// failure of ours (5xx), which a retry may get past (CONTRACT §10). (A
/// request over its rate limit, 429, never gets here: it is refused before.)
fn kept(status: StatusCode) -> bool {
    !status.is_server_error()
}

/// The presented token when it is live: the admin token on `/admin`, a
/// user's token elsewhere. When nodes share the store, that is asked of the
/// store, with the path's organization's revision, and the answer left for
/// the handler's extractor ([`Prechecked`]): one check per request.
async fn live_token(ctx: &AppContext, req: &ServiceRequest) -> Result<Option<[u8; 32]>, ApiError> {
    let Ok(token) = bearer_token(req.headers()) else {
        return Ok(None);
    };
    let digest = sha256(token.as_bytes());
    let live = if req.path().starts_with("/admin/") {
        constant_time_eq(&digest, &ctx.admin_token_sha256)
    } else if ctx.store.shared() {
        let org = organization_of(req.path()).and_then(OrgId::parse);
        let fresh = ctx.commit.freshness(Some(&digest), org).await?;
        let live = fresh.as_ref().is_some_and(|fresh| fresh.account.is_some());
        req.extensions_mut().insert(Prechecked {
            token: digest,
            org,
            fresh,
        });
        live
    } else {
        ctx.accounts.user_for_digest(&digest).is_some()
    };
    Ok(live.then_some(digest))
}

/// The organization segment of `path`, if it is an organization's route.
fn organization_of(path: &str) -> Option<&str> {
    path.strip_prefix("/organizations/")
        .and_then(|rest| rest.split('/').next())
}

/// Whether a request with `headers` has no body: no `Transfer-Encoding`,
/// and no `Content-Length` or a zero one.
fn sends_no_body(headers: &actix_web::http::header::HeaderMap) -> bool {
    use actix_web::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
    !headers.contains_key(TRANSFER_ENCODING)
        && headers
            .get(CONTENT_LENGTH)
            .is_none_or(|length| length.as_bytes() == b"0")
}

/// The SHA-256 of the request: method, path with query, body.
fn fingerprint(method: &Method, uri: &Uri, body: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let target = uri
        .path_and_query()
        .map_or(uri.path(), |target| target.as_str());
    let mut hasher = Sha256::new();
    hasher.update(method.as_str().as_bytes());
    hasher.update(b"\n");
    hasher.update(target.as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    hasher.finalize().into()
}

/// The SHA-256 of the token's, the path's organization (none on `/admin`)
/// and the key: where the key's record is kept.
fn scope(token: &[u8; 32], path: &str, key: &str) -> [u8; 32] {
    let org = organization_of(path).unwrap_or("");
    let mut text = Vec::with_capacity(32 + org.len() + key.len() + 2);
    text.extend_from_slice(token);
    text.push(0);
    text.extend_from_slice(org.as_bytes());
    text.push(0);
    text.extend_from_slice(key.as_bytes());
    sha256(&text)
}

fn later(now: Timestamp, after: Duration) -> Timestamp {
    Timestamp(
        now.millis()
            .saturating_add(i64::try_from(after.as_millis()).unwrap_or(i64::MAX)),
    )
}

/// `stored`, replayed.
fn replayed(stored: &StoredAnswer) -> HttpResponse {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = HttpResponse::build(status);
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            response.insert_header((name, value));
        }
    }
    response.insert_header((IDEMPOTENT_REPLAYED, "true"));
    response.body(stored.body.clone())
}

fn answer<B>(
    req: ServiceRequest,
    response: HttpResponse,
) -> ServiceResponse<EitherBody<B, BoxBody>> {
    req.into_response(response).map_into_right_body()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_1_to_255_printable_ascii_characters() {
        let judged = |bytes: &[u8]| HeaderValue::from_bytes(bytes).map(|v| valid_key(&v).is_ok());
        for good in ["a", "order-1", "spaced key", &"k".repeat(255)] {
            assert_eq!(judged(good.as_bytes()).ok(), Some(true), "{good}");
        }
        for bad in [String::new(), "k".repeat(256), "tab\tkey".into()] {
            assert_eq!(judged(bad.as_bytes()).ok(), Some(false), "{bad:?}");
        }
        assert_eq!(judged(b"caf\xe9").ok(), Some(false));
    }

    #[test]
    fn a_key_is_scoped_to_token_and_organization_and_a_request_to_its_body() {
        let token = [7; 32];
        let here = scope(&token, "/organizations/a/tasks", "k");
        assert_eq!(here, scope(&token, "/organizations/a/roles", "k"));
        assert_ne!(here, scope(&token, "/organizations/b/tasks", "k"));
        assert_ne!(here, scope(&[8; 32], "/organizations/a/tasks", "k"));
        assert_ne!(here, scope(&token, "/organizations/a/tasks", "l"));
        let of = |target: &'static str, body: &[u8]| {
            fingerprint(&Method::POST, &Uri::from_static(target), body)
        };
        let post = of("/organizations/a/tasks", b"{}");
        assert_ne!(post, of("/organizations/a/tasks", b"{ }"));
        assert_ne!(post, of("/organizations/a/roles", b"{}"));
        assert_ne!(post, of("/organizations/a/tasks?x=1", b"{}"));
    }

    #[test]
    fn a_request_sends_no_body_without_a_length_or_with_a_zero_one() {
        use actix_web::http::header::{HeaderMap, CONTENT_LENGTH, TRANSFER_ENCODING};
        let with = |pairs: &[(HeaderName, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(name.clone(), HeaderValue::from_static(value));
            }
            sends_no_body(&headers)
        };
        assert!(with(&[]));
        assert!(with(&[(CONTENT_LENGTH, "0")]));
        assert!(!with(&[(CONTENT_LENGTH, "2")]));
        assert!(!with(&[(TRANSFER_ENCODING, "chunked")]));
    }

    #[test]
    fn a_keyed_route_matches_its_method_and_template_only() {
        let document = crate::http::routes::openapi::document();
        let routes = KeyedRoutes::of(&document);
        assert!(routes.matches(&Method::POST, "/organizations/abc/tasks"));
        assert!(routes.matches(&Method::POST, "/organizations/abc/capsules/x/freeze"));
        assert!(routes.matches(&Method::PUT, "/organizations/abc/webhook"));
        assert!(
            !routes.matches(&Method::POST, "/organizations/abc/webhook"),
            "PUT only"
        );
        assert!(
            !routes.matches(&Method::POST, "/organizations/abc/tasks/x"),
            "no such route"
        );
        assert!(!routes.matches(&Method::POST, "/organizations/abc/permissions/check"));
    }

    #[test]
    fn creates_and_changes_take_a_key_reads_do_not() {
        assert!(takes_key(&Method::POST, "/organizations/a/tasks"));
        assert!(takes_key(&Method::POST, "/admin/users"));
        assert!(takes_key(&Method::PUT, "/organizations/a/webhook"));
        assert!(!takes_key(
            &Method::POST,
            "/organizations/a/permissions/check"
        ));
        assert!(!takes_key(&Method::GET, "/organizations/a/tasks"));
        assert!(!takes_key(&Method::PATCH, "/organizations/a/tasks/x"));
        assert!(kept(StatusCode::CONFLICT) && kept(StatusCode::CREATED));
        assert!(!kept(StatusCode::SERVICE_UNAVAILABLE) && !kept(StatusCode::INTERNAL_SERVER_ERROR));
    }
}
