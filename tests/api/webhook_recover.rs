//! `POST …/webhook/recover`: one new delivery for every event that failed
//! in a window and has not been delivered since; never twice.

use serde_json::{json, Value};

use crate::helpers::{spawn_app_with, Org, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::{Behavior, Received, TestReceiver};
use crate::webhook_delivery::service_signature;
use crate::webhook_log::{config, log_until};

const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// An app whose endpoint (task.created only) failed both attempts of three
/// tasks: the app, the org, the receiver, the secret and the tasks' envelopes
/// in creation order.
async fn three_failed() -> (TestApp, Org, TestReceiver, String, Vec<Value>) {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("free").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["task.created"])
        .await;
    receiver.set(Behavior::status(503));
    let mut tasks = Vec::new();
    for title in ["one", "two", "three"] {
        let task = app
            .post(
                &org.path("/tasks"),
                &org.owner_token,
                json!({"title": title}),
            )
            .await
            .expect(201)
            .json();
        tasks.push(task);
        // Each task's two attempts end before the next is made: the log's
        // order is the tasks' order.
        let failed = 2 * tasks.len();
        log_until(&app, &org, "both attempts failed", |r| {
            r.iter().filter(|r| r["outcome"] == "failed").count() == failed
        })
        .await;
    }
    // An event the endpoint does not take: a skipped record.
    app.member(&org, &org.member_role).await;
    log_until(&app, &org, "the skipped record", |r| {
        r.iter().any(|r| r["outcome"] == "skipped")
    })
    .await;
    receiver.set(Behavior::ok());
    (app, org, receiver, secret, tasks)
}

/// The attempts received of the task `id`.
fn of_task<'a>(received: &'a [Received], id: &Value) -> Vec<&'a Received> {
    received
        .iter()
        .filter(|r| r.json()["data"]["id"] == *id)
        .collect()
}

/// `POST …/webhook/recover` with `body`, as the owner.
pub async fn recover(app: &TestApp, org: &Org, body: Value) -> crate::helpers::Reply {
    app.post(&org.path("/webhook/recover"), &org.owner_token, body)
        .await
}

/// When the first failed attempt of the task `id` started.
fn failed_at(log: &[Value], id: &Value, received: &[Received]) -> String {
    let delivery = of_task(received, id)[0].header("x-service-delivery");
    log.iter()
        .filter(|r| r["delivery_id"] == delivery.as_str())
        .filter_map(|r| r["attempted_at"].as_str())
        .min()
        .expect("logged")
        .to_owned()
}

#[actix_web::test]
async fn recover_sends_each_event_failed_in_the_window_once_as_a_new_delivery() {
    let (app, org, receiver, secret, tasks) = three_failed().await;
    let before = receiver.received();
    let log = app.deliveries(&org, "").await;
    let since = failed_at(&log, &tasks[0]["id"], &before);
    let third_failed = failed_at(&log, &tasks[2]["id"], &before);

    // Task one is redelivered by hand first, and succeeds.
    let first = of_task(&before, &tasks[0]["id"])[0].header("x-service-delivery");
    app.post(
        &org.path(&format!("/webhook/deliveries/{first}/redeliver")),
        &org.owner_token,
        json!({}),
    )
    .await
    .expect(202);
    receiver.wait_for(before.len() + 1, WAIT).await;
    // Its success is logged after the endpoint answered: until then task
    // one still counts as failed (seen once in a loaded full run: count 2).
    log_until(&app, &org, "the redelivery's success", |r| {
        r.iter()
            .any(|r| r["outcome"] == "succeeded" && r["event"] == "task.created")
    })
    .await;

    // The window ends before task three failed: only task two is recovered.
    let answer = recover(&app, &org, json!({"since": since, "until": third_failed}))
        .await
        .expect(202)
        .json();
    assert_eq!(answer, json!({"count": 1}));
    let received = receiver.wait_for(before.len() + 2, WAIT).await;
    let sent = received.last().expect("the recovery");
    let original = of_task(&before, &tasks[1]["id"]);
    assert_eq!(sent.body, original[0].body, "the same envelope");
    assert_ne!(
        sent.header("x-service-delivery"),
        original[0].header("x-service-delivery"),
        "a new delivery id"
    );
    assert_eq!(sent.header("x-service-attempt"), "1");
    assert_eq!(
        sent.header("x-service-signature"),
        service_signature(&secret, &sent.body)
    );

    // Without `until`: task three only; then nothing is left.
    let answer = recover(&app, &org, json!({"since": since}))
        .await
        .expect(202)
        .json();
    assert_eq!(answer, json!({"count": 1}));
    let received = receiver.wait_for(before.len() + 3, WAIT).await;
    assert_eq!(of_task(&received, &tasks[2]["id"]).len(), 3);
    log_until(&app, &org, "the recoveries succeeded", |r| {
        r.iter().filter(|r| r["outcome"] == "succeeded").count() == 4
    })
    .await;
    let answer = recover(&app, &org, json!({"since": since}))
        .await
        .expect(202)
        .json();
    assert_eq!(answer, json!({"count": 0}));
    actix_web::rt::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        receiver.received().len(),
        before.len() + 3,
        "nothing more sent"
    );
    // Skipped records are never recovered: member.added was not sent.
    assert!(receiver
        .received()
        .iter()
        .all(|r| r.json()["event"] != "member.added"));

    // Audited, with the window and the count; newest first.
    let audit = app.audit(&org).await;
    let recovered: Vec<&Value> = audit
        .iter()
        .filter(|r| r["action"] == "webhook.recovered")
        .collect();
    assert_eq!(recovered.len(), 3);
    assert_eq!(recovered[2]["after"]["count"], 1);
    assert_eq!(recovered[2]["after"]["since"], json!(since));
    assert_eq!(recovered[2]["after"]["until"], json!(third_failed));
    assert_eq!(recovered[0]["after"]["count"], 0);
    assert_eq!(recovered[0]["target_type"], "webhook");
    assert_eq!(recovered[0]["actor_user_id"], json!(org.owner_id));
}

