//! Endpoint status: `GET …/webhook` shows `status`, `disabled_at` and
//! `disabled_reason`. A real delivery answered `410 Gone` disables the
//! endpoint at once (a `test.preflight` answered 410 does not); so does a
//! failing run long enough and with enough failures
//! (`webhooks.disable_after_failing_ms`, `webhooks.disable_after_failures`).
//! While disabled nothing is sent: pending retries are logged `failed` and
//! new events `skipped`, both with error `endpoint disabled`. The disable is
//! audited (`webhook.disabled`, no actor) and counted in `/metrics`. A
//! passing test then a save enable the endpoint again (`webhook.enabled`),
//! and `recover` then sends what was skipped while disabled.

use std::time::{Duration, Instant};

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_app_with, Org, TestApp};
use crate::receiver::{Behavior, Received, TestReceiver};
use crate::webhook_delivery::{
    assert_delivery, is_rfc3339_millis, of_event, put_webhook, run_test, wait_log, WAIT,
};
use crate::webhook_log::{config, log_until};
use crate::webhook_recover::recover;

/// How long to keep watching for something that must not happen.
const QUIET: Duration = Duration::from_millis(700);

/// The error of records of deliveries not made because the endpoint is disabled.
const DISABLED: &str = "endpoint disabled";

/// A server with WEBHOOK_TEST_CONFIG, then `extra`. No attempt here waits
/// for its timeout (the receiver answers at once), so it is raised to 2 s:
/// a loaded machine does not fail the setup's preflight.
async fn spawn(extra: &[(&str, &str)]) -> TestApp {
    let mut all = vec![("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "2000")];
    all.extend_from_slice(extra);
    spawn_app_with(&config(&all)).await
}

/// A server (see [`spawn`]) and an organization whose endpoint is a fresh
/// receiver subscribed to `task.created` only: the app, the org, the
/// receiver and the signing secret.
async fn setup(extra: &[(&str, &str)]) -> (TestApp, Org, TestReceiver, String) {
    let app = spawn(extra).await;
    let (org, receiver, secret) = subscribed_org(&app).await;
    (app, org, receiver, secret)
}

/// A new organization of `app` with its own receiver as endpoint
/// (`task.created` only): the org, the receiver and the signing secret.
async fn subscribed_org(app: &TestApp) -> (Org, TestReceiver, String) {
    let receiver = TestReceiver::start().await;
    let org = app.org("free").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["task.created"])
        .await;
    (org, receiver, secret)
}

/// `GET …/webhook` as the owner.
async fn endpoint(app: &TestApp, org: &Org) -> Value {
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json()
}

/// Waits until `GET …/webhook` shows the endpoint disabled; that view.
async fn disabled_endpoint(app: &TestApp, org: &Org) -> Value {
    eventually(WAIT, "the endpoint disabled", || async {
        let view = endpoint(app, org).await;
        (view["status"] == "disabled").then_some(view)
    })
    .await
}

#[track_caller]
fn assert_enabled(view: &Value) {
    assert_eq!(view["status"], json!("enabled"), "{view}");
    assert_eq!(view["disabled_at"], Value::Null, "{view}");
    assert_eq!(view["disabled_reason"], Value::Null, "{view}");
}

#[track_caller]
fn assert_disabled(view: &Value, reason: &str) {
    assert_eq!(view["status"], json!("disabled"), "{view}");
    assert_eq!(view["disabled_reason"], json!(reason), "{view}");
    assert!(
        is_rfc3339_millis(view["disabled_at"].as_str().unwrap_or("")),
        "disabled_at is an RFC 3339 timestamp: {view}"
    );
}

/// Unix milliseconds of an RFC 3339 timestamp of the API.
#[track_caller]
fn millis(value: &Value) -> i64 {
    let text = value.as_str().unwrap_or_default();
    rolecall::time::Timestamp::parse_rfc3339(text)
        .unwrap_or_else(|| panic!("not a timestamp: {value}"))
        .millis()
}

/// `POST …/tasks`, which fires `task.created`.
async fn create_task(app: &TestApp, org: &Org, title: &str) {
    app.post(
        &org.path("/tasks"),
        &org.owner_token,
        json!({"title": title}),
    )
    .await
    .expect(201);
}

/// The requests for the task titled `title` the receiver got.
fn of_task(receiver: &TestReceiver, title: &str) -> Vec<Received> {
    of_event(receiver, "task.created")
        .into_iter()
        .filter(|r| r.title() == title)
        .collect()
}

/// The log records of `delivery`, newest first.
fn of_delivery<'a>(records: &'a [Value], delivery: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["delivery_id"] == json!(delivery))
        .collect()
}

