//! The webhook endpoint: `/organizations/{org_id}/webhook…` (CONTRACT §6).

use actix_web::http::StatusCode;
use actix_web::{delete, get, post, put, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::actors::messages::{AppendLog, OrgCommand};
use crate::commit::Commit;
use crate::domain::change::Write;
use crate::domain::delivery::{Job, LogRecord, LogView, Outcome};
use crate::domain::error::ApiError;
use crate::domain::event::EventKind;
use crate::domain::webhook::{EventSet, PassedTest, WebhookView};
use crate::http::body::JsonInput;
use crate::http::extract::OrgAccess;
use crate::http::idempotency::{respond_with, reveals_secret, Keyed};
use crate::http::paging::{ListQuery, Page};
use crate::http::problem::Problem;
use crate::http::route_table::{
    RouteSpec, DELIVERIES_LIST, DELIVERIES_REDELIVER, WEBHOOK_DELETE, WEBHOOK_GET, WEBHOOK_ROTATE,
    WEBHOOK_SAVE, WEBHOOK_TEST,
};
use crate::http::{path_id, AppContext};
use crate::ids::{DeliveryId, LogId, TestId};
use crate::storage::LogFilter;
use crate::webhooks::client::ClientSettings;
use crate::webhooks::preflight::send_preflight;
use crate::webhooks::signing::new_secret;
use crate::webhooks::url::{check_resolution, parse_url, UrlRefused, WebhookUrl};

/// Registers the routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get_webhook)
        .service(test_webhook)
        .service(save_webhook)
        .service(rotate_webhook)
        .service(delete_webhook)
        .service(list_deliveries)
        .service(redeliver);
}

/// Body of `POST …/webhook/test`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestWebhook {
    /// The endpoint to test (https unless the operator allows http).
    #[schema(schema_with = crate::http::schema::fields::webhook_url)]
    url: String,
    /// Event ids to subscribe when saved.
    #[schema(schema_with = crate::http::schema::fields::event_ids)]
    events: Vec<String>,
}

/// The answer of a test.
#[derive(Serialize, ToSchema)]
pub struct TestResult {
    /// The endpoint answered 2xx.
    passed: bool,
    /// Give this to `PUT …/webhook` to save (when passed).
    test_id: TestId,
    /// The endpoint's status code.
    status_code: Option<u16>,
    /// How long the attempt took.
    latency_ms: u64,
    /// At most 4096 bytes of the endpoint's answer.
    response_body: Option<String>,
    /// What went wrong.
    error: Option<String>,
    /// The new signing secret: only on a passed first-setup test. Shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

/// Body of `PUT …/webhook`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveWebhook {
    /// A passed test of the last 15 minutes, not used before.
    #[schema(schema_with = crate::http::schema::fields::test_id)]
    test_id: String,
}

/// A rotated secret.
#[derive(Serialize, ToSchema)]
pub struct RotatedSecret {
    /// The new signing secret. Shown once; the old one is dead at once.
    secret: String,
}

/// The answer of a redelivery.
#[derive(Serialize, ToSchema)]
pub struct Redelivery {
    /// The new delivery's id.
    delivery_id: DeliveryId,
}

/// The endpoint (`org:settings:read`); the secret is never returned.
#[utoipa::path(operation_id = "get_webhook", tag = "webhook", security(("bearer" = [])), params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = WebhookView), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("")]
async fn get_webhook(access: OrgAccess) -> Result<HttpResponse, ApiError> {
    let endpoint = access.webhook(WEBHOOK_GET)?;
    Ok(HttpResponse::Ok().json(endpoint.view()))
}

