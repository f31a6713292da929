//! The backlog waits on disk (CONTRACT §9): while an organization's
//! endpoint is down, the dispatcher holds at most `webhooks.backlog_window`
//! of its deliveries in memory, on start too, and the rest wait in the
//! outbox; once the endpoint answers, every delivery starts in the order
//! its event happened, none lost, across a SIGKILL and a restart. Past a
//! few windows, the backlog moves out of the database's memory into a file
//! of the organization's (`spill/` in the data directory), read back in
//! order.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{eventually, Running, ADMIN};
use crate::receiver::{Behavior, TestReceiver};

const WINDOW: usize = 16;
const EVENTS: usize = 2000;

/// A gauge of `/metrics`, summed over its labels.
async fn gauge(server: &Running, name: &str) -> u64 {
    let text = server.get("/metrics", "unused").await.expect(200);
    String::from_utf8_lossy(&text.body)
        .lines()
        .filter(|line| line.starts_with(name) && !line.starts_with('#'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The backlog files in the data directory `dir`.
fn backlog_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("spill")).map_or(0, |entries| entries.count())
}

/// Deliveries held in memory (due, in flight, waiting for a retry) and
/// deliveries in the outbox.
async fn held_and_stored(server: &Running) -> (u64, u64) {
    let held = gauge(server, "rolecall_delivery_queue_depth").await;
    let stored = gauge(server, "rolecall_outbox_size").await;
    (held, stored)
}

#[actix_web::test]
async fn a_backlog_waits_on_disk_and_is_delivered_in_order_once_the_endpoint_answers() {
    let receiver = TestReceiver::start().await;
    // Down: every request hangs past the attempt timeout.
    receiver.set(Behavior::slow(Duration::from_secs(60)));
    let dir = tempfile::tempdir().expect("tempdir");
    let window = WINDOW.to_string();
    let env = [
        ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
        ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
        ("ROLECALL_WEBHOOKS__BACKLOG_WINDOW", window.as_str()),
        ("ROLECALL_WEBHOOKS__MAX_IN_FLIGHT_PER_ORG", "1"),
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "1000"),
        ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "100"),
    ];
    let mut server = Running::start(dir.path(), &env);
    let (org, token) = server.org(ADMIN, "Backlog").await;
    // The webhook test must pass: answer it at once, then go down again.
    receiver.script(vec![Behavior::ok()]);
    let hook = format!("http://127.0.0.1:{}/hook", receiver.port);
    let test = server
        .post(
            &format!("/organizations/{org}/webhook/test"),
            &token,
            json!({"url": hook, "events": ["task.created"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(test["passed"], json!(true), "{test}");
    server
        .call(
            actix_web::http::Method::PUT,
            &format!("/organizations/{org}/webhook"),
            Some(&token),
            Some(json!({"test_id": test["test_id"]})),
        )
        .await
        .expect(200);

    // Events while the endpoint is down, one after another: creation order.
    let tasks = format!("/organizations/{org}/tasks");
    let mut created = Vec::with_capacity(EVENTS);
    for n in 0..EVENTS {
        let task = server
            .post(&tasks, &token, json!({"title": format!("task {n}")}))
            .await
            .expect(201)
            .json();
        created.push(task["id"].as_str().expect("task id").to_owned());
    }
    let (held, stored) = held_and_stored(&server).await;
    assert!(held <= WINDOW as u64, "held in memory: {held}");
    assert!(stored > (EVENTS - 20) as u64, "in the outbox: {stored}");
    eventually(Duration::from_secs(10), "a backlog file", || async {
        (backlog_files(dir.path()) == 1).then_some(())
    })
    .await;

    // A crash with the backlog queued; the restart holds only the window.
    server.kill_hard();
    let server = Running::start(dir.path(), &env);
    // Counted while the first window is read back from the backlog file,
    // the gauge may miss jobs between the file and the tree for a moment
    // (seen once in a loaded full-suite run: 1,936): the count settles.
    let (held, stored) = eventually(Duration::from_secs(5), "the backlog counted", || async {
        let counted = held_and_stored(&server).await;
        (counted.1 > (EVENTS - 30) as u64).then_some(counted)
    })
    .await;
    assert!(held <= WINDOW as u64, "held after the restart: {held}");
    assert!(
        stored <= EVENTS as u64,
        "in the outbox after the restart: {stored}"
    );

    // The endpoint answers again.
    let recovered_at = Instant::now();
    receiver.set(Behavior::ok());
    eventually(Duration::from_secs(60), "the outbox to empty", || async {
        (held_and_stored(&server).await == (0, 0)).then_some(())
    })
    .await;
    assert_eq!(
        backlog_files(dir.path()),
        0,
        "read to its end, the file goes"
    );

    // Every event was attempted; deliveries started in creation order.
    let received = receiver.received();
    let position = |task: &str| created.iter().position(|id| id == task);
    let mut seen = HashSet::new();
    let mut last = None;
    let mut delivered = HashSet::new();
    for request in &received {
        let body = request.json();
        if body["event"] != json!("task.created") {
            continue;
        }
        let task = body["data"]["id"].as_str().unwrap_or("").to_owned();
        if request.at >= recovered_at {
            delivered.insert(task.clone());
        }
        // First attempts only: a retry or a crash's repeat comes later.
        if !seen.insert(request.header("x-service-delivery")) {
            continue;
        }
        let Some(at) = position(&task) else {
            panic!("a delivery of an unknown task {task}")
        };
        assert!(
            last.is_none_or(|last| at > last),
            "task {at} started after task {last:?}"
        );
        last = Some(at);
    }
    assert_eq!(seen.len(), EVENTS, "one delivery per event, none lost");
    assert!(
        delivered.len() > EVENTS - 30,
        "all but the few attempted while the endpoint was down were delivered after: {}",
        delivered.len()
    );
    let failed = server
        .get(
            &format!("/organizations/{org}/webhook/deliveries?outcome=failed&limit=200"),
            &token,
        )
        .await
        .expect(200)
        .json();
    let failed: Vec<Value> = failed["items"].as_array().cloned().unwrap_or_default();
    assert!(
        failed.len() < 60,
        "only attempts made while the endpoint was down failed: {}",
        failed.len()
    );
}
