//! Webhook endpoint setup (CONTRACT §6, seed 2.5, 3.4): Test → passed →
//! secret revealed once → PUT saves; PUT needs a passed, unused test of this
//! organization; failing tests reveal nothing; GET never shows the secret;
//! a test on a configured endpoint is signed with the current secret and
//! saving it keeps that secret; validation, permissions and the audit trail.
//!
//! Not covered: an expired test_id (older than 15 minutes) cannot be produced
//! quickly over HTTP, so that TEST_REQUIRED case is not tested here.

use std::collections::BTreeSet;
use std::time::Duration;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, Reply, WEBHOOK_TEST_CONFIG};
use crate::receiver::{refused_url, Behavior, TestReceiver};
use crate::webhook_delivery::{
    assert_delivery, assert_log_record_shape, assert_secret_format, is_rfc3339_millis, of_event,
    put_webhook, run_test, wait_event, wait_log, WAIT,
};

/// The members of a JSON object.
fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("expected an object, got {value}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The members every test answer has (`secret` only on a passed first setup).
const TEST_ANSWER: &[&str] = &[
    "passed",
    "test_id",
    "status_code",
    "latency_ms",
    "response_body",
    "error",
];

/// Asserts the answer of a failed test: nothing revealed, nothing saveable.
#[track_caller]
fn assert_failed_test(answer: &Value) {
    assert_eq!(keys(answer), set(TEST_ANSWER), "no secret member: {answer}");
    assert_eq!(answer["passed"], json!(false));
    assert!(
        uuid::Uuid::parse_str(answer["test_id"].as_str().unwrap_or("")).is_ok(),
        "test_id is a UUID: {answer}"
    );
    assert!(answer["latency_ms"].is_u64(), "latency_ms: {answer}");
    let error = answer["error"].as_str().unwrap_or("");
    assert!(!error.trim().is_empty(), "a failed test says why: {answer}");
}

on_both_engines! {
async fn a_passed_test_reveals_the_secret_and_put_saves_it() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");

    let events = ["member.added", "member.removed"];
    let answer = run_test(&app, &org, &receiver.url, &events)
        .await
        .expect(200)
        .json();
    let mut with_secret = set(TEST_ANSWER);
    with_secret.insert("secret".into());
    assert_eq!(keys(&answer), with_secret, "{answer}");
    assert_eq!(answer["passed"], json!(true));
    assert_eq!(answer["status_code"], json!(200));
    assert_eq!(answer["error"], Value::Null);
    assert_eq!(answer["response_body"], json!("answer 200"));
    assert!(answer["latency_ms"].is_u64());
    let test_id = answer["test_id"].as_str().expect("test_id").to_owned();
    assert!(uuid::Uuid::parse_str(&test_id).is_ok());
    let secret = answer["secret"].as_str().expect("secret").to_owned();
    assert_secret_format(&secret);

    // The test is synchronous: the preflight arrived before the answer.
    let received = receiver.received();
    assert_eq!(received.len(), 1, "exactly one preflight POST");
    let preflight = &received[0];
    let envelope = assert_delivery(preflight, "test.preflight", 1, &secret);
    assert_eq!(
        envelope["data"],
        json!({"organization_id": org.id, "url": receiver.url, "events": events, "test_id": test_id}),
        "test.preflight data"
    );

    // The preflight is in the delivery log.
    let record = wait_log(
        &app,
        &org,
        "&event=test.preflight",
        "the preflight record",
        |r| r["delivery_id"] == json!(preflight.header("x-service-delivery")),
    )
    .await;
    assert_log_record_shape(&record);
    assert_eq!(record["event"], json!("test.preflight"));
    assert_eq!(record["attempt"], json!(1));
    assert_eq!(record["outcome"], json!("succeeded"));
    assert_eq!(record["response_code"], json!(200));

    // A test alone saves nothing.
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");

    put_webhook(&app, &org, &org.owner_token, &json!(test_id))
        .await
        .expect(200);

    let got = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200);
    let text = String::from_utf8_lossy(&got.body).to_string();
    assert!(
        !text.contains(&secret) && !text.contains("whsec_"),
        "GET never returns the secret: {text}"
    );
    let view = got.json();
    assert_eq!(
        keys(&view),
        set(&[
            "url",
            "events",
            "created_at",
            "updated_at",
            "secret_last4",
            "status",
            "disabled_at",
            "disabled_reason"
        ]),
        "{view}"
    );
    assert_eq!(view["status"], json!("enabled"));
    assert_eq!(
        (&view["disabled_at"], &view["disabled_reason"]),
        (&json!(null), &json!(null))
    );
    assert_eq!(view["url"], json!(receiver.url));
    let subscribed: BTreeSet<String> = view["events"]
        .as_array()
        .expect("events array")
        .iter()
        .map(|e| e.as_str().expect("event id").to_owned())
        .collect();
    assert_eq!(subscribed, set(&events));
    assert_eq!(view["secret_last4"], json!(&secret[secret.len() - 4..]));
    let created = view["created_at"].as_str().expect("created_at");
    let updated = view["updated_at"].as_str().expect("updated_at");
    assert!(is_rfc3339_millis(created) && is_rfc3339_millis(updated));
    assert!(created <= updated);

    // The saved secret is the revealed one: a production event verifies with it.
    app.member(&org, &org.member_role).await;
    let added = wait_event(&receiver, "member.added").await;
    assert_delivery(&added, "member.added", 1, &secret);
}
}