/// The org's audit records with `action` (newest first), as the owner.
async fn audited(app: &TestApp, org: &Org, action: &str) -> Vec<Value> {
    let path = org.path(&format!("/audit-log?action={action}&limit=200"));
    app.get(&path, &org.owner_token).await.expect(200).json()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `rolecall_webhook_endpoints_disabled_total{reason}` as `GET /metrics`
/// exports it (no metrics token is configured); `None` when absent.
async fn disabled_total(app: &TestApp, reason: &str) -> Option<f64> {
    let reply = app
        .call(Method::GET, "/metrics", None, None)
        .await
        .expect(200);
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    let series = format!("rolecall_webhook_endpoints_disabled_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map(|value| value.trim().parse().expect("a sample value"))
}

/// The subscriber answers the task `title`'s first attempt `410 Gone`:
/// the endpoint as it was, as it is once disabled, and the 410 request.
async fn answer_gone(
    app: &TestApp,
    org: &Org,
    receiver: &TestReceiver,
    title: &str,
) -> (Value, Value, Received) {
    let before = endpoint(app, org).await;
    assert_enabled(&before);
    receiver.script(vec![Behavior::status(410)]);
    create_task(app, org, title).await;
    let gone = eventually(WAIT, "the attempt answered 410", || async {
        of_task(receiver, title).into_iter().next()
    })
    .await;
    assert_eq!(gone.header("x-service-attempt"), "1");
    let after = disabled_endpoint(app, org).await;
    (before, after, gone)
}

/// Creates the task `title` and waits until the subscriber got it (attempt
/// 1, signed with `secret`) and the log says it succeeded.
async fn delivered(app: &TestApp, org: &Org, receiver: &TestReceiver, title: &str, secret: &str) {
    create_task(app, org, title).await;
    let got = eventually(WAIT, "the task delivered", || async {
        of_task(receiver, title).into_iter().next()
    })
    .await;
    assert_delivery(&got, "task.created", 1, secret);
    let delivery = got.header("x-service-delivery");
    wait_log(
        app,
        org,
        "&outcome=succeeded",
        "the delivery succeeded",
        |r| r["delivery_id"] == json!(delivery),
    )
    .await;
}

/// Waits until the log holds the 410 attempt of `delivery` and its retry,
/// dropped; returns (attempt 1, retry).
async fn gone_and_dropped(app: &TestApp, org: &Org, delivery: &str) -> (Value, Value) {
    let records = log_until(app, org, "the 410 attempt and its dropped retry", |r| {
        of_delivery(r, delivery).len() >= 2
    })
    .await;
    let mine = of_delivery(&records, delivery);
    assert_eq!(mine.len(), 2, "records: {mine:?}");
    (mine[1].clone(), mine[0].clone())
}

on_both_engines! {
async fn a_saved_endpoint_is_enabled_with_no_disable_fields() {
    let (app, org, _receiver, secret) = setup(&[]).await;
    let view = endpoint(&app, &org).await;
    let mut keys: Vec<&str> = view
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "created_at",
            "disabled_at",
            "disabled_reason",
            "events",
            "secret_last4",
            "status",
            "updated_at",
            "url"
        ],
        "{view}"
    );
    assert_enabled(&view);
    assert_eq!(view["secret_last4"], json!(&secret[secret.len() - 4..]));
}
}

