//! Webhook delivery (CONTRACT §6, seed 4.3, 6, 8): member events reach a real
//! subscriber on loopback with exact headers, both signatures (verified here
//! independently with `hmac`/`sha2`/`base64`, never with rolecall's own
//! signing code) and the `{event, occurred_at, data}` envelope; a slow
//! subscriber does not slow the triggering request; unsubscribed events are
//! logged as skipped; nothing is recorded without an endpoint; rotation kills
//! the old secret at once, for retries of older events too.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix_web::http::Method;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::helpers::{eventually, spawn_app_with, Org, Reply, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::{Behavior, Received, TestReceiver};

/// How long to wait for something that should happen promptly.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Independent signature verification (shared with webhook_setup.rs).
// ---------------------------------------------------------------------------

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `X-Service-Signature`: `sha256=` + hex HMAC-SHA256 of the raw body keyed
/// with the UTF-8 bytes of the whole secret string (`whsec_` included).
pub(crate) fn service_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex(&hmac_sha256(secret.as_bytes(), body)))
}

/// `webhook-signature`: `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`
/// keyed with the base64-decoded part after `whsec_`.
pub(crate) fn standard_signature(secret: &str, id: &str, timestamp: &str, body: &[u8]) -> String {
    let encoded = secret
        .strip_prefix("whsec_")
        .expect("secret starts with whsec_");
    let key = STANDARD
        .decode(encoded)
        .expect("secret is base64 after whsec_");
    let mut message = format!("{id}.{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    format!("v1,{}", STANDARD.encode(hmac_sha256(&key, &message)))
}

/// Whether (X-Service-Signature, webhook-signature) of `r` verify with `secret`.
pub(crate) fn verifies_with(r: &Received, secret: &str) -> (bool, bool) {
    let service = r.header("x-service-signature") == service_signature(secret, &r.body);
    let standard = r.header("webhook-signature")
        == standard_signature(
            secret,
            &r.header("webhook-id"),
            &r.header("webhook-timestamp"),
            &r.body,
        );
    (service, standard)
}

/// Asserts a secret has the Standard Webhooks format: `whsec_` + 32 bytes in
/// padded standard base64.
#[track_caller]
pub(crate) fn assert_secret_format(secret: &str) {
    let encoded = secret
        .strip_prefix("whsec_")
        .unwrap_or_else(|| panic!("secret {secret:?} lacks the whsec_ prefix"));
    let bytes = STANDARD
        .decode(encoded)
        .unwrap_or_else(|_| panic!("secret {secret:?} is not padded standard base64"));
    assert_eq!(bytes.len(), 32, "secret must carry 32 random bytes");
    assert_eq!(STANDARD.encode(&bytes), encoded, "canonical padded base64");
}

/// Whether `text` is RFC 3339 UTC with milliseconds and `Z`.
pub(crate) fn is_rfc3339_millis(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// Asserts everything CONTRACT §6 / seed 4.3 fixes about one outbound
/// request, with both signatures made with `secret`; returns the envelope.
#[track_caller]
pub(crate) fn assert_delivery(r: &Received, event: &str, attempt: u32, secret: &str) -> Value {
    let once = |name: &str| {
        let count = r
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count();
        assert_eq!(
            count, 1,
            "header {name} must appear exactly once: {:?}",
            r.headers
        );
        r.header(name)
    };
    assert_eq!(r.path, "/hook", "POSTed to the configured URL");
    assert_eq!(once("content-type"), "application/json");
    assert_eq!(once("user-agent"), "Service-Webhooks/1.0");
    assert_eq!(once("x-service-event"), event);
    assert_eq!(once("x-service-attempt"), attempt.to_string());
    let delivery = once("x-service-delivery");
    assert!(
        uuid::Uuid::parse_str(&delivery).is_ok(),
        "X-Service-Delivery {delivery:?} is a UUID"
    );
    assert_eq!(
        once("webhook-id"),
        delivery,
        "webhook-id = X-Service-Delivery"
    );
    let timestamp = once("webhook-timestamp");
    let seconds: i64 = timestamp
        .parse()
        .unwrap_or_else(|_| panic!("webhook-timestamp {timestamp:?} is unix seconds"));
    assert!(
        (unix_now() - seconds).abs() <= 5,
        "webhook-timestamp {seconds} is within 5 s of now ({})",
        unix_now()
    );
    let signature = once("x-service-signature");
    assert_eq!(
        signature,
        service_signature(secret, &r.body),
        "X-Service-Signature = sha256=hex(HMAC(whole secret, raw body))"
    );
    let standard = once("webhook-signature");
    assert_eq!(
        standard,
        standard_signature(secret, &delivery, &timestamp, &r.body),
        "webhook-signature = v1,base64(HMAC(decoded secret, id.timestamp.body))"
    );

    let envelope: Value = serde_json::from_slice(&r.body).expect("the body is JSON");
    let keys: BTreeSet<&str> = envelope
        .as_object()
        .expect("the envelope is an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["event", "occurred_at", "data"]),
        "envelope is exactly {{event, occurred_at, data}}"
    );
    assert_eq!(envelope["event"], json!(event));
    let occurred_at = envelope["occurred_at"]
        .as_str()
        .expect("occurred_at string");
    assert!(
        is_rfc3339_millis(occurred_at),
        "occurred_at {occurred_at:?} is RFC 3339 with ms and Z"
    );
    assert!(envelope["data"].is_object(), "data is an object");
    envelope
}

/// Requests received with `X-Service-Event: event`.
pub(crate) fn of_event(receiver: &TestReceiver, event: &str) -> Vec<Received> {
    receiver
        .received()
        .into_iter()
        .filter(|r| r.header("x-service-event") == event)
        .collect()
}

/// Waits for the first request with `X-Service-Event: event`.
pub(crate) async fn wait_event(receiver: &TestReceiver, event: &str) -> Received {
    let what = format!("a {event} request at the receiver");
    eventually(WAIT, &what, || async {
        of_event(receiver, event).into_iter().next()
    })
    .await
}

/// `POST …/webhook/test` as the owner; the answer.
pub(crate) async fn run_test(app: &TestApp, org: &Org, url: &str, events: &[&str]) -> Reply {
    app.post(
        &org.path("/webhook/test"),
        &org.owner_token,
        json!({"url": url, "events": events}),
    )
    .await
}

/// `PUT …/webhook {"test_id"}` with `token`.
pub(crate) async fn put_webhook(app: &TestApp, org: &Org, token: &str, test_id: &Value) -> Reply {
    app.call(
        Method::PUT,
        &org.path("/webhook"),
        Some(token),
        Some(json!({"test_id": test_id})),
    )
    .await
}

/// The membership as `GET …/members/{user}` returns it.
pub(crate) async fn membership(app: &TestApp, org: &Org, user: &str) -> Value {
    app.get(&org.path(&format!("/members/{user}")), &org.owner_token)
        .await
        .expect(200)
        .json()
}

/// Asserts a delivery-log record has exactly the contract's members.
#[track_caller]
pub(crate) fn assert_log_record_shape(record: &Value) {
    let keys: BTreeSet<&str> = record
        .as_object()
        .expect("record object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "id",
            "delivery_id",
            "event",
            "attempt",
            "outcome",
            "response_code",
            "response_body",
            "latency_ms",
            "error",
            "attempted_at"
        ]),
        "delivery-log record members: {record}"
    );
}