on_both_engines! {
async fn put_without_a_passed_unused_test_of_this_org_is_409() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;

    // Never tested.
    let random = rolecall::ids::new_v7().to_string();
    put_webhook(&app, &org, &org.owner_token, &json!(random))
        .await
        .problem(409, "TEST_REQUIRED");

    // A failed test.
    receiver.set(Behavior::status(500));
    let failed = run_test(&app, &org, &receiver.url, &["member.added"])
        .await
        .expect(200)
        .json();
    assert_failed_test(&failed);
    put_webhook(&app, &org, &org.owner_token, &failed["test_id"])
        .await
        .problem(409, "TEST_REQUIRED");

    // A passed test of another organization.
    receiver.set(Behavior::ok());
    let other = app.org("enterprise").await;
    let foreign = run_test(&app, &other, &receiver.url, &["member.added"])
        .await
        .expect(200)
        .json();
    assert_eq!(foreign["passed"], json!(true), "{foreign}");
    put_webhook(&app, &org, &org.owner_token, &foreign["test_id"])
        .await
        .problem(409, "TEST_REQUIRED");
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");

    // A passed test saves once; the second PUT of the same id is refused.
    let passed = run_test(&app, &org, &receiver.url, &["member.added"])
        .await
        .expect(200)
        .json();
    assert_eq!(passed["passed"], json!(true), "{passed}");
    put_webhook(&app, &org, &org.owner_token, &passed["test_id"])
        .await
        .expect(200);
    let saved = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();
    put_webhook(&app, &org, &org.owner_token, &passed["test_id"])
        .await
        .problem(409, "TEST_REQUIRED");
    let still = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(still, saved, "a refused PUT changes nothing");
    // Expired test ids (> 15 minutes) are not tested: see the module docs.
}
}

on_both_engines! {
async fn failing_tests_reveal_no_secret_and_report_why() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;

    // The receiver answers 500.
    receiver.set(Behavior::status(500));
    let answer = run_test(&app, &org, &receiver.url, &["member.added"])
        .await
        .expect(200)
        .json();
    assert_failed_test(&answer);
    assert_eq!(answer["status_code"], json!(500));
    assert_eq!(answer["response_body"], json!("answer 500"));
    assert!(answer["latency_ms"].as_u64().unwrap_or(u64::MAX) < 300);

    // The receiver sleeps 2 s, past the 300 ms attempt timeout.
    receiver.set(Behavior::slow(Duration::from_secs(2)));
    let started = std::time::Instant::now();
    let answer = run_test(&app, &org, &receiver.url, &["member.added"])
        .await
        .expect(200)
        .json();
    let took = started.elapsed();
    assert_failed_test(&answer);
    assert_eq!(
        answer["status_code"],
        Value::Null,
        "no status arrived in time"
    );
    let latency = answer["latency_ms"].as_u64().unwrap_or(0);
    assert!(
        (300..1500).contains(&latency),
        "the timeout bounds the attempt: latency_ms {latency}"
    );
    assert!(
        took < Duration::from_millis(1500),
        "the test answered after the timeout, not the sleep: {took:?}"
    );

    // Nothing listens.
    let refused = refused_url();
    let answer = run_test(&app, &org, &refused, &["member.added"])
        .await
        .expect(200)
        .json();
    assert_failed_test(&answer);
    assert_eq!(answer["status_code"], Value::Null);
    assert_eq!(answer["response_body"], Value::Null);
    assert!(answer["latency_ms"].as_u64().unwrap_or(u64::MAX) < 300);

    // Nothing saved; every attempt is in the log as a failed test.preflight.
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    let records = crate::helpers::eventually(WAIT, "three failed preflight records", || async {
        let records = app.deliveries(&org, "&event=test.preflight").await;
        (records.len() >= 3).then_some(records)
    })
    .await;
    assert_eq!(records.len(), 3, "{records:?}");
    for record in &records {
        assert_log_record_shape(record);
        assert_eq!(record["attempt"], json!(1));
        assert_eq!(record["outcome"], json!("failed"));
        assert!(record["error"].is_string());
    }
    // Newest first: refused, timed out, 500.
    assert_eq!(records[0]["response_code"], Value::Null);
    assert_eq!(records[1]["response_code"], Value::Null);
    assert_eq!(records[2]["response_code"], json!(500));
}
}