/// Sends `test.preflight` synchronously (`org:settings:manage`).
#[utoipa::path(operation_id = "test_webhook", tag = "webhook", security(("bearer" = [])), request_body = TestWebhook,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = TestResult), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem), (status = 413, body = Problem), (status = 415, body = Problem)))]
#[post("/test")]
async fn test_webhook(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    access.allow(WEBHOOK_TEST)?;
    let body: TestWebhook = input.parse()?;
    let events = EventSet::parse(&body.events)?;
    let url = allowed_url(&body.url, &ctx.client).await?;
    // First setup signs with a fresh candidate (revealed if the test passes);
    // a configured endpoint is tested with its current secret.
    let (secret, candidate) = match &access.state.webhook {
        Some(current) => (current.secret.clone(), None),
        None => {
            let fresh = new_secret();
            (fresh.clone(), Some(fresh))
        }
    };
    let test_id = TestId::generate();
    let (outcome, record) =
        send_preflight(&ctx.client, access.org_id(), &url, events, &secret, test_id).await?;
    ctx.log.do_send(AppendLog { record, job: None });
    let passed = outcome.succeeded();
    if passed {
        let test = PassedTest {
            organization_id: access.org_id(),
            url: url.as_str().to_owned(),
            events,
            candidate_secret: candidate.clone(),
            passed_at: std::time::Instant::now(),
        };
        ctx.tests.insert(test_id, test).await?;
    }
    let result = TestResult {
        passed,
        test_id,
        status_code: outcome.status(),
        latency_ms: outcome.latency_ms(),
        response_body: outcome.body().map(str::to_owned),
        error: outcome.error(),
        secret: candidate.filter(|_| passed).map(|s| s.expose().to_owned()),
    };
    let reveals = result.secret.is_some();
    let response = HttpResponse::Ok().json(result);
    Ok(if reveals {
        reveals_secret(response)
    } else {
        response
    })
}

/// Saves the URL, events and secret of a passed test (`org:settings:manage`).
#[utoipa::path(operation_id = "save_webhook", tag = "webhook", security(("bearer" = [])), request_body = SaveWebhook,
    params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = WebhookView), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[put("")]
async fn save_webhook(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
    JsonInput(input): JsonInput,
) -> Result<HttpResponse, ApiError> {
    access.allow(WEBHOOK_SAVE)?;
    let body: SaveWebhook = input.parse()?;
    let required = || {
        ApiError::TestRequired(
            "save needs a passed test of the last 15 minutes that was not used before",
        )
    };
    let test_id = TestId::parse(&body.test_id)
        .ok_or_else(|| ApiError::invalid("test_id", "must be a test id (UUID)"))?;
    let tested = ctx
        .tests
        .get(access.org_id(), test_id)
        .await?
        .ok_or_else(required)?;
    // The name may resolve elsewhere now than when it was tested.
    allowed_url(&tested.url, &ctx.client).await?;
    let test = ctx
        .tests
        .take(access.org_id(), test_id)
        .await?
        .ok_or_else(required)?;
    ctx.run_command(
        &access,
        &req,
        WEBHOOK_SAVE,
        OrgCommand::SaveWebhook(test),
        StatusCode::OK,
    )
    .await
}

/// A new signing secret, shown once; the old one stops working at once (`org:settings:manage`).
#[utoipa::path(operation_id = "rotate_webhook_secret", tag = "webhook", security(("bearer" = [])), params(("org_id" = String, Path, description = "organization id")),
    responses((status = 200, body = RotatedSecret), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("/rotate")]
async fn rotate_webhook(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let rotated = ctx.run_command(
        &access,
        &req,
        WEBHOOK_ROTATE,
        OrgCommand::RotateWebhook,
        StatusCode::OK,
    );
    Ok(reveals_secret(rotated.await?))
}

/// Removes the endpoint; queued attempts are dropped and logged (`org:settings:manage`).
#[utoipa::path(operation_id = "delete_webhook", tag = "webhook", security(("bearer" = [])), params(("org_id" = String, Path, description = "organization id")),
    responses((status = 204, description = "Removed"), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[delete("")]
async fn delete_webhook(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    ctx.run_command(
        &access,
        &req,
        WEBHOOK_DELETE,
        OrgCommand::DeleteWebhook,
        StatusCode::NO_CONTENT,
    )
    .await
}

/// The delivery log, newest first (`org:settings:read`); `?event=` and `?outcome=` filter.
/// `?event=&outcome=` of the delivery log.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct DeliveryFilter {
    /// Only records of this event.
    #[param(schema_with = crate::http::schema::fields::event_id)]
    event: Option<String>,
    /// Only records with this outcome.
    outcome: Option<crate::domain::delivery::Outcome>,
}