on_both_engines! {
async fn a_410_disables_the_endpoint_and_later_events_are_skipped_as_disabled() {
    let (app, org, receiver, _) = setup(&[]).await;
    let (before, after, gone) = answer_gone(&app, &org, &receiver, "gone").await;
    assert_disabled(&after, "gone");
    for key in ["url", "events", "created_at", "secret_last4"] {
        assert_eq!(after[key], before[key], "{key} is kept");
    }

    // The 410 is logged as a failed attempt; its retry is logged, not sent.
    let delivery = gone.header("x-service-delivery");
    let (first, retry) = gone_and_dropped(&app, &org, &delivery).await;
    assert_eq!(first["event"], json!("task.created"));
    assert_eq!(first["attempt"], json!(1));
    assert_eq!(first["outcome"], json!("failed"));
    assert_eq!(first["response_code"], json!(410));
    assert_eq!(first["response_body"], json!("answer 410"));
    assert_eq!(first["error"], json!("the endpoint answered 410"));
    assert_eq!(retry["event"], json!("task.created"));
    assert_eq!(retry["attempt"], json!(2));
    assert_eq!(retry["outcome"], json!("failed"));
    assert_eq!(retry["response_code"], Value::Null);
    assert_eq!(retry["response_body"], Value::Null);
    assert_eq!(retry["error"], json!(DISABLED));
    assert!(
        millis(&after["disabled_at"]) >= millis(&first["attempted_at"]),
        "disabled by the 410 attempt: {after} {first}"
    );
    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(
        receiver.received().len(),
        2,
        "the preflight and the 410 only: the retry is not sent"
    );

    // A subscribed event (task.created) is skipped as disabled; an
    // unsubscribed one (member.added) as unsubscribed (error null), so
    // that recover never sends it.
    create_task(&app, &org, "while disabled").await;
    app.member(&org, &org.member_role).await;
    let skipped = log_until(&app, &org, "two skipped events", |r| {
        r.iter().filter(|x| x["outcome"] == "skipped").count() >= 2
    })
    .await;
    let skipped: Vec<&Value> = skipped
        .iter()
        .filter(|x| x["outcome"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    let mut events: Vec<&str> = skipped
        .iter()
        .map(|r| r["event"].as_str().unwrap_or(""))
        .collect();
    events.sort_unstable();
    assert_eq!(events, ["member.added", "task.created"]);
    for record in &skipped {
        assert_eq!(record["attempt"], Value::Null, "{record}");
        assert_eq!(record["response_code"], Value::Null, "{record}");
        assert_eq!(record["response_body"], Value::Null, "{record}");
        let why = if record["event"] == json!("task.created") {
            json!(DISABLED)
        } else {
            Value::Null
        };
        assert_eq!(record["error"], why, "{record}");
    }
    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(receiver.received().len(), 2, "nothing is sent while disabled");
    assert_eq!(
        app.deliveries(&org, "").await.len(),
        5,
        "the preflight, the 410, the dropped retry and two skipped events"
    );
    assert_eq!(endpoint(&app, &org).await, after, "still disabled, unchanged");
}
}

on_both_engines! {
async fn the_disable_is_audited_without_an_actor_and_counted_in_metrics() {
    let (app, org, receiver, _) = setup(&[]).await;
    assert_eq!(disabled_total(&app, "gone").await.unwrap_or(0.0), 0.0);
    let (before, after, _) = answer_gone(&app, &org, &receiver, "gone").await;

    let records = eventually(WAIT, "the webhook.disabled record", || async {
        let records = audited(&app, &org, "webhook.disabled").await;
        (!records.is_empty()).then_some(records)
    })
    .await;
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["action"], json!("webhook.disabled"));
    assert_eq!(record["actor_user_id"], Value::Null, "no actor: {record}");
    assert_eq!(record["organization_id"], json!(org.id));
    assert_eq!(record["target_type"], json!("webhook"));
    assert_eq!(record["target_id"], json!(org.id));
    assert_eq!(record["before"], before, "before = the enabled endpoint");
    assert_eq!(record["after"], after, "after = the disabled endpoint");

    // Newest first, after the save; nothing enabled it yet.
    let actions: Vec<String> = app
        .audit(&org)
        .await
        .iter()
        .filter_map(|r| r["action"].as_str())
        .filter(|a| a.starts_with("webhook."))
        .map(str::to_owned)
        .collect();
    assert_eq!(actions, ["webhook.disabled", "webhook.saved"]);
    assert_eq!(audited(&app, &org, "webhook.enabled").await, Vec::<Value>::new());

    assert_eq!(disabled_total(&app, "gone").await, Some(1.0));
    assert_eq!(disabled_total(&app, "failing").await.unwrap_or(0.0), 0.0);
    // Events skipped while disabled disable nothing again.
    create_task(&app, &org, "while disabled").await;
    log_until(&app, &org, "the skipped event", |r| {
        r.iter().any(|x| x["outcome"] == "skipped")
    })
    .await;
    assert_eq!(disabled_total(&app, "gone").await, Some(1.0));
    assert_eq!(audited(&app, &org, "webhook.disabled").await.len(), 1);
}
}

on_both_engines! {
async fn a_preflight_410_disables_nothing() {
    let (app, org, receiver, secret) = setup(&[]).await;
    let saved = endpoint(&app, &org).await;
    assert_enabled(&saved);

    receiver.set(Behavior::status(410));
    let answer = run_test(&app, &org, &receiver.url, &["task.created"])
        .await
        .expect(200)
        .json();
    assert_eq!(answer["passed"], json!(false), "{answer}");
    assert_eq!(answer["status_code"], json!(410), "{answer}");
    assert_eq!(answer["response_body"], json!("answer 410"), "{answer}");
    assert!(answer.get("secret").is_none(), "{answer}");
    let preflight = wait_log(
        &app,
        &org,
        "&event=test.preflight&outcome=failed",
        "the failed preflight",
        |r| r["response_code"] == json!(410),
    )
    .await;
    assert_eq!(preflight["attempt"], json!(1));
    put_webhook(&app, &org, &org.owner_token, &answer["test_id"])
        .await
        .problem(409, "TEST_REQUIRED");
    assert_eq!(endpoint(&app, &org).await, saved, "still enabled, unchanged");

    // Events are still delivered.
    receiver.set(Behavior::ok());
    delivered(&app, &org, &receiver, "still delivered", &secret).await;
    assert_eq!(endpoint(&app, &org).await, saved);
    assert_eq!(audited(&app, &org, "webhook.disabled").await, Vec::<Value>::new());
    assert_eq!(disabled_total(&app, "gone").await.unwrap_or(0.0), 0.0);
}
}

on_both_engines! {
async fn test_and_save_enable_again_and_recover_resends_what_was_skipped() {
    let (app, org, receiver, secret) = setup(&[]).await;
    let since = endpoint(&app, &org).await["updated_at"].clone();
    // Before the outage, an event the endpoint does not take: skipped, no error.
    app.member(&org, &org.member_role).await;
    let unsubscribed = wait_log(&app, &org, "&outcome=skipped", "the skipped member.added", |r| {
        r["event"] == json!("member.added")
    })
    .await;
    assert_eq!(unsubscribed["error"], Value::Null, "{unsubscribed}");

    // The outage: a 410, then two events skipped while disabled.
    let (_, disabled, gone) = answer_gone(&app, &org, &receiver, "lost 1").await;
    gone_and_dropped(&app, &org, &gone.header("x-service-delivery")).await;
    create_task(&app, &org, "lost 2").await;
    create_task(&app, &org, "lost 3").await;
    log_until(&app, &org, "two tasks skipped as disabled", |r| {
        r.iter()
            .filter(|x| x["outcome"] == "skipped" && x["error"] == json!(DISABLED))
            .count()
            == 2
    })
    .await;
    assert_eq!(receiver.received().len(), 2, "the preflight and the 410");

    // A passing test alone enables nothing; saving it does.
    let test = run_test(&app, &org, &receiver.url, &["task.created"])
        .await
        .expect(200)
        .json();
    assert_eq!(test["passed"], json!(true), "{test}");
    assert!(test.get("secret").is_none(), "a configured endpoint: {test}");
    assert_eq!(endpoint(&app, &org).await, disabled);
    put_webhook(&app, &org, &org.owner_token, &test["test_id"])
        .await
        .expect(200);
    let enabled = endpoint(&app, &org).await;
    assert_enabled(&enabled);
    for key in ["url", "events", "created_at", "secret_last4"] {
        assert_eq!(enabled[key], disabled[key], "{key} is kept");
    }

    // Audited as webhook.enabled by the owner, besides webhook.saved.
    let records = audited(&app, &org, "webhook.enabled").await;
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["actor_user_id"], json!(org.owner_id));
    assert_eq!(record["target_type"], json!("webhook"));
    assert_eq!(record["target_id"], json!(org.id));
    assert_eq!(record["before"], disabled);
    assert_eq!(record["after"], enabled);
    assert_eq!(audited(&app, &org, "webhook.saved").await.len(), 2);
    assert_eq!(audited(&app, &org, "webhook.disabled").await.len(), 1);

    // Events are delivered again.
    delivered(&app, &org, &receiver, "back", &secret).await;

    // Recover from before the outage: the three lost tasks (the 410 one,
    // failed, and the two skipped as disabled), not the unsubscribed event.
    let sent = receiver.received().len();
    let answer = recover(&app, &org, json!({"since": since}))
        .await
        .expect(202)
        .json();
    assert_eq!(answer, json!({"count": 3}));
    let received = receiver.wait_for(sent + 3, WAIT).await;
    let recovered = &received[sent..];
    let mut titles: Vec<String> = recovered.iter().map(Received::title).collect();
    titles.sort();
    assert_eq!(titles, ["lost 1", "lost 2", "lost 3"]);
    let earlier: Vec<String> = received[..sent]
        .iter()
        .map(|r| r.header("x-service-delivery"))
        .collect();
    for r in recovered {
        assert_delivery(r, "task.created", 1, &secret);
        assert!(
            !earlier.contains(&r.header("x-service-delivery")),
            "a recovery is a new delivery"
        );
    }
    let lost_1 = recovered.iter().find(|r| r.title() == "lost 1").unwrap();
    assert!(lost_1.body == gone.body, "the 410 event's envelope, byte for byte");
    log_until(&app, &org, "the recoveries succeeded", |r| {
        recovered.iter().all(|x| {
            of_delivery(r, &x.header("x-service-delivery"))
                .iter()
                .any(|y| y["outcome"] == "succeeded")
        })
    })
    .await;

    // Each once; the unsubscribed event never; nothing left to recover.
    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(receiver.received().len(), sent + 3);
    assert!(of_event(&receiver, "member.added").is_empty());
    let again = recover(&app, &org, json!({"since": since}))
        .await
        .expect(202)
        .json();
    assert_eq!(again, json!({"count": 0}));
}
}

