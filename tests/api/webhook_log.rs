//! The delivery log (CONTRACT §6, seed 2.6): record shape, filters, paging,
//! permissions and retention; deleting the endpoint drops queued attempts;
//! redelivery sends the same envelope as a new delivery.

use std::time::Duration;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_app_with, Org, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::{Behavior, Received, TestReceiver};

const WAIT: Duration = Duration::from_secs(5);
/// How long to keep watching for something that must not happen.
const QUIET: Duration = Duration::from_millis(700);

/// WEBHOOK_TEST_CONFIG followed by `extra` (later entries win).
pub fn config<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = WEBHOOK_TEST_CONFIG.to_vec();
    all.extend_from_slice(extra);
    all
}

/// The whole log (newest first) once `check` accepts it.
pub async fn log_until(
    app: &TestApp,
    org: &Org,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let check = &check;
    eventually(WAIT, what, || async move {
        let records = app.deliveries(org, "").await;
        check(&records).then_some(records)
    })
    .await
}

fn of_delivery<'a>(records: &'a [Value], delivery: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["delivery_id"] == json!(delivery))
        .collect()
}

/// `2026-11-22T10:00:00.123Z`.
fn is_timestamp(value: &Value) -> bool {
    let Some(text) = value.as_str() else {
        return false;
    };
    let b = text.as_bytes();
    text.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z'
        && b.iter()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19, 23].contains(&i) || c.is_ascii_digit())
}

fn is_uuid(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.len() == 36 && uuid_like(s))
}

fn uuid_like(s: &str) -> bool {
    s.chars().enumerate().all(|(i, c)| {
        if [8, 13, 18, 23].contains(&i) {
            c == '-'
        } else {
            c.is_ascii_hexdigit()
        }
    })
}

fn ids(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["id"].as_str().expect("record id").to_owned())
        .collect()
}