/// The delivery log (`org:settings:read`), newest first: every attempt and
/// skip, optionally only one event or one outcome.
#[utoipa::path(operation_id = "list_webhook_deliveries", tag = "webhook", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"),
        DeliveryFilter,
        crate::http::paging::IdPaging),
    responses((status = 200, body = Page<LogView>), (status = 400, body = Problem), (status = 401, body = Problem),
        (status = 403, body = Problem), (status = 404, body = Problem)))]
#[get("/deliveries")]
async fn list_deliveries(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    access.allow(DELIVERIES_LIST)?;
    let query = ListQuery::parse(&req)?;
    let before = query.cursor_id(LogId::from_slice)?;
    let event = match query.filters.get("event") {
        Some(id) => Some(
            EventKind::parse(id)
                .ok_or_else(|| ApiError::UnknownEvent(vec![id.clone()]))?
                .id(),
        ),
        None => None,
    };
    let outcome = match query.filters.get("outcome").map(String::as_str) {
        None => None,
        Some("succeeded") => Some(Outcome::Succeeded),
        Some("failed") => Some(Outcome::Failed),
        Some("skipped") => Some(Outcome::Skipped),
        Some(_) => {
            return Err(ApiError::invalid(
                "outcome",
                "must be succeeded, failed or skipped",
            ))
        }
    };
    let filter = LogFilter { event, outcome };
    let page = ctx
        .store
        .delivery_log_page(access.org_id(), before, query.limit_or_default(), filter)
        .await?;
    Ok(HttpResponse::Ok().json(Page::of_records(page, |r| *r.id.as_bytes(), |r| r.view())))
}

/// Sends a logged delivery's envelope again as a new delivery (`org:settings:manage`).
#[utoipa::path(operation_id = "redeliver_webhook_delivery", tag = "webhook", security(("bearer" = [])),
    params(("org_id" = String, Path, description = "organization id"), ("delivery_id" = String, Path, description = "a record's delivery_id")),
    responses((status = 202, body = Redelivery), (status = 401, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[post("/deliveries/{delivery_id}/redeliver")]
async fn redeliver(
    access: OrgAccess,
    ctx: web::Data<AppContext>,
    path: web::Path<(String, String)>,
    keyed: Option<web::ReqData<Keyed>>,
) -> Result<HttpResponse, ApiError> {
    let record = logged_delivery(&ctx, &access, &path.1, DELIVERIES_REDELIVER).await?;
    if access.state.webhook.is_none() {
        return Err(ApiError::NotFound("webhook"));
    }
    let job = Job::redelivery(&record);
    let answer = respond_with(keyed.as_deref(), StatusCode::ACCEPTED);
    let (answer, recorded) = answer(&Redelivery {
        delivery_id: job.delivery_id,
    })?;
    let writes = [Write::PutJob(job)].into_iter().chain(recorded).collect();
    ctx.commit.commit(Commit::writes(writes)).await?;
    Ok(answer.into_response())
}

/// 403 unless `route` allows, then the newest log record of the delivery
/// the path names (404): the permission is checked before the store is
/// read (CONTRACT §11), and the record is looked up by its key.
async fn logged_delivery(
    ctx: &AppContext,
    access: &OrgAccess,
    raw_id: &str,
    route: RouteSpec,
) -> Result<LogRecord, ApiError> {
    access.allow(route)?;
    let delivery = path_id(raw_id, "delivery", DeliveryId::parse)?;
    ctx.store
        .find_delivery(access.org_id(), delivery)
        .await?
        .ok_or(ApiError::NotFound("delivery"))
}

/// `raw` as a URL the policy allows, its host name resolved (CONTRACT §1:
/// 400 INVALID_URL otherwise; through an egress proxy, a name that does
/// not resolve here is the proxy's to resolve). Attempts check the
/// resolution again when they connect.
async fn allowed_url(raw: &str, client: &ClientSettings) -> Result<WebhookUrl, ApiError> {
    let refused = |refused: UrlRefused| ApiError::InvalidUrl(refused.0);
    let url = parse_url(raw, client.policy).map_err(refused)?;
    let proxied = url
        .name()
        .is_some_and(|name| client.proxy.as_ref().is_some_and(|p| !p.bypasses(name)));
    check_resolution(&url, client.policy, proxied)
        .await
        .map_err(refused)?;
    Ok(url)
}
