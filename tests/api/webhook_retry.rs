//! Retries and failure kinds of webhook deliveries (CONTRACT §6, seed §8):
//! a failed first attempt is retried exactly once, `retry_delay_ms` after it
//! ended, with the same body and delivery id; timeouts, refused connections,
//! 3xx, 4xx and 5xx all count as failures; redirects are not followed; at
//! most 4096 response bytes are logged, read within the attempt's timeout.

use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_app_with, Org, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::{refused_url, Behavior, Received, TestReceiver};

const WAIT: Duration = Duration::from_secs(5);
/// `retry_delay_ms` of WEBHOOK_TEST_CONFIG is 200; allow a little clock slack.
const MIN_RETRY_GAP: Duration = Duration::from_millis(180);
/// Generous upper bound for the retry gap.
const MAX_RETRY_GAP: Duration = Duration::from_secs(3);
/// How long to keep watching for an attempt that must not happen.
const QUIET: Duration = Duration::from_millis(700);

/// A server with the webhook test config and an enterprise org whose
/// endpoint is `receiver`, subscribed to `member.added`.
async fn setup() -> (TestApp, Org, TestReceiver) {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    let preflight = receiver.received();
    assert_eq!(preflight.len(), 1, "the test sends exactly one request");
    assert_eq!(preflight[0].header("x-service-event"), "test.preflight");
    (app, org, receiver)
}

/// The log records of one delivery, oldest first, once `n` are logged.
async fn logged(app: &TestApp, org: &Org, delivery_id: &str, n: usize) -> Vec<Value> {
    let what = format!("{n} log records of delivery {delivery_id}");
    eventually(WAIT, &what, || async move {
        let mut records: Vec<Value> = app
            .deliveries(org, "")
            .await
            .into_iter()
            .filter(|r| r["delivery_id"] == json!(delivery_id))
            .collect();
        records.reverse();
        (records.len() >= n).then_some(records)
    })
    .await
}

/// Asserts that `second` is the retry of `first`: same delivery id, same
/// body bytes, attempt 2, arriving after the retry delay.
fn assert_retry_of(first: &Received, second: &Received) {
    assert_eq!(first.header("x-service-event"), "member.added");
    assert_eq!(second.header("x-service-event"), "member.added");
    assert_eq!(first.header("x-service-attempt"), "1");
    assert_eq!(second.header("x-service-attempt"), "2");
    let delivery = first.header("x-service-delivery");
    assert!(!delivery.is_empty(), "X-Service-Delivery is set");
    assert_eq!(second.header("x-service-delivery"), delivery);
    assert_eq!(first.header("webhook-id"), delivery);
    assert_eq!(second.header("webhook-id"), delivery);
    assert!(
        first.body == second.body,
        "the retry carries byte-identical body: {:?} vs {:?}",
        String::from_utf8_lossy(&first.body),
        String::from_utf8_lossy(&second.body)
    );
    let gap = second.at.duration_since(first.at);
    assert!(
        gap >= MIN_RETRY_GAP,
        "the retry came {gap:?} after the first attempt arrived; retry_delay_ms is 200"
    );
    assert!(gap < MAX_RETRY_GAP, "the retry came only after {gap:?}");
}

/// Asserts a failed attempt record with `attempt`.
#[track_caller]
fn assert_failed(record: &Value, attempt: u64) {
    assert_eq!(record["outcome"], json!("failed"), "record: {record}");
    assert_eq!(record["attempt"], json!(attempt), "record: {record}");
    assert_eq!(record["event"], json!("member.added"), "record: {record}");
    assert!(
        record["error"].as_str().is_some_and(|e| !e.is_empty()),
        "a failed attempt says what went wrong: {record}"
    );
    assert!(record["latency_ms"].is_u64(), "record: {record}");
}

/// With the receiver answering every request with `behavior`: one member
/// event gives exactly two attempts, both logged failed. Returns the two
/// requests and the two records (oldest first).
async fn fails_twice(
    app: &TestApp,
    org: &Org,
    receiver: &TestReceiver,
    behavior: Behavior,
) -> (Vec<Received>, Vec<Value>) {
    receiver.set(behavior);
    app.member(org, &org.member_role).await;
    let received = receiver.wait_for(3, WAIT).await;
    assert_retry_of(&received[1], &received[2]);
    let delivery = received[1].header("x-service-delivery");
    let records = logged(app, org, &delivery, 2).await;
    assert_eq!(records.len(), 2, "records: {records:?}");
    assert_failed(&records[0], 1);
    assert_failed(&records[1], 2);
    assert_ne!(records[0]["id"], records[1]["id"]);
    // No third attempt: watch for a while after the second one was logged.
    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(
        receiver.received().len(),
        3,
        "a failed delivery is attempted exactly twice"
    );
    assert_eq!(logged(app, org, &delivery, 2).await.len(), 2);
    (received[1..].to_vec(), records)
}

