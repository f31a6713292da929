//! `Idempotency-Key` on both engines: a retried POST is answered once and
//! replayed, changes nothing more (no second record, event or delivery),
//! refuses another request under the same key (422), waits for a running
//! one (409), keeps no failure of ours, and forgets after the TTL.

use std::time::Duration;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{
    send, spawn_app, spawn_app_with, Org, Reply, Req, TestApp, WEBHOOK_TEST_CONFIG,
};
use crate::receiver::{Behavior, TestReceiver};

/// POSTs `body` to `path` of `org` with `key`.
async fn post_keyed(app: &TestApp, org: &Org, path: &str, key: &str, body: Value) -> Reply {
    keyed(
        app,
        Method::POST,
        &org.path(path),
        &org.owner_token,
        key,
        Some(body),
    )
    .await
}

async fn keyed(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    key: &str,
    body: Option<Value>,
) -> Reply {
    let request = Req::json(method, path, Some(token), body).header("Idempotency-Key", key);
    send(&app.client, &app.address, request).await
}

async fn task_titles(app: &TestApp, org: &Org) -> Vec<String> {
    let page = app
        .get(&org.path("/tasks"), &org.owner_token)
        .await
        .expect(200)
        .json();
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|task| task["title"].as_str().map(str::to_owned))
        .collect()
}

on_both_engines! {
async fn a_retried_create_is_answered_once_and_then_replayed() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let first = post_keyed(&app, &org, "/tasks", "create-1", json!({"title": "once"})).await;
    let created = first.json_with_status(201);
    assert_eq!(first.header("idempotent-replayed"), "");
    let again = post_keyed(&app, &org, "/tasks", "create-1", json!({"title": "once"})).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("idempotent-replayed"), "true");
    assert_eq!(again.header("content-type"), first.header("content-type"));
    assert_eq!(again.json(), created, "the very same answer");
    assert_eq!(task_titles(&app, &org).await, ["once"], "one task");

    // A role: one audit record, however often it is sent.
    for _ in 0..3 {
        post_keyed(&app, &org, "/roles", "role-1", json!({"name": "Auditors"})).await.expect(201);
    }
    let audited = app.audit(&org).await;
    let roles = audited.iter().filter(|r| r["action"] == json!("role.created")).count();
    assert_eq!(roles, 1);

    // A 4xx is kept too: the same key and body get the same refusal.
    let refused = post_keyed(&app, &org, "/roles", "role-2", json!({"name": "auditors"})).await;
    refused.problem(409, "NAME_CONFLICT");
    let replayed = post_keyed(&app, &org, "/roles", "role-2", json!({"name": "auditors"})).await;
    replayed.problem(409, "NAME_CONFLICT");
    assert_eq!(replayed.header("idempotent-replayed"), "true");

    // Another body, or another path, under a used key: refused, nothing made.
    let other = post_keyed(&app, &org, "/tasks", "create-1", json!({"title": "twice"})).await;
    let problem = other.problem(422, "IDEMPOTENCY_KEY_REUSED");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("another request")));
    post_keyed(&app, &org, "/decisions", "create-1", json!({"title": "t", "statement": "s"}))
        .await
        .problem(422, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(task_titles(&app, &org).await, ["once"]);

    // Keys are per token and organization: the same key elsewhere is new.
    let elsewhere = app.org("enterprise").await;
    post_keyed(&app, &elsewhere, "/tasks", "create-1", json!({"title": "once"}))
        .await
        .expect(201);
    assert_eq!(task_titles(&app, &elsewhere).await, ["once"]);
    // Another token of the same owner, in the same organization: new too.
    let second_token = app.create_token(&org.owner_id).await;
    let other_token = keyed(
        &app,
        Method::POST,
        &org.path("/tasks"),
        &second_token,
        "create-1",
        Some(json!({"title": "once"})),
    )
    .await;
    other_token.json_with_status(201);
    assert_eq!(other_token.header("idempotent-replayed"), "");
    assert_eq!(task_titles(&app, &org).await, ["once", "once"]);
}

async fn a_key_that_is_not_1_to_255_printable_characters_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    let org = app.org("free").await;
    let long = "k".repeat(256);
    let refused = post_keyed(&app, &org, "/tasks", &long, json!({"title": "no"})).await;
    let problem = refused.problem(400, "VALIDATION_FAILED");
    assert_eq!(problem["field"], json!("Idempotency-Key"));
    assert!(task_titles(&app, &org).await.is_empty());
    post_keyed(&app, &org, "/tasks", &"k".repeat(255), json!({"title": "yes"}))
        .await
        .expect(201);
}