// ---------------------------------------------------------------------------
// Failing runs: shortened to a 1500 ms window and 4 failures. Every event
// makes two failed attempts (the retry comes `RETRY` after the first).
// ---------------------------------------------------------------------------

/// `webhooks.disable_after_failing_ms` in these tests.
const WINDOW: Duration = Duration::from_millis(1500);
/// `webhooks.retry_delay_ms` in these tests (`FAILING_CONFIG`): 4 failures
/// (two events and their retries) take well under `WINDOW`.
const RETRY: Duration = Duration::from_millis(600);
/// Slack past `WINDOW` before counting on it having passed.
const MARGIN: Duration = Duration::from_millis(300);

const FAILING_CONFIG: &[(&str, &str)] = &[
    ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "600"),
    ("ROLECALL_WEBHOOKS__DISABLE_AFTER_FAILING_MS", "1500"),
    ("ROLECALL_WEBHOOKS__DISABLE_AFTER_FAILURES", "4"),
];

/// Waits until the log holds `n` failed `task.created` attempts; returns
/// them oldest first, asserting there are exactly `n`.
async fn failures(app: &TestApp, org: &Org, n: usize) -> Vec<Value> {
    let what = format!("{n} failed attempts");
    let mut failed = eventually(WAIT, &what, || async {
        let records = app
            .deliveries(org, "&event=task.created&outcome=failed")
            .await;
        (records.len() >= n).then_some(records)
    })
    .await;
    assert_eq!(failed.len(), n, "{failed:?}");
    failed.reverse();
    failed
}