on_both_engines! {
async fn a_test_on_a_configured_endpoint_uses_and_keeps_the_current_secret() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let first = TestReceiver::start().await;
    let second = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let secret = app
        .setup_webhook(&org, &first.url, &["member.removed"])
        .await;
    let before = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();

    // Test a new URL and events: passes, reveals nothing, signed with the current secret.
    let answer = run_test(&app, &org, &second.url, &["member.added"])
        .await
        .expect(200)
        .json();
    assert_eq!(
        keys(&answer),
        set(TEST_ANSWER),
        "no secret member: {answer}"
    );
    assert_eq!(answer["passed"], json!(true));
    let preflight = second.received();
    assert_eq!(preflight.len(), 1);
    let envelope = assert_delivery(&preflight[0], "test.preflight", 1, &secret);
    assert_eq!(envelope["data"]["test_id"], answer["test_id"]);
    assert_eq!(envelope["data"]["url"], json!(second.url));
    assert_eq!(envelope["data"]["events"], json!(["member.added"]));

    // Until saved, the configuration is unchanged.
    let unchanged = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(unchanged, before);

    // Saving it keeps the current secret, with the new URL and events.
    put_webhook(&app, &org, &org.owner_token, &answer["test_id"])
        .await
        .expect(200);
    let after = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(after["url"], json!(second.url));
    assert_eq!(after["events"], json!(["member.added"]));
    assert_eq!(after["secret_last4"], before["secret_last4"]);
    assert_eq!(after["created_at"], before["created_at"]);

    app.member(&org, &org.member_role).await;
    let added = wait_event(&second, "member.added").await;
    assert_delivery(&added, "member.added", 1, &secret);
    assert!(
        of_event(&first, "member.added").is_empty(),
        "the old URL gets nothing"
    );
}
}

on_both_engines! {
async fn test_validates_events_and_url() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;

    let body = run_test(&app, &org, &receiver.url, &["member.added", "nope.event"])
        .await
        .problem(400, "UNKNOWN_EVENT");
    assert_eq!(body["unknown"], json!(["nope.event"]));
    let body = run_test(
        &app,
        &org,
        &receiver.url,
        &["member.added", "test.preflight"],
    )
    .await
    .problem(400, "UNKNOWN_EVENT");
    assert_eq!(body["unknown"], json!(["test.preflight"]));

    for url in ["not a url", "/relative/hook", "ftp://127.0.0.1/hook", ""] {
        let reply: Reply = run_test(&app, &org, url, &["member.added"]).await;
        reply.problem(400, "INVALID_URL");
    }

    // The refused tests sent nothing and logged nothing.
    assert!(
        receiver.received().is_empty(),
        "no request for a refused test"
    );
    assert_eq!(app.deliveries(&org, "").await, Vec::<Value>::new());

    // Default policy: https only, no loopback targets.
    let strict = spawn_app().await;
    let org = strict.org("enterprise").await;
    for url in [
        receiver.url.clone(),
        format!("https://127.0.0.1:{}/hook", receiver.port),
    ] {
        let reply = run_test(&strict, &org, &url, &["member.added"]).await;
        reply.problem(400, "INVALID_URL");
    }
    assert!(receiver.received().is_empty());
}
}