/// The X-Service-Signature a subscriber expects, computed independently.
fn signature(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    format!(
        "sha256={}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// An org with a log of six records, all kinds:
///
/// newest first: 0 member.removed skipped, 1 member.added attempt 2 failed,
/// 2 member.added attempt 1 failed (same delivery as 1), 3 member.role_changed
/// skipped, 4 member.added attempt 1 succeeded, 5 test.preflight succeeded.
struct Scenario {
    app: TestApp,
    org: Org,
    _receiver: TestReceiver,
    /// Every record, newest first.
    records: Vec<Value>,
    received: Vec<Received>,
}

async fn scenario() -> Scenario {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let ops = app.role(&org, "Ops", &["org:team:read"]).await;
    // No endpoint yet: nothing is recorded.
    app.member(&org, &org.member_role).await;
    assert_eq!(app.deliveries(&org, "").await, Vec::<Value>::new());

    app.setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    log_until(&app, &org, "the preflight record", |r| r.len() == 1).await;

    let (u1, _) = app.member(&org, &org.member_role).await;
    receiver.wait_for(2, WAIT).await;
    log_until(&app, &org, "u1's delivery", |r| r.len() == 2).await;

    app.patch(
        &org.path(&format!("/members/{u1}")),
        &org.owner_token,
        json!({"role_id": ops}),
    )
    .await
    .expect(200);
    // The skipped record is written with the change itself.
    let records = app.deliveries(&org, "").await;
    assert_eq!(records.len(), 3, "records: {records:?}");
    assert_eq!(records[0]["event"], json!("member.role_changed"));

    receiver.script(vec![Behavior::status(500), Behavior::status(500)]);
    app.member(&org, &org.member_role).await;
    receiver.wait_for(4, WAIT).await;
    log_until(&app, &org, "u2's two attempts", |r| r.len() == 5).await;

    app.delete(&org.path(&format!("/members/{u1}")), &org.owner_token)
        .await
        .expect(204);
    let records = app.deliveries(&org, "").await;
    assert_eq!(records.len(), 6, "records: {records:?}");

    // Skipped events reach nobody.
    actix_web::rt::time::sleep(QUIET).await;
    let received = receiver.received();
    assert_eq!(received.len(), 4, "preflight, u1, u2 twice");
    assert_eq!(app.deliveries(&org, "").await, records);
    Scenario {
        app,
        org,
        _receiver: receiver,
        records,
        received,
    }
}

on_both_engines! {
async fn every_attempt_and_skipped_event_is_logged_with_the_documented_shape() {
    let Scenario {
        records, received, ..
    } = scenario().await;

    let expected = [
        ("member.removed", Value::Null, "skipped"),
        ("member.added", json!(2), "failed"),
        ("member.added", json!(1), "failed"),
        ("member.role_changed", Value::Null, "skipped"),
        ("member.added", json!(1), "succeeded"),
        ("test.preflight", json!(1), "succeeded"),
    ];
    let actual: Vec<(&str, Value, &str)> = records
        .iter()
        .map(|r| {
            (
                r["event"].as_str().unwrap_or(""),
                r["attempt"].clone(),
                r["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(actual, expected.to_vec(), "newest first");

    for record in &records {
        let mut keys: Vec<&str> = record
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "attempt",
                "attempted_at",
                "delivery_id",
                "error",
                "event",
                "id",
                "latency_ms",
                "outcome",
                "response_body",
                "response_code"
            ],
            "record: {record}"
        );
        assert!(is_uuid(&record["id"]), "record: {record}");
        assert!(is_uuid(&record["delivery_id"]), "record: {record}");
        assert!(is_timestamp(&record["attempted_at"]), "record: {record}");
    }
    let mut unique = ids(&records);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 6, "record ids are distinct");

    // Attempts: what the subscriber answered.
    for i in [4, 5] {
        let r = &records[i];
        assert_eq!(r["response_code"], json!(200), "record: {r}");
        assert_eq!(r["response_body"], json!("answer 200"), "record: {r}");
        assert_eq!(r["error"], Value::Null, "record: {r}");
        assert!(r["latency_ms"].is_u64(), "record: {r}");
    }
    for i in [1, 2] {
        let r = &records[i];
        assert_eq!(r["response_code"], json!(500), "record: {r}");
        assert_eq!(r["response_body"], json!("answer 500"), "record: {r}");
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
        assert!(r["latency_ms"].is_u64(), "record: {r}");
    }
    // Skipped events: no attempt, so no response.
    for i in [0, 3] {
        let r = &records[i];
        assert_eq!(r["response_code"], Value::Null, "record: {r}");
        assert_eq!(r["response_body"], Value::Null, "record: {r}");
        assert_eq!(r["error"], Value::Null, "record: {r}");
    }

    // Delivery ids: the ones the subscriber saw; both attempts share one.
    let header = |i: usize| json!(received[i].header("x-service-delivery"));
    assert_eq!(records[5]["delivery_id"], header(0));
    assert_eq!(records[4]["delivery_id"], header(1));
    assert_eq!(records[2]["delivery_id"], header(2));
    assert_eq!(records[1]["delivery_id"], header(2));
    assert_eq!(
        received[3].header("x-service-delivery"),
        received[2].header("x-service-delivery")
    );
    let mut deliveries: Vec<&str> = records
        .iter()
        .map(|r| r["delivery_id"].as_str().unwrap())
        .collect();
    deliveries.sort_unstable();
    deliveries.dedup();
    assert_eq!(deliveries.len(), 5, "one delivery id per event");
}
}

on_both_engines! {
async fn the_log_filters_by_event_and_outcome() {
    let Scenario {
        app, org, records, ..
    } = scenario().await;
    let pick = |indexes: &[usize]| -> Vec<String> {
        indexes
            .iter()
            .map(|i| records[*i]["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let cases: [(&str, &[usize]); 9] = [
        ("event=member.added", &[1, 2, 4]),
        ("event=member.role_changed", &[3]),
        ("event=test.preflight", &[5]),
        ("outcome=failed", &[1, 2]),
        ("outcome=succeeded", &[4, 5]),
        ("outcome=skipped", &[0, 3]),
        ("event=member.added&outcome=succeeded", &[4]),
        ("event=member.removed&outcome=skipped", &[0]),
        ("event=member.removed&outcome=failed", &[]),
    ];
    for (query, expected) in cases {
        let reply = app
            .get(
                &org.path(&format!("/webhook/deliveries?{query}")),
                &org.owner_token,
            )
            .await
            .expect(200);
        let body = reply.json();
        assert_eq!(body["next_cursor"], Value::Null, "{query}: {body}");
        let items = body["items"].as_array().expect("items").clone();
        assert_eq!(ids(&items), pick(expected), "{query}");
    }

    let path = |query: &str| org.path(&format!("/webhook/deliveries?{query}"));
    app.get(&path("outcome=bogus"), &org.owner_token)
        .await
        .problem(400, "VALIDATION_FAILED");
    app.get(&path("outcome=SKIPPED"), &org.owner_token)
        .await
        .problem(400, "VALIDATION_FAILED");
    app.get(&path("event=member.exploded"), &org.owner_token)
        .await
        .problem(400, "UNKNOWN_EVENT");
    app.get(&path("event=nope&outcome=failed"), &org.owner_token)
        .await
        .problem(400, "UNKNOWN_EVENT");
}
}

on_both_engines! {
async fn the_log_pages_newest_first_with_cursors() {
    let Scenario {
        app, org, records, ..
    } = scenario().await;
    let all = ids(&records);

    for limit in 1..=7usize {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut query = format!("limit={limit}");
            if let Some(c) = &cursor {
                query.push_str(&format!("&cursor={c}"));
            }
            let body = app
                .get(
                    &org.path(&format!("/webhook/deliveries?{query}")),
                    &org.owner_token,
                )
                .await
                .expect(200)
                .json();
            pages += 1;
            assert!(pages <= 7, "paging does not end: limit {limit}");
            let items = body["items"].as_array().expect("items").clone();
            seen.extend(ids(&items));
            match body["next_cursor"].as_str() {
                Some(next) => {
                    assert_eq!(items.len(), limit, "a page before the last is full");
                    cursor = Some(next.to_owned());
                }
                None => {
                    assert_eq!(body["next_cursor"], Value::Null);
                    break;
                }
            }
        }
        assert_eq!(
            seen, all,
            "limit {limit}: no overlap, no gaps, newest first"
        );
        assert_eq!(pages, all.len().div_ceil(limit), "limit {limit}");
    }

    // Paging a filtered list.
    let first = app
        .get(
            &org.path("/webhook/deliveries?outcome=skipped&limit=1"),
            &org.owner_token,
        )
        .await
        .expect(200)
        .json();
    assert_eq!(
        ids(first["items"].as_array().unwrap()),
        vec![all[0].clone()]
    );
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let second = app
        .get(
            &org.path(&format!(
                "/webhook/deliveries?outcome=skipped&limit=1&cursor={cursor}"
            )),
            &org.owner_token,
        )
        .await
        .expect(200)
        .json();
    assert_eq!(
        ids(second["items"].as_array().unwrap()),
        vec![all[3].clone()]
    );
    assert_eq!(second["next_cursor"], Value::Null);

    for bad in [
        "cursor=bogus",
        "cursor=AAAA",
        "cursor=%21%21%21",
        "limit=0",
        "limit=201",
        "limit=ten",
    ] {
        app.get(
            &org.path(&format!("/webhook/deliveries?{bad}")),
            &org.owner_token,
        )
        .await
        .problem(400, "VALIDATION_FAILED");
    }
}
}

on_both_engines! {
async fn reading_the_log_needs_settings_read() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    let owner_view = log_until(&app, &org, "the preflight record", |r| r.len() == 1).await;
    let path = org.path("/webhook/deliveries");

    let no_settings = app.role(&org, "Readers", &["org:team:read"]).await;
    let (_, reader) = app.member(&org, &no_settings).await;
    let problem = app.get(&path, &reader).await.problem(403, "FORBIDDEN");
    assert_eq!(problem["missing_permission"], json!("org:settings:read"));

    // Member holds org:settings:read (not sensitive).
    let (_, member) = app.member(&org, &org.member_role).await;
    let body = app.get(&path, &member).await.expect(200).json();
    let items = body["items"].as_array().unwrap();
    assert_eq!(items[items.len() - 1], owner_view[0]);

    let (_, outsider) = app.user("outsider@example.test").await;
    app.get(&path, &outsider).await.problem(404, "NOT_FOUND");
    app.call(Method::GET, &path, None, None)
        .await
        .problem(401, "UNAUTHENTICATED");
}
}

on_both_engines! {
async fn the_log_keeps_only_the_newest_records_per_retention() {
    let app = spawn_app_with(&config(&[("ROLECALL_WEBHOOKS__LOG_RETENTION", "5")])).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let ops = app.role(&org, "Ops", &["org:team:read"]).await;
    let (u0, _) = app.member(&org, &org.member_role).await;
    let mut users = Vec::new();
    for i in 0..5 {
        users.push(app.user(&format!("late-{i}@example.test")).await.0);
    }
    app.setup_webhook(&org, &receiver.url, &["member.removed"])
        .await;

    // 1 preflight + 6 role changes + 5 invitations = 12 records.
    for i in 0..6 {
        let role = if i % 2 == 0 { &ops } else { &org.member_role };
        app.patch(
            &org.path(&format!("/members/{u0}")),
            &org.owner_token,
            json!({"role_id": role}),
        )
        .await
        .expect(200);
    }
    for user in &users {
        app.post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": user, "role_id": org.member_role}),
        )
        .await
        .expect(201);
    }

    let kept = log_until(&app, &org, "the log pruned to the newest 5", |r| {
        r.len() == 5 && r.iter().all(|x| x["event"] == json!("member.added"))
    })
    .await;
    for record in &kept {
        assert_eq!(record["outcome"], json!("skipped"));
        assert_eq!(record["attempt"], Value::Null);
    }
    let times: Vec<&str> = kept
        .iter()
        .map(|r| r["attempted_at"].as_str().unwrap())
        .collect();
    let mut sorted = times.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "newest first");

    // Pruning keeps the newest 5, not fewer, on later runs too.
    actix_web::rt::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(ids(&app.deliveries(&org, "").await), ids(&kept));
}
}

on_both_engines! {
async fn deleting_the_endpoint_drops_a_pending_retry() {
    let app = spawn_app_with(&config(&[("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "1500")])).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    receiver.script(vec![Behavior::status(500)]);

    app.member(&org, &org.member_role).await;
    let received = receiver.wait_for(2, WAIT).await;
    let delivery = received[1].header("x-service-delivery");
    log_until(&app, &org, "attempt 1 logged failed", |r| {
        of_delivery(r, &delivery)
            .iter()
            .any(|x| x["attempt"] == json!(1) && x["outcome"] == json!("failed"))
    })
    .await;

    let reply = app.delete(&org.path("/webhook"), &org.owner_token).await;
    let reply = reply.expect(204);
    assert!(reply.body.is_empty());
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");

    let records = log_until(&app, &org, "the dropped retry logged", |r| {
        of_delivery(r, &delivery)
            .iter()
            .any(|x| x["error"] == json!("endpoint removed"))
    })
    .await;
    let mine = of_delivery(&records, &delivery);
    assert_eq!(mine.len(), 2, "attempt 1 and the dropped retry: {mine:?}");
    let dropped = mine[0];
    assert_eq!(dropped["outcome"], json!("failed"));
    assert_eq!(dropped["error"], json!("endpoint removed"));
    assert_eq!(dropped["event"], json!("member.added"));
    assert_eq!(dropped["response_code"], Value::Null);
    assert_eq!(mine[1]["attempt"], json!(1));
    assert_eq!(mine[1]["response_code"], json!(500));

    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(
        receiver.received().len(),
        2,
        "the retry never reaches the receiver"
    );
    assert_eq!(
        of_delivery(&app.deliveries(&org, "").await, &delivery).len(),
        2
    );
}
}

on_both_engines! {
async fn deleting_the_endpoint_drops_attempts_waiting_in_the_queue() {
    let app = spawn_app_with(&config(&[
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "3000"),
        ("ROLECALL_WEBHOOKS__MAX_IN_FLIGHT_PER_ORG", "1"),
    ]))
    .await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    receiver.set(Behavior::slow(Duration::from_millis(1000)));

    for _ in 0..3 {
        app.member(&org, &org.member_role).await;
    }
    let received = receiver.wait_for(2, WAIT).await;
    let in_flight = received[1].header("x-service-delivery");
    assert_eq!(
        received.len(),
        2,
        "one attempt in flight per org; the others wait"
    );

    app.delete(&org.path("/webhook"), &org.owner_token)
        .await
        .expect(204);
    let records = log_until(&app, &org, "the queued deliveries logged", |r| {
        r.iter()
            .filter(|x| x["error"] == json!("endpoint removed"))
            .count()
            >= 2
            && !of_delivery(r, &in_flight).is_empty()
    })
    .await;
    let dropped: Vec<&Value> = records
        .iter()
        .filter(|x| x["error"] == json!("endpoint removed"))
        .collect();
    assert_eq!(dropped.len(), 2, "records: {records:?}");
    assert_ne!(dropped[0]["delivery_id"], dropped[1]["delivery_id"]);
    for record in &dropped {
        assert_eq!(record["outcome"], json!("failed"));
        assert_eq!(record["event"], json!("member.added"));
        assert_ne!(record["delivery_id"], json!(in_flight));
    }

    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(
        receiver.received().len(),
        2,
        "dropped deliveries never reach the receiver"
    );
}
}

on_both_engines! {
async fn redeliver_sends_the_same_envelope_as_a_new_delivery() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    app.member(&org, &org.member_role).await;
    let original = receiver.wait_for(2, WAIT).await[1].clone();
    let old_id = original.header("x-service-delivery");
    assert_eq!(
        original.header("x-service-signature"),
        signature(&secret, &original.body)
    );
    log_until(&app, &org, "the original delivery", |r| {
        !of_delivery(r, &old_id).is_empty()
    })
    .await;

    let path = org.path(&format!("/webhook/deliveries/{old_id}/redeliver"));
    let reply = app
        .call(Method::POST, &path, Some(&org.owner_token), None)
        .await
        .expect(202);
    let body = reply.json();
    assert_eq!(body.as_object().map(|o| o.len()), Some(1), "body: {body}");
    assert!(is_uuid(&body["delivery_id"]), "body: {body}");
    let new_id = body["delivery_id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, old_id, "a redelivery is a new delivery");

    let again = receiver.wait_for(3, WAIT).await[2].clone();
    assert!(
        again.body == original.body,
        "byte-identical envelope: {:?} vs {:?}",
        String::from_utf8_lossy(&again.body),
        String::from_utf8_lossy(&original.body)
    );
    assert_eq!(again.header("x-service-delivery"), new_id);
    assert_eq!(again.header("webhook-id"), new_id);
    assert_eq!(again.header("x-service-attempt"), "1");
    assert_eq!(again.header("x-service-event"), "member.added");
    assert_eq!(
        again.header("x-service-signature"),
        signature(&secret, &again.body)
    );

    let records = log_until(&app, &org, "the redelivery logged", |r| {
        !of_delivery(r, &new_id).is_empty()
    })
    .await;
    let logged = of_delivery(&records, &new_id);
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0]["attempt"], json!(1));
    assert_eq!(logged[0]["outcome"], json!("succeeded"));
    assert_eq!(logged[0]["event"], json!("member.added"));
    assert_eq!(
        of_delivery(&records, &old_id).len(),
        1,
        "the original is untouched"
    );

    // Signed with the current secret: rotate, then redeliver again.
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
    assert_ne!(new_secret, secret);
    let third_id = app
        .call(Method::POST, &path, Some(&org.owner_token), None)
        .await
        .expect(202)
        .json()["delivery_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(third_id != old_id && third_id != new_id);
    let third = receiver.wait_for(4, WAIT).await[3].clone();
    assert!(third.body == original.body);
    assert_eq!(third.header("x-service-delivery"), third_id);
    assert_eq!(third.header("x-service-attempt"), "1");
    assert_eq!(
        third.header("x-service-signature"),
        signature(&new_secret, &third.body)
    );
}
}

on_both_engines! {
async fn redeliver_needs_settings_manage_and_a_known_delivery() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    // Member lacks org:settings:manage (added before the endpoint: no event).
    let (_, member) = app.member(&org, &org.member_role).await;
    app.setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    app.member(&org, &org.member_role).await;
    let delivered = receiver.wait_for(2, WAIT).await;
    let id = delivered[1].header("x-service-delivery");
    log_until(&app, &org, "the delivery", |r| {
        !of_delivery(r, &id).is_empty()
    })
    .await;
    let redeliver = |org: &Org, id: &str| org.path(&format!("/webhook/deliveries/{id}/redeliver"));

    let problem = app
        .call(Method::POST, &redeliver(&org, &id), Some(&member), None)
        .await
        .problem(403, "FORBIDDEN");
    assert_eq!(problem["missing_permission"], json!("org:settings:manage"));

    // Unknown ids are 404 for the owner; the member gets 403 before the
    // log is read (CONTRACT §11), whether the id exists or not.
    let unknown = rolecall::ids::new_v7().hyphenated().to_string();
    app.call(Method::POST, &redeliver(&org, &unknown), Some(&org.owner_token), None)
        .await
        .problem(404, "NOT_FOUND");
    app.call(Method::POST, &redeliver(&org, &unknown), Some(&member), None)
        .await
        .problem(403, "FORBIDDEN");
    app.call(
        Method::POST,
        &redeliver(&org, "not-a-delivery"),
        Some(&org.owner_token),
        None,
    )
    .await
    .problem(404, "NOT_FOUND");

    // Another organization's delivery is unknown here.
    let other = app.org("enterprise").await;
    app.call(
        Method::POST,
        &redeliver(&other, &id),
        Some(&other.owner_token),
        None,
    )
    .await
    .problem(404, "NOT_FOUND");
    // A non-member of the organization.
    app.call(
        Method::POST,
        &redeliver(&org, &id),
        Some(&other.owner_token),
        None,
    )
    .await
    .problem(404, "NOT_FOUND");
    app.call(Method::POST, &redeliver(&org, &id), None, None)
        .await
        .problem(401, "UNAUTHENTICATED");

    // None of these sent anything.
    actix_web::rt::time::sleep(QUIET).await;
    assert_eq!(receiver.received().len(), 2);
}
}