/// Waits until the log holds a record matching `pred`; returns it.
pub(crate) async fn wait_log<F>(app: &TestApp, org: &Org, query: &str, what: &str, pred: F) -> Value
where
    F: Fn(&Value) -> bool,
{
    eventually(WAIT, what, || async {
        app.deliveries(org, query)
            .await
            .into_iter()
            .find(|r| pred(r))
    })
    .await
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

on_both_engines! {
async fn the_test_verifier_matches_known_vectors() {
    // RFC 4231 test case 2 (key "Jefe") for the hex HMAC-SHA256.
    assert_eq!(
        service_signature("Jefe", b"what do ya want for nothing?"),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    // The example of the Standard Webhooks specification.
    assert_eq!(
        standard_signature(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            br#"{"test": 2432232314}"#
        ),
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    );
}
}

on_both_engines! {
async fn webhook_timing_defaults_are_8000_ms_and_2000_ms() {
    let config = rolecall::config::Config::with_overrides(&[]).expect("defaults load");
    assert_eq!(config.webhooks.attempt_timeout_ms, 8000);
    assert_eq!(config.webhooks.retry_delay_ms, 2000);
}
}

on_both_engines! {
async fn member_events_arrive_with_exact_headers_signatures_and_envelope() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let secret = app
        .setup_webhook(
            &org,
            &receiver.url,
            &["member.added", "member.role_changed", "member.removed"],
        )
        .await;
    assert_secret_format(&secret);
    wait_event(&receiver, "test.preflight").await;
    let reviewer = app.role(&org, "Reviewer", &["org:team:read"]).await;

    // member.added: data = the membership's GET representation.
    let (user, _) = app.member(&org, &org.member_role).await;
    let added = wait_event(&receiver, "member.added").await;
    let envelope = assert_delivery(&added, "member.added", 1, &secret);
    let after_add = membership(&app, &org, &user).await;
    assert_eq!(
        envelope["data"], after_add,
        "member.added data = GET member"
    );

    // member.role_changed.
    app.patch(
        &org.path(&format!("/members/{user}")),
        &org.owner_token,
        json!({"role_id": reviewer}),
    )
    .await
    .expect(200);
    let changed = wait_event(&receiver, "member.role_changed").await;
    let envelope = assert_delivery(&changed, "member.role_changed", 1, &secret);
    let after_change = membership(&app, &org, &user).await;
    assert_eq!(after_change["role_id"], json!(reviewer));
    assert_eq!(
        envelope["data"], after_change,
        "member.role_changed data = GET member"
    );

    // member.removed: data = the last representation.
    app.delete(&org.path(&format!("/members/{user}")), &org.owner_token)
        .await
        .expect(204);
    let removed = wait_event(&receiver, "member.removed").await;
    let envelope = assert_delivery(&removed, "member.removed", 1, &secret);
    assert_eq!(
        envelope["data"], after_change,
        "member.removed data = the last GET member"
    );

    // Each delivery has its own id, and each is logged as a succeeded attempt 1.
    let ids: BTreeSet<String> = [&added, &changed, &removed]
        .iter()
        .map(|r| r.header("x-service-delivery"))
        .collect();
    assert_eq!(ids.len(), 3, "every delivery has its own id");
    for r in [&added, &changed, &removed] {
        let event = r.header("x-service-event");
        let delivery = r.header("x-service-delivery");
        let record = wait_log(
            &app,
            &org,
            &format!("&event={event}"),
            &format!("the {event} log record"),
            |rec| rec["delivery_id"] == json!(delivery) && rec["outcome"] == json!("succeeded"),
        )
        .await;
        assert_log_record_shape(&record);
        assert_eq!(record["event"], json!(event));
        assert_eq!(record["attempt"], json!(1));
        assert_eq!(record["response_code"], json!(200));
        assert_eq!(record["error"], Value::Null);
    }
    // Exactly one POST per event, no duplicates.
    for event in ["member.added", "member.role_changed", "member.removed"] {
        assert_eq!(of_event(&receiver, event).len(), 1, "one {event} POST");
    }
}
}

on_both_engines! {
async fn a_slow_subscriber_does_not_delay_the_triggering_request() {
    // A long attempt timeout, so a delivery made on the request's path would
    // hold the request for the subscriber's whole 3 s sleep.
    let mut config = WEBHOOK_TEST_CONFIG.to_vec();
    config.push(("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "6000"));
    let app = spawn_app_with(&config).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    receiver.set(Behavior::slow(Duration::from_secs(3)));
    let (user, _) = app.user("slow-subscriber@example.test").await;

    let started = Instant::now();
    app.post(
        &org.path("/members"),
        &org.owner_token,
        json!({"user_id": user, "role_id": org.member_role}),
    )
    .await
    .expect(201);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the invite took {took:?} while the subscriber sleeps 3 s"
    );

    // The event is still delivered (the subscriber got it, and is sleeping).
    let delivered = wait_event(&receiver, "member.added").await;
    let envelope = assert_delivery(&delivered, "member.added", 1, &secret);
    assert_eq!(envelope["data"], membership(&app, &org, &user).await);
}
}

on_both_engines! {
async fn an_unsubscribed_event_is_logged_as_skipped_and_not_posted() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["member.removed"])
        .await;
    wait_event(&receiver, "test.preflight").await;

    // member.added is not subscribed: one skipped record.
    let (user, _) = app.member(&org, &org.member_role).await;
    let skipped = wait_log(
        &app,
        &org,
        "&event=member.added",
        "a skipped member.added record",
        |r| r["outcome"] == json!("skipped"),
    )
    .await;
    assert_log_record_shape(&skipped);
    assert_eq!(skipped["event"], json!("member.added"));
    assert_eq!(
        skipped["attempt"],
        Value::Null,
        "skipped records: attempt null"
    );
    assert_eq!(skipped["response_code"], Value::Null);
    assert!(is_rfc3339_millis(
        skipped["attempted_at"].as_str().unwrap_or("")
    ));

    // A later subscribed event is the positive signal that the pipeline ran.
    app.delete(&org.path(&format!("/members/{user}")), &org.owner_token)
        .await
        .expect(204);
    let removed = wait_event(&receiver, "member.removed").await;
    assert_delivery(&removed, "member.removed", 1, &secret);
    wait_log(
        &app,
        &org,
        "&event=member.removed",
        "the member.removed record",
        |r| r["outcome"] == json!("succeeded"),
    )
    .await;
    // Bounded wait for a stray POST, then the exact picture.
    actix_web::rt::time::sleep(Duration::from_millis(300)).await;
    let events: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("x-service-event"))
        .collect();
    assert_eq!(
        events,
        vec!["test.preflight", "member.removed"],
        "no POST for the unsubscribed member.added"
    );
    let added_records = app.deliveries(&org, "&event=member.added").await;
    assert_eq!(
        added_records.len(),
        1,
        "exactly one skipped record: {added_records:?}"
    );
    let log: Vec<(Value, Value)> = app
        .deliveries(&org, "")
        .await
        .iter()
        .map(|r| (r["event"].clone(), r["outcome"].clone()))
        .collect();
    assert_eq!(
        log,
        vec![
            (json!("member.removed"), json!("succeeded")),
            (json!("member.added"), json!("skipped")),
            (json!("test.preflight"), json!("succeeded")),
        ],
        "the whole log, newest first"
    );
    // The outcome filter finds the skipped record too.
    let only_skipped = app.deliveries(&org, "&outcome=skipped").await;
    assert_eq!(only_skipped.len(), 1);
    assert_eq!(only_skipped[0]["id"], skipped["id"]);
}
}