on_both_engines! {
async fn a_failure_then_a_success_makes_exactly_two_attempts() {
    let (app, org, receiver) = setup().await;
    receiver.script(vec![Behavior::status(500), Behavior::ok()]);

    app.member(&org, &org.member_role).await;
    let received = receiver.wait_for(3, WAIT).await;
    assert_retry_of(&received[1], &received[2]);
    let delivery = received[1].header("x-service-delivery");

    let records = logged(&app, &org, &delivery, 2).await;
    assert_eq!(records.len(), 2, "records: {records:?}");
    assert_failed(&records[0], 1);
    assert_eq!(records[0]["response_code"], json!(500));
    assert_eq!(records[0]["response_body"], json!("answer 500"));
    assert_eq!(records[1]["outcome"], json!("succeeded"));
    assert_eq!(records[1]["attempt"], json!(2));
    assert_eq!(records[1]["response_code"], json!(200));
    assert_eq!(records[1]["response_body"], json!("answer 200"));
    assert_eq!(records[1]["error"], Value::Null);
    assert!(records[1]["latency_ms"].is_u64());

    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(
        receiver.received().len(),
        3,
        "a delivery that succeeded is not attempted again"
    );
    assert_eq!(logged(&app, &org, &delivery, 2).await.len(), 2);
}
}

on_both_engines! {
async fn two_failures_make_exactly_two_attempts_both_logged_failed() {
    let (app, org, receiver) = setup().await;
    let (_, records) = fails_twice(&app, &org, &receiver, Behavior::status(500)).await;
    for record in &records {
        assert_eq!(record["response_code"], json!(500));
        assert_eq!(record["response_body"], json!("answer 500"));
    }
}
}

on_both_engines! {
async fn a_timeout_is_a_failure_and_is_retried() {
    let (app, org, receiver) = setup().await;
    let (received, records) = fails_twice(
        &app,
        &org,
        &receiver,
        Behavior::slow(Duration::from_secs(2)),
    )
    .await;
    // The retry is due 200 ms after the first attempt ended, which is when
    // its 300 ms timeout struck.
    let gap = received[1].at.duration_since(received[0].at);
    assert!(gap >= Duration::from_millis(480), "retry after {gap:?}");
    for record in &records {
        assert_eq!(record["response_code"], Value::Null, "record: {record}");
        assert_eq!(record["response_body"], Value::Null, "record: {record}");
        let latency = record["latency_ms"].as_u64().unwrap();
        assert!(
            (290..2000).contains(&latency),
            "a timed-out attempt lasts about the 300 ms timeout, not the receiver's 2 s: {record}"
        );
    }
}
}

on_both_engines! {
async fn a_404_is_a_failure_and_is_retried() {
    let (app, org, receiver) = setup().await;
    let (_, records) = fails_twice(&app, &org, &receiver, Behavior::status(404)).await;
    for record in &records {
        assert_eq!(record["response_code"], json!(404));
        assert_eq!(record["response_body"], json!("answer 404"));
        assert!(record["latency_ms"].as_u64().unwrap() < 2000);
    }
}
}

on_both_engines! {
async fn a_503_is_a_failure_and_is_retried() {
    let (app, org, receiver) = setup().await;
    let (_, records) = fails_twice(&app, &org, &receiver, Behavior::status(503)).await;
    for record in &records {
        assert_eq!(record["response_code"], json!(503));
        assert_eq!(record["response_body"], json!("answer 503"));
        assert!(record["latency_ms"].as_u64().unwrap() < 2000);
    }
}
}

on_both_engines! {
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let (app, org, receiver) = setup().await;
    let elsewhere = TestReceiver::start().await;
    let (_, records) = fails_twice(
        &app,
        &org,
        &receiver,
        Behavior::Redirect(elsewhere.url.clone()),
    )
    .await;
    for record in &records {
        assert_eq!(record["response_code"], json!(303), "record: {record}");
    }
    assert!(
        elsewhere.received().is_empty(),
        "the redirect target must get nothing: {:?}",
        elsewhere.received()
    );
}
}