#[actix_web::test]
async fn two_recoveries_at_once_queue_each_event_once() {
    let (app, org, receiver, _, _) = three_failed().await;
    let before = receiver.received().len();
    let body = json!({"since": "2020-01-01T00:00:00Z"});
    let (a, b) = futures_util::join!(recover(&app, &org, body.clone()), recover(&app, &org, body));
    let counts = [a.expect(202).json(), b.expect(202).json()];
    let total: u64 = counts.iter().filter_map(|c| c["count"].as_u64()).sum();
    assert_eq!(total, 3, "{counts:?}");
    receiver.wait_for(before + 3, WAIT).await;
    actix_web::rt::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), before + 3, "no event sent twice");
}

#[actix_web::test]
async fn a_window_reaching_past_the_log_retention_is_refused() {
    // The log keeps 4 records; the test's ping and six failed attempts make 7.
    let app = spawn_app_with(&config(&[("ROLECALL_WEBHOOKS__LOG_RETENTION", "4")])).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("free").await;
    app.setup_webhook(&org, &receiver.url, &["task.created"])
        .await;
    receiver.set(Behavior::status(503));
    for title in ["one", "two", "three"] {
        app.post(
            &org.path("/tasks"),
            &org.owner_token,
            json!({"title": title}),
        )
        .await
        .expect(201);
    }
    receiver.wait_for(7, WAIT).await;
    log_until(&app, &org, "the log at its retention", |r| {
        r.len() >= 4 && r.iter().all(|r| r["outcome"] == "failed")
    })
    .await;
    receiver.set(Behavior::ok());
    let before = receiver.received().len();
    let refused = recover(&app, &org, json!({"since": "2020-01-01T00:00:00Z"}))
        .await
        .expect(400)
        .json();
    assert_eq!(refused["code"], "VALIDATION_FAILED");
    assert_eq!(refused["field"], "since");
    let detail = refused["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("keeps the newest 4 records"), "{detail}");
    // Nothing was queued or audited.
    actix_web::rt::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), before);
    assert!(app
        .audit(&org)
        .await
        .iter()
        .all(|r| r["action"] != "webhook.recovered"));
}

#[actix_web::test]
async fn recover_checks_its_caller_its_endpoint_and_its_window() {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("free").await;
    let since = json!({"since": "2020-01-01T00:00:00Z"});
    // No endpoint: 404.
    let missing = recover(&app, &org, since.clone()).await.expect(404).json();
    assert_eq!(missing["code"], "NOT_FOUND");
    app.setup_webhook(&org, &receiver.url, &["task.created"])
        .await;
    // A member without org:settings:manage: 403; no token: 401.
    let (_, member) = app.member(&org, &org.member_role).await;
    app.post(&org.path("/webhook/recover"), &member, since.clone())
        .await
        .expect(403);
    app.post(&org.path("/webhook/recover"), "nope", since.clone())
        .await
        .expect(401);
    // Bad windows: 400 naming the field.
    let future = "2999-01-01T00:00:00Z";
    for (body, field) in [
        (json!({}), None),
        (json!({"since": "yesterday"}), Some("since")),
        (json!({"since": 5}), None),
        (json!({"since": future}), Some("since")),
        (
            json!({"since": "2024-01-02T00:00:00Z", "until": "2024-01-01T00:00:00Z"}),
            Some("until"),
        ),
        (
            json!({"since": "2024-01-01T00:00:00Z", "until": "2024-01-01T00:00:00Z"}),
            Some("until"),
        ),
        (
            json!({"since": "2024-01-01T00:00:00Z", "until": "soon"}),
            Some("until"),
        ),
        (json!({"since": "2024-01-01T00:00:00Z", "extra": 1}), None),
        (
            json!({"since": "2024-01-01T00:00:00Z", "until": null}),
            None,
        ),
    ] {
        let problem = recover(&app, &org, body.clone()).await.expect(400).json();
        assert_eq!(problem["code"], "VALIDATION_FAILED", "{body}");
        if let Some(field) = field {
            assert_eq!(problem["field"], field, "{body}");
        }
    }
    // The Owner, with nothing failed: 202, count 0.
    let answer = recover(&app, &org, since).await.expect(202).json();
    assert_eq!(answer, json!({"count": 0}));
}