on_both_engines! {
async fn without_an_endpoint_nothing_is_recorded() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let reviewer = app.role(&org, "Reviewer", &["org:team:read"]).await;

    let (user, _) = app.member(&org, &org.member_role).await;
    app.patch(
        &org.path(&format!("/members/{user}")),
        &org.owner_token,
        json!({"role_id": reviewer}),
    )
    .await
    .expect(200);
    app.delete(&org.path(&format!("/members/{user}")), &org.owner_token)
        .await
        .expect(204);
    assert_eq!(
        app.deliveries(&org, "").await,
        Vec::<Value>::new(),
        "no endpoint: no record"
    );

    // Configure an endpoint afterwards: the earlier events were never queued.
    let secret = app
        .setup_webhook(
            &org,
            &receiver.url,
            &["member.added", "member.role_changed", "member.removed"],
        )
        .await;
    let (second, _) = app.member(&org, &org.member_role).await;
    let added = wait_event(&receiver, "member.added").await;
    let envelope = assert_delivery(&added, "member.added", 1, &secret);
    assert_eq!(envelope["data"]["user_id"], json!(second));
    wait_log(
        &app,
        &org,
        "&event=member.added",
        "the member.added record",
        |r| r["outcome"] == json!("succeeded"),
    )
    .await;
    actix_web::rt::time::sleep(Duration::from_millis(300)).await;
    let events: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("x-service-event"))
        .collect();
    assert_eq!(events, vec!["test.preflight", "member.added"]);
    let log: Vec<Value> = app
        .deliveries(&org, "")
        .await
        .iter()
        .map(|r| r["event"].clone())
        .collect();
    assert_eq!(
        log,
        vec![json!("member.added"), json!("test.preflight")],
        "only the events after setup are recorded"
    );
}
}