/// When the earliest of `records` started, in unix milliseconds.
fn earliest(records: &[Value]) -> i64 {
    records
        .iter()
        .map(|r| millis(&r["attempted_at"]))
        .min()
        .expect("records")
}

/// When the receiver got its `i`-th `task.created` request (from 0).
fn task_request_at(receiver: &TestReceiver, i: usize) -> Instant {
    of_event(receiver, "task.created")[i].at
}

async fn sleep_until(at: Instant) {
    actix_web::rt::time::sleep(at.saturating_duration_since(Instant::now())).await;
}

/// Asserts the webhook.disabled audit record of a failing run.
async fn assert_audited_failing(app: &TestApp, org: &Org) {
    let records = eventually(WAIT, "the webhook.disabled record", || async {
        let records = audited(app, org, "webhook.disabled").await;
        (!records.is_empty()).then_some(records)
    })
    .await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["actor_user_id"], Value::Null);
    assert_eq!(records[0]["target_type"], json!("webhook"));
    assert_eq!(records[0]["after"]["disabled_reason"], json!("failing"));
}

/// Two failures, then the window passes, then a third: not disabled (too
/// few); the fourth disables. Then a new event is skipped as disabled.
async fn too_few_failures_then_enough(app: &TestApp) {
    let (org, receiver, _) = subscribed_org(app).await;
    receiver.set(Behavior::status(500));
    create_task(app, &org, "f1").await;
    failures(app, &org, 2).await;
    assert_enabled(&endpoint(app, &org).await);

    sleep_until(task_request_at(&receiver, 0) + WINDOW + MARGIN).await;
    assert_enabled(&endpoint(app, &org).await);
    create_task(app, &org, "f2").await;
    failures(app, &org, 3).await;
    // The run is longer than the window, but has 3 failures of 4.
    assert_enabled(&endpoint(app, &org).await);

    let view = disabled_endpoint(app, &org).await;
    assert_disabled(&view, "failing");
    let failed = failures(app, &org, 4).await;
    assert!(
        millis(&view["disabled_at"]) >= millis(&failed[3]["attempted_at"]),
        "not disabled before the 4th failure: {view} {failed:?}"
    );
    assert_audited_failing(app, &org).await;

    create_task(app, &org, "f3").await;
    let skipped = wait_log(app, &org, "&outcome=skipped", "f3 skipped", |_| true).await;
    assert_eq!(skipped["error"], json!(DISABLED));
    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(
        of_event(&receiver, "task.created").len(),
        4,
        "nothing sent once disabled"
    );
}