async fn five_sends_of_one_create_make_one_task_and_one_delivery() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["task.created"]).await;
    let body = json!({"title": "exactly once"});
    let send_until_answered = || async {
        loop {
            let reply = post_keyed(&app, &org, "/tasks", "five", body.clone()).await;
            if reply.status == 409 {
                let problem = reply.problem(409, "IDEMPOTENCY_KEY_IN_PROGRESS");
                assert!(problem["detail"].is_string());
                assert_eq!(reply.header("retry-after"), "1");
                actix_web::rt::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            return reply.json_with_status(201);
        }
    };
    let (a, b, c) = futures_util::join!(send_until_answered(), send_until_answered(), send_until_answered());
    let d = send_until_answered().await;
    let e = send_until_answered().await;
    for other in [&b, &c, &d, &e] {
        assert_eq!(other["id"], a["id"], "one task, answered five times");
    }
    assert_eq!(task_titles(&app, &org).await, ["exactly once"]);
    // The Test's preflight, then the event.
    receiver.wait_for(2, Duration::from_secs(10)).await;
    // Room for a second delivery to arrive, were there one.
    actix_web::rt::time::sleep(Duration::from_millis(1000)).await;
    let delivered: Vec<String> = receiver
        .received()
        .iter()
        .filter(|r| r.json()["event"] == json!("task.created"))
        .map(|r| r.title())
        .collect();
    assert_eq!(delivered, ["exactly once"]);
}

/// POSTs without a body (a capsule's freeze, a rotation) take a key as
/// every other create or change does: sent twice, they run once. But an
/// answer that shows a secret is not kept (a secret is shown once, and
/// never kept in clear): a rotation's retry rotates again.
async fn a_keyed_post_without_a_body_runs_once_and_a_shown_secret_is_not_kept() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["task.created"]).await;
    let rotate_path = org.path("/webhook/rotate");
    let rotate = || keyed(&app, Method::POST, &rotate_path, &org.owner_token, "rotate-1", None);
    let first = rotate().await;
    let secret = first.json_with_status(200)["secret"].clone();
    assert!(secret.is_string());
    let again = rotate().await;
    let second = again.json_with_status(200)["secret"].clone();
    assert_eq!(again.header("idempotent-replayed"), "");
    assert!(second.is_string() && second != secret, "rotated again, not shown again");
    let rotations = app
        .audit(&org)
        .await
        .iter()
        .filter(|r| r["action"] == json!("webhook.rotated"))
        .count();
    assert_eq!(rotations, 2);
    // The first test of an organization shows its secret: not kept either.
    let other = app.org("enterprise").await;
    let test_path = other.path("/webhook/test");
    let body = json!({"url": receiver.url, "events": ["task.created"]});
    let test = || keyed(&app, Method::POST, &test_path, &other.owner_token, "test-1", Some(body.clone()));
    let tested = test().await.json_with_status(200);
    assert!(tested["secret"].is_string(), "{tested}");
    let retested = test().await;
    assert_eq!(retested.header("idempotent-replayed"), "");
    assert_ne!(retested.json_with_status(200)["test_id"], tested["test_id"]);

    // An action committed with its answer: frozen once, replayed; a second
    // key on the frozen capsule changes nothing and is kept all the same.
    let capsule = app
        .post(&org.path("/capsules"), &org.owner_token, json!({"title": "c", "body": "x"}))
        .await
        .json_with_status(201);
    let freeze_path = org.path(&format!("/capsules/{}/freeze", capsule["id"].as_str().expect("id")));
    let freeze = |key: &'static str| keyed(&app, Method::POST, &freeze_path, &org.owner_token, key, None);
    let frozen = freeze("freeze-1").await;
    let frozen_json = frozen.json_with_status(200);
    assert_eq!(frozen_json["frozen"], json!(true));
    let replayed = freeze("freeze-1").await;
    assert_eq!(replayed.header("idempotent-replayed"), "true");
    assert_eq!(replayed.json(), frozen_json);
    let quiet = freeze("freeze-2").await;
    assert_eq!(quiet.json_with_status(200)["frozen"], json!(true));
    assert_eq!(quiet.header("idempotent-replayed"), "");
    let quiet_again = freeze("freeze-2").await;
    assert_eq!(quiet_again.header("idempotent-replayed"), "true");
    assert_eq!(quiet_again.json(), quiet.json());

    // A recovery commits its answer with its jobs and audit record: the
    // retry is replayed, and recovers (and audits) nothing more.
    let endpoint = app.get(&org.path("/webhook"), &org.owner_token).await.expect(200).json();
    let window = json!({"since": endpoint["updated_at"]});
    let recover_path = org.path("/webhook/recover");
    let recover = || keyed(&app, Method::POST, &recover_path, &org.owner_token, "recover-1", Some(window.clone()));
    let recovered = recover().await.json_with_status(202);
    let again = recover().await;
    assert_eq!(again.header("idempotent-replayed"), "true");
    assert_eq!(again.json_with_status(202), recovered);
    let recoveries = app
        .audit(&org)
        .await
        .iter()
        .filter(|r| r["action"] == json!("webhook.recovered"))
        .count();
    assert_eq!(recoveries, 1);
}