on_both_engines! {
async fn rotation_kills_the_old_secret_even_for_the_retry_of_an_older_event() {
    // The retry waits 1.5 s, so the rotation surely answers before it starts.
    let mut config = WEBHOOK_TEST_CONFIG.to_vec();
    config.push(("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "1500"));
    let app = spawn_app_with(&config).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let old = app
        .setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    wait_event(&receiver, "test.preflight").await;
    let before = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200)
        .json();

    // Attempt 1 fails (500), signed with the old secret.
    receiver.script(vec![Behavior::status(500)]);
    app.member(&org, &org.member_role).await;
    let first = wait_event(&receiver, "member.added").await;
    assert_delivery(&first, "member.added", 1, &old);

    // Rotate at once.
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
    assert_eq!(
        of_event(&receiver, "member.added").len(),
        1,
        "the retry must not have started before the rotation answered"
    );
    let keys: Vec<&String> = rotated.as_object().expect("object").keys().collect();
    assert_eq!(keys, vec!["secret"], "rotate answers exactly {{secret}}");
    let new = rotated["secret"].as_str().expect("secret").to_owned();
    assert_secret_format(&new);
    assert_ne!(new, old, "a new secret");

    // GET shows the new secret's last four characters, never the secret.
    let after = app
        .get(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(200);
    let after_text = String::from_utf8_lossy(&after.body).to_string();
    assert!(!after_text.contains(&new) && !after_text.contains("whsec_"));
    let after = after.json();
    assert_eq!(after["secret_last4"], json!(&new[new.len() - 4..]));
    assert_eq!(after["url"], before["url"]);
    assert_eq!(after["events"], before["events"]);
    assert_eq!(after["created_at"], before["created_at"]);

    // Attempt 2 of the event queued before the rotation: new secret only.
    let attempts = eventually(WAIT, "the retry (attempt 2)", || async {
        let got = of_event(&receiver, "member.added");
        (got.len() >= 2).then_some(got)
    })
    .await;
    let second = &attempts[1];
    assert_delivery(second, "member.added", 2, &new);
    assert_eq!(
        verifies_with(second, &old),
        (false, false),
        "the retry must not verify with the rotated-away secret"
    );
    assert_eq!(
        second.body, first.body,
        "byte-identical body on both attempts"
    );
    assert_eq!(
        second.header("x-service-delivery"),
        first.header("x-service-delivery"),
        "same delivery id on both attempts"
    );
    assert_eq!(second.header("webhook-id"), first.header("webhook-id"));

    // The log: attempt 1 failed with 500, attempt 2 succeeded, one delivery id.
    let delivery = first.header("x-service-delivery");
    let retry = wait_log(
        &app,
        &org,
        "&event=member.added",
        "the attempt-2 record",
        |r| r["attempt"] == json!(2),
    )
    .await;
    assert_eq!(retry["outcome"], json!("succeeded"));
    assert_eq!(retry["delivery_id"], json!(delivery));
    let records = app.deliveries(&org, "&event=member.added").await;
    let first_record = records
        .iter()
        .find(|r| r["attempt"] == json!(1))
        .expect("attempt-1 record");
    assert_eq!(first_record["outcome"], json!("failed"));
    assert_eq!(first_record["response_code"], json!(500));
    assert_eq!(first_record["delivery_id"], json!(delivery));
    assert_eq!(records.len(), 2, "exactly two attempts: {records:?}");

    // A fresh event: new secret only.
    app.member(&org, &org.member_role).await;
    let fresh = eventually(WAIT, "a fresh member.added", || async {
        of_event(&receiver, "member.added").into_iter().nth(2)
    })
    .await;
    assert_delivery(&fresh, "member.added", 1, &new);
    assert_eq!(verifies_with(&fresh, &old), (false, false));
}
}

on_both_engines! {
async fn rotate_without_an_endpoint_is_404() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let org = app.org("enterprise").await;
    let reply = app
        .call(
            Method::POST,
            &org.path("/webhook/rotate"),
            Some(&org.owner_token),
            None,
        )
        .await;
    reply.problem(404, "NOT_FOUND");
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    assert!(
        app.audit(&org)
            .await
            .iter()
            .all(|r| r["action"] != json!("webhook.rotated")),
        "a refused rotation is not audited"
    );
}
}