on_both_engines! {
async fn webhook_permissions_are_enforced() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    // Member: org:settings:read, not org:settings:manage.
    let (_, member) = app.member(&org, &org.member_role).await;
    let no_read = app.role(&org, "Outsider", &["org:team:read"]).await;
    let (_, outsider) = app.member(&org, &no_read).await;

    let forbidden = |reply: Reply, key: &str| {
        let body = reply.problem(403, "FORBIDDEN");
        assert_eq!(body["missing_permission"], json!(key));
    };
    let manage = "org:settings:manage";

    forbidden(
        app.post(
            &org.path("/webhook/test"),
            &member,
            json!({"url": receiver.url, "events": ["member.added"]}),
        )
        .await,
        manage,
    );
    assert!(
        receiver.received().is_empty(),
        "a forbidden test sends nothing"
    );

    // A forbidden PUT does not consume the owner's passed test.
    let passed = run_test(&app, &org, &receiver.url, &["member.added"])
        .await
        .expect(200)
        .json();
    let secret = passed["secret"].as_str().expect("secret").to_owned();
    forbidden(
        put_webhook(&app, &org, &member, &passed["test_id"]).await,
        manage,
    );
    put_webhook(&app, &org, &org.owner_token, &passed["test_id"])
        .await
        .expect(200);

    let before = app
        .get(&org.path("/webhook"), &member)
        .await
        .expect(200)
        .json();
    forbidden(
        app.call(
            Method::POST,
            &org.path("/webhook/rotate"),
            Some(&member),
            None,
        )
        .await,
        manage,
    );
    forbidden(app.delete(&org.path("/webhook"), &member).await, manage);
    let after = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(after, before, "refused rotate/delete change nothing");
    assert_eq!(after["secret_last4"], json!(&secret[secret.len() - 4..]));

    // Reading needs org:settings:read.
    let read = "org:settings:read";
    forbidden(app.get(&org.path("/webhook"), &outsider).await, read);
    forbidden(
        app.get(&org.path("/webhook/deliveries"), &outsider).await,
        read,
    );
    forbidden(
        app.post(
            &org.path("/webhook/test"),
            &outsider,
            json!({"url": receiver.url, "events": ["member.added"]}),
        )
        .await,
        manage,
    );
}
}

on_both_engines! {
async fn webhook_changes_are_audited_without_secrets() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    let saved_view = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();

    let rotated = app
        .call(
            Method::POST,
            &org.path("/webhook/rotate"),
            Some(&org.owner_token),
            None,
        )
        .await
        .expect(200)
        .json();
    let new_secret = rotated["secret"].as_str().expect("secret").to_owned();
    let rotated_view = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();

    let deleted = app.delete(&org.path("/webhook"), &org.owner_token).await;
    assert_eq!(deleted.status, 204);
    assert!(deleted.body.is_empty());
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    app.delete(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    app.call(
        Method::POST,
        &org.path("/webhook/rotate"),
        Some(&org.owner_token),
        None,
    )
    .await
    .problem(404, "NOT_FOUND");

    let audit = app.audit(&org).await;
    let text = serde_json::to_string(&audit).expect("json");
    assert!(
        !text.contains(&secret),
        "the first secret is not in the audit log"
    );
    assert!(
        !text.contains(&new_secret),
        "the rotated secret is not in the audit log"
    );
    assert!(
        !text.contains("whsec_"),
        "no secret at all in the audit log"
    );

    let webhook: Vec<&Value> = audit
        .iter()
        .filter(|r| r["action"].as_str().unwrap_or("").starts_with("webhook."))
        .collect();
    let actions: Vec<&str> = webhook
        .iter()
        .map(|r| r["action"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        actions,
        vec!["webhook.deleted", "webhook.rotated", "webhook.saved"],
        "newest first"
    );
    let (deleted, rotated, saved) = (webhook[0], webhook[1], webhook[2]);
    for record in [deleted, rotated, saved] {
        assert_eq!(record["actor_user_id"], json!(org.owner_id));
        assert_eq!(record["organization_id"], json!(org.id));
    }
    assert_eq!(saved["before"], Value::Null);
    assert_eq!(
        saved["after"], saved_view,
        "after = the REST representation"
    );
    assert_eq!(rotated["before"], saved_view);
    assert_eq!(rotated["after"], rotated_view);
    assert_eq!(deleted["before"], rotated_view);
    assert_eq!(deleted["after"], Value::Null);
}
}