/// Four failures within less than the window: not disabled; a failure
/// once the window has passed disables.
async fn enough_failures_too_soon_then_long_enough(app: &TestApp) {
    let (org, receiver, _) = subscribed_org(app).await;
    receiver.set(Behavior::status(500));
    create_task(app, &org, "q1").await;
    create_task(app, &org, "q2").await;
    let failed = failures(app, &org, 4).await;
    let run_start = earliest(&failed);
    let span = millis(&failed[3]["attempted_at"]) - run_start;
    assert!(
        span < 1500 - 300,
        "the premise: 4 failures well within the window, not {span} ms"
    );
    assert_enabled(&endpoint(app, &org).await);

    sleep_until(task_request_at(&receiver, 0) + WINDOW + MARGIN).await;
    create_task(app, &org, "q3").await;
    let view = disabled_endpoint(app, &org).await;
    assert_disabled(&view, "failing");
    assert!(
        millis(&view["disabled_at"]) - run_start >= 1500,
        "not disabled before the run lasted the window: {view} {failed:?}"
    );
    assert_audited_failing(app, &org).await;
}

on_both_engines! {
/// Failing run (`disable_after_failing_ms` 1500, `disable_after_failures`
/// 4, subscriber answering 500): neither fewer than 4 failures over more
/// than the window, nor 4 failures within less than it, disable; both
/// together do, with reason `failing`. Takes about 3 s (real waits past
/// the window).
async fn a_failing_run_disables_only_when_long_enough_and_with_enough_failures() {
    let app = spawn(FAILING_CONFIG).await;
    futures_util::join!(
        too_few_failures_then_enough(&app),
        enough_failures_too_soon_then_long_enough(&app)
    );
    assert_eq!(disabled_total(&app, "failing").await, Some(2.0));
    assert_eq!(disabled_total(&app, "gone").await.unwrap_or(0.0), 0.0);
}
}