on_both_engines! {
async fn a_refused_connection_fails_the_test_and_is_logged() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let org = app.org("enterprise").await;
    let url = refused_url();

    let reply = app
        .post(
            &org.path("/webhook/test"),
            &org.owner_token,
            json!({"url": url, "events": ["member.added"]}),
        )
        .await
        .expect(200);
    let test = reply.json();
    let mut keys: Vec<&str> = test
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "error",
            "latency_ms",
            "passed",
            "response_body",
            "status_code",
            "test_id"
        ],
        "a failed test reveals no secret: {test}"
    );
    assert_eq!(test["passed"], json!(false));
    assert_eq!(test["status_code"], Value::Null);
    assert_eq!(test["response_body"], Value::Null);
    let error = test["error"].as_str().expect("error is set").to_owned();
    assert!(!error.is_empty());
    assert!(test["latency_ms"].as_u64().unwrap() < 2000);

    let record = eventually(WAIT, "the failed test in the log", || {
        let app = &app;
        let org = &org;
        async move {
            let records = app.deliveries(org, "").await;
            (!records.is_empty()).then_some(records)
        }
    })
    .await;
    assert_eq!(record.len(), 1, "records: {record:?}");
    let record = &record[0];
    assert_eq!(record["event"], json!("test.preflight"));
    assert_eq!(record["attempt"], json!(1));
    assert_eq!(record["outcome"], json!("failed"));
    assert_eq!(record["response_code"], Value::Null);
    assert_eq!(record["error"], json!(error));
    assert!(record["latency_ms"].is_u64());

    // A failed test unlocks nothing.
    app.call(
        actix_web::http::Method::PUT,
        &org.path("/webhook"),
        Some(&org.owner_token),
        Some(json!({"test_id": test["test_id"]})),
    )
    .await
    .problem(409, "TEST_REQUIRED");
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
}
}

on_both_engines! {
async fn a_refused_connection_at_delivery_time_is_a_failure_and_is_retried() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let org = app.org("enterprise").await;
    // An endpoint that passes the test and then goes away.
    let server = HttpServer::new(|| {
        App::new().default_service(web::to(|| async { HttpResponse::Ok().body("ok") }))
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(0)
    .bind(("127.0.0.1", 0))
    .expect("binds");
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    let url = format!("http://127.0.0.1:{port}/hook");
    app.setup_webhook(&org, &url, &["member.added"]).await;
    handle.stop(false).await;
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the endpoint is gone"
    );

    app.member(&org, &org.member_role).await;
    let records = eventually(WAIT, "two failed attempts", || {
        let app = &app;
        let org = &org;
        async move {
            let mut records = app.deliveries(org, "&event=member.added").await;
            records.reverse();
            (records.len() >= 2).then_some(records)
        }
    })
    .await;
    assert_eq!(records.len(), 2, "records: {records:?}");
    assert_eq!(records[0]["delivery_id"], records[1]["delivery_id"]);
    assert_failed(&records[0], 1);
    assert_failed(&records[1], 2);
    for record in &records {
        assert_eq!(record["response_code"], Value::Null, "record: {record}");
        assert!(record["latency_ms"].as_u64().unwrap() < 2000);
    }
    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(
        app.deliveries(&org, "&event=member.added").await.len(),
        2,
        "no third attempt"
    );
}
}

on_both_engines! {
async fn a_large_response_body_is_logged_as_its_first_4096_bytes() {
    let (app, org, receiver) = setup().await;
    let body: String = (0..10 * 1024)
        .map(|i| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[i % 36]))
        .collect();
    receiver.set(Behavior::Respond {
        status: 200,
        body: body.clone(),
        delay: Duration::ZERO,
    });

    app.member(&org, &org.member_role).await;
    let received = receiver.wait_for(2, WAIT).await;
    let delivery = received[1].header("x-service-delivery");
    let records = logged(&app, &org, &delivery, 1).await;
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(record["outcome"], json!("succeeded"));
    assert_eq!(record["attempt"], json!(1));
    assert_eq!(record["response_code"], json!(200));
    let logged_body = record["response_body"].as_str().expect("body logged");
    assert_eq!(logged_body.len(), 4096, "at most 4096 bytes are logged");
    assert_eq!(logged_body, &body[..4096], "the first 4096 bytes");
}
}

on_both_engines! {
async fn an_endless_response_body_does_not_hold_the_attempt_past_its_timeout() {
    let (app, org, receiver) = setup().await;
    let (_, records) = fails_twice(&app, &org, &receiver, Behavior::EndlessBody).await;
    for record in &records {
        let latency = record["latency_ms"].as_u64().unwrap();
        assert!(
            latency < 2000,
            "the 300 ms timeout bounds the whole attempt, body included: {record}"
        );
        if let Some(body) = record["response_body"].as_str() {
            assert!(body.len() <= 4096);
        }
    }
}
}