async fn a_key_whose_request_runs_is_409_then_replayed_once_answered() {
    let app = spawn_app_with(&[
        ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
        ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "5000"),
    ])
    .await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    // A configured endpoint's test shows no secret, so its answer is kept.
    app.setup_webhook(&org, &receiver.url, &["task.created"]).await;
    receiver.set(Behavior::slow(Duration::from_millis(1500)));
    let body = json!({"url": receiver.url, "events": ["task.created"]});
    let test = || post_keyed(&app, &org, "/webhook/test", "slow-test", body.clone());
    let running = test();
    let later = async {
        actix_web::rt::time::sleep(Duration::from_millis(500)).await;
        test().await
    };
    let (first, during) = futures_util::join!(running, later);
    let answered = first.json_with_status(200);
    during.problem(409, "IDEMPOTENCY_KEY_IN_PROGRESS");
    assert_eq!(during.header("retry-after"), "1");
    let replayed = test().await;
    assert_eq!(replayed.status, 200);
    assert_eq!(replayed.header("idempotent-replayed"), "true");
    assert_eq!(replayed.json(), answered);
    assert_eq!(receiver.received().len(), 2, "the set-up's test, then this one once");
}

async fn an_answer_is_forgotten_after_the_ttl() {
    // 0.0005 h: 1.8 s.
    let app = spawn_app_with(&[("ROLECALL_API__IDEMPOTENCY_TTL_HOURS", "0.0005")]).await;
    let org = app.org("free").await;
    post_keyed(&app, &org, "/tasks", "ttl", json!({"title": "first"})).await.expect(201);
    let soon = post_keyed(&app, &org, "/tasks", "ttl", json!({"title": "first"})).await;
    assert_eq!(soon.header("idempotent-replayed"), "true");
    actix_web::rt::time::sleep(Duration::from_millis(2500)).await;
    let after = post_keyed(&app, &org, "/tasks", "ttl", json!({"title": "first"})).await;
    after.json_with_status(201);
    assert_eq!(after.header("idempotent-replayed"), "", "run again once expired");
    assert_eq!(task_titles(&app, &org).await.len(), 2);
}

async fn admin_creates_take_a_key_scoped_to_the_admin_token() {
    let app = spawn_app().await;
    let body = json!({"email": "keyed@example.test", "name": "Keyed"});
    let first = keyed(&app, Method::POST, "/admin/users", &app.admin, "user-1", Some(body.clone())).await;
    let user = first.json_with_status(201);
    let again = keyed(&app, Method::POST, "/admin/users", &app.admin, "user-1", Some(body)).await;
    assert_eq!(again.header("idempotent-replayed"), "true");
    assert_eq!(again.json(), user, "not 409 EMAIL_TAKEN: the same answer");

    // An organization's create commits its answer with the organization.
    let body = json!({"name": "Keyed org", "plan": "free", "owner_user_id": user["id"]});
    let create = || keyed(&app, Method::POST, "/admin/organizations", &app.admin, "org-1", Some(body.clone()));
    let org = create().await.json_with_status(201);
    let again = create().await;
    assert_eq!(again.header("idempotent-replayed"), "true");
    assert_eq!(again.json_with_status(201), org, "one organization, answered twice");

    // An issued token is a secret shown once: its answer is not kept (the
    // store keeps tokens only as hashes), so a retry issues another.
    let tokens = format!("/admin/users/{}/tokens", user["id"].as_str().expect("id"));
    let issue = || keyed(&app, Method::POST, &tokens, &app.admin, "token-1", Some(json!({"kind": "api"})));
    let issued = issue().await.json_with_status(201);
    let reissued = issue().await;
    assert_eq!(reissued.header("idempotent-replayed"), "");
    assert_ne!(reissued.json_with_status(201)["token"], issued["token"]);
}
}

#[actix_web::test]
async fn a_keyed_body_that_is_not_json_or_too_large_gets_the_handlers_refusal() {
    let app = spawn_app().await;
    let org = app.org("free").await;
    let path = org.path("/tasks");
    let mut text = Req::json(Method::POST, &path, Some(&org.owner_token), None)
        .header("Idempotency-Key", "not-json");
    text.body = Some(b"title=plain".to_vec());
    text.content_type = Some("text/plain");
    send(&app.client, &app.address, text)
        .await
        .problem(415, "UNSUPPORTED_MEDIA_TYPE");
    let huge = json!({"title": "big", "description": "x".repeat(1024 * 1024 + 1)});
    let large = Req::json(Method::POST, &path, Some(&org.owner_token), Some(huge))
        .header("Idempotency-Key", "too-large");
    send(&app.client, &app.address, large)
        .await
        .problem(413, "PAYLOAD_TOO_LARGE");
    assert!(task_titles(&app, &org).await.is_empty());
    // Nothing was kept for those keys: a valid request may use them.
    post_keyed(
        &app,
        &org,
        "/tasks",
        "not-json",
        json!({"title": "now json"}),
    )
    .await
    .expect(201);
}