on_both_engines! {
/// Failing run, reset: failures, one success, then failures. The run
/// restarts at the first failure after the success (not at the success):
/// 4 failures within less than the window from there do not disable,
/// even though the first failures and the success are older than the
/// window; a failure once the window has passed since that restart does.
/// Takes about 4 s (real waits).
async fn a_success_restarts_the_failing_run_at_the_next_failure() {
    let (app, org, receiver, _) = setup(FAILING_CONFIG).await;
    receiver.set(Behavior::status(500));
    create_task(&app, &org, "a1").await;
    failures(&app, &org, 2).await;

    // One success.
    receiver.script(vec![Behavior::ok()]);
    create_task(&app, &org, "a2").await;
    let success = wait_log(
        &app,
        &org,
        "&event=task.created&outcome=succeeded",
        "a2 delivered",
        |_| true,
    )
    .await;
    assert_enabled(&endpoint(&app, &org).await);

    // Failures begin well after the success: by the 4th of them (a retry
    // later), the success is older than the window, the first failure
    // after it is not.
    actix_web::rt::time::sleep(WINDOW - RETRY + MARGIN).await;
    create_task(&app, &org, "a3").await;
    create_task(&app, &org, "a4").await;
    let failed = failures(&app, &org, 6).await;
    let restart = earliest(&failed[2..]);
    assert!(restart > millis(&success["attempted_at"]));
    assert!(
        millis(&failed[5]["attempted_at"]) - millis(&success["attempted_at"]) >= 1500,
        "the premise: the success is older than the window by the 4th failure after it"
    );
    assert_enabled(&endpoint(&app, &org).await);

    // The window passes since the restart (the 4th task request: two
    // failures, the success, then this one): the next failure disables.
    sleep_until(task_request_at(&receiver, 3) + WINDOW + MARGIN).await;
    assert_eq!(of_event(&receiver, "task.created").len(), 7);
    create_task(&app, &org, "a5").await;
    let view = disabled_endpoint(&app, &org).await;
    assert_disabled(&view, "failing");
    assert!(
        millis(&view["disabled_at"]) - restart >= 1500,
        "the run is counted from the first failure after the success: {view} {failed:?}"
    );
    assert_audited_failing(&app, &org).await;
    assert_eq!(disabled_total(&app, "failing").await, Some(1.0));
}
}

on_both_engines! {
/// A test that passed before the endpoint was disabled proves nothing of
/// the subscriber now: saving it is 409 TEST_REQUIRED and enables nothing;
/// a test run after the disable does.
async fn only_a_test_passed_after_the_disable_enables_again() {
    let (app, org, receiver, _) = setup(&[]).await;
    let early = run_test(&app, &org, &receiver.url, &["task.created"])
        .await
        .expect(200)
        .json();
    assert_eq!(early["passed"], json!(true), "{early}");
    let (_, disabled, _) = answer_gone(&app, &org, &receiver, "gone").await;
    put_webhook(&app, &org, &org.owner_token, &early["test_id"])
        .await
        .problem(409, "TEST_REQUIRED");
    assert_eq!(endpoint(&app, &org).await, disabled, "still disabled");
    let late = run_test(&app, &org, &receiver.url, &["task.created"])
        .await
        .expect(200)
        .json();
    assert_eq!(late["passed"], json!(true), "{late}");
    put_webhook(&app, &org, &org.owner_token, &late["test_id"])
        .await
        .expect(200);
    assert_enabled(&endpoint(&app, &org).await);
}
}
