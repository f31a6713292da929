//! Webhook deliveries survive the process (CONTRACT §0 SIGTERM, §6 "after a
//! crash or restart every delivery not yet finished is resumed"): the real
//! binary runs as a child, a slow subscriber on loopback builds a backlog,
//! the child is killed (SIGKILL) or stopped (SIGTERM) mid-backlog and
//! restarted on the same data dir, and every event whose request was
//! answered 2xx reaches the subscriber at least once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use actix_web::http::Method;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::helpers::{client, send, spawn_binary, ChildServer, Reply, Req, ADMIN};
use crate::receiver::{Behavior, Received, TestReceiver};

/// A `rolecall` child process (SIGKILLed when dropped).
struct Running {
    server: ChildServer,
}

impl Running {
    fn start(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Running {
            server: spawn_binary(data_dir, env),
        }
    }

    fn address(&self) -> &str {
        &self.server.address
    }
}

/// A JSON request to the child at `address`.
async fn call(
    client: &awc::Client,
    address: &str,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Reply {
    send(client, address, Req::json(method, path, Some(token), body)).await
}

async fn post(client: &awc::Client, address: &str, path: &str, token: &str, body: Value) -> Reply {
    call(client, address, Method::POST, path, token, Some(body)).await
}

fn str_of(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
        .to_owned()
}

/// An organization on the child with `n` users ready to be invited.
struct World {
    base: String,
    owner_token: String,
    member_role: String,
    invitees: Vec<String>,
}

/// Creates an owner, an enterprise organization and `n` users (not members yet).
async fn world(client: &awc::Client, address: &str, tag: &str, n: usize) -> World {
    let owner = post(
        client,
        address,
        "/admin/users",
        ADMIN,
        json!({"email": format!("owner@{tag}.test")}),
    )
    .await
    .expect(201)
    .json();
    let owner_id = str_of(&owner["id"]);
    let token = post(
        client,
        address,
        &format!("/admin/users/{owner_id}/tokens"),
        ADMIN,
        json!({"kind": "api"}),
    )
    .await
    .expect(201)
    .json();
    let owner_token = str_of(&token["token"]);
    let org = post(
        client,
        address,
        "/admin/organizations",
        ADMIN,
        json!({"name": format!("Org {tag}"), "plan": "enterprise", "owner_user_id": owner_id}),
    )
    .await
    .expect(201)
    .json();
    let base = format!("/organizations/{}", str_of(&org["id"]));
    let roles = call(
        client,
        address,
        Method::GET,
        &format!("{base}/roles"),
        &owner_token,
        None,
    )
    .await
    .expect(200)
    .json();
    assert_eq!(roles["items"][1]["name"], json!("Member"), "{roles}");
    let member_role = str_of(&roles["items"][1]["id"]);
    let invitees: Vec<String> = futures_util::stream::iter(0..n)
        .map(|i| async move {
            let user = post(
                client,
                address,
                "/admin/users",
                ADMIN,
                json!({"email": format!("invitee-{i:04}@{tag}.test")}),
            )
            .await
            .expect(201)
            .json();
            str_of(&user["id"])
        })
        .buffered(16)
        .collect()
        .await;
    World {
        base,
        owner_token,
        member_role,
        invitees,
    }
}

/// Tests and saves `url` as the organization's endpoint for `member.added`.
async fn setup_webhook(client: &awc::Client, address: &str, world: &World, url: &str) {
    let test = post(
        client,
        address,
        &format!("{}/webhook/test", world.base),
        &world.owner_token,
        json!({"url": url, "events": ["member.added"]}),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(test["passed"], json!(true), "webhook test failed: {test}");
    call(
        client,
        address,
        Method::PUT,
        &format!("{}/webhook", world.base),
        &world.owner_token,
        Some(json!({"test_id": test["test_id"]})),
    )
    .await
    .expect(200);
}

/// Invites every invitee (16 requests at a time); returns, per user id, the
/// membership the 2xx answer carried. Every invite must be answered 201.
async fn invite_all(client: &awc::Client, address: &str, world: &World) -> BTreeMap<String, Value> {
    let path = format!("{}/members", world.base);
    let replies: Vec<(String, Reply)> = futures_util::stream::iter(world.invitees.iter())
        .map(|user| {
            let path = &path;
            async move {
                let reply = post(
                    client,
                    address,
                    path,
                    &world.owner_token,
                    json!({"user_id": user, "role_id": world.member_role}),
                )
                .await;
                (user.clone(), reply)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut acknowledged = BTreeMap::new();
    for (user, reply) in replies {
        let membership = reply.expect(201).json();
        assert_eq!(membership["user_id"], json!(user), "{membership}");
        acknowledged.insert(user, membership);
    }
    acknowledged
}

/// The `member.added` receipts so far, deduplicated by `X-Service-Delivery`:
/// delivery id → (user id, every receipt of it).
fn member_added(received: &[Received]) -> HashMap<String, (String, Vec<Received>)> {
    let mut by_delivery: HashMap<String, (String, Vec<Received>)> = HashMap::new();
    for r in received
        .iter()
        .filter(|r| r.header("x-service-event") == "member.added")
    {
        let delivery = r.header("x-service-delivery");
        assert!(!delivery.is_empty(), "every delivery carries its id");
        let user = str_of(&r.json()["data"]["user_id"]);
        by_delivery
            .entry(delivery)
            .or_insert_with(|| (user, Vec::new()))
            .1
            .push(r.clone());
    }
    by_delivery
}

/// Distinct users whose `member.added` was received.
fn users_received(received: &[Received]) -> BTreeSet<String> {
    member_added(received)
        .into_values()
        .map(|(user, _)| user)
        .collect()
}

/// Waits until every acknowledged invite was received at least once, then
/// checks what arrived: the right event and data, one delivery id per event,
/// byte-identical bodies under one id, nothing else.
async fn assert_all_delivered(
    receiver: &TestReceiver,
    acknowledged: &BTreeMap<String, Value>,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    loop {
        let got = users_received(&receiver.received());
        let missing: Vec<&String> = acknowledged.keys().filter(|u| !got.contains(*u)).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} acknowledged events never reached the subscriber (e.g. {:?})",
            missing.len(),
            acknowledged.len(),
            &missing[..missing.len().min(5)]
        );
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }

    let received = receiver.received();
    for r in &received {
        let event = r.header("x-service-event");
        assert!(
            event == "member.added" || event == "test.preflight",
            "unexpected event {event}"
        );
        assert_eq!(r.path, "/hook");
    }
    let deliveries = member_added(&received);
    let mut delivery_of_user: HashMap<String, String> = HashMap::new();
    for (delivery, (user, receipts)) in &deliveries {
        let first = &receipts[0];
        for again in &receipts[1..] {
            assert_eq!(
                again.body, first.body,
                "delivery {delivery}: the body is byte-identical on every receipt"
            );
        }
        let body = first.json();
        assert_eq!(body["event"], json!("member.added"));
        assert!(body["occurred_at"].is_string(), "{body}");
        let expected = acknowledged
            .get(user)
            .unwrap_or_else(|| panic!("an event for a user never invited: {user}"));
        assert_eq!(
            &body["data"], expected,
            "the event's data is the membership the invite answered"
        );
        if let Some(other) = delivery_of_user.insert(user.clone(), delivery.clone()) {
            panic!(
                "member.added for {user} arrived under two delivery ids ({other}, {delivery}): \
                 a resumed delivery must keep its X-Service-Delivery so subscribers can dedupe"
            );
        }
    }
    assert_eq!(
        delivery_of_user.len(),
        acknowledged.len(),
        "one delivery per acknowledged invite"
    );
}

/// Bounds a whole test.
async fn bounded<F: std::future::Future<Output = ()>>(limit: Duration, test: F) {
    if actix_web::rt::time::timeout(limit, test).await.is_err() {
        panic!("the test did not finish within {limit:?}");
    }
}

on_both_engines! {
async fn sigkill_mid_backlog_loses_no_acknowledged_event() {
    bounded(Duration::from_secs(60), async {
        const EVENTS: usize = 500;
        let receiver = TestReceiver::start().await;
        // Each attempt succeeds, slowly; two at a time, so a backlog builds.
        receiver.set(Behavior::slow(Duration::from_millis(400)));
        let env = [
            ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
            ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
            ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "2000"),
            ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "200"),
            ("ROLECALL_WEBHOOKS__MAX_IN_FLIGHT_PER_ORG", "2"),
            // On PostgreSQL the restarted process is a new node: it takes
            // the killed one's deliveries over once their leases run out.
            ("ROLECALL_WEBHOOKS__LEASE_MS", "6000"),
        ];
        let dir = tempfile::tempdir().expect("tempdir");
        let http = client();
        let mut server = Running::start(dir.path(), &env);
        let address = server.address().to_owned();

        let world = world(&http, &address, "sigkill", EVENTS).await;
        setup_webhook(&http, &address, &world, &receiver.url).await;
        let acknowledged = invite_all(&http, &address, &world).await;
        assert_eq!(acknowledged.len(), EVENTS);

        // Crash while deliveries are still pending: after a few finished,
        // with two in flight and the rest queued.
        let deadline = Instant::now() + Duration::from_secs(20);
        while users_received(&receiver.received()).len() < 6 {
            assert!(Instant::now() < deadline, "deliveries did not start");
            actix_web::rt::time::sleep(Duration::from_millis(5)).await;
        }
        let before_kill = users_received(&receiver.received()).len();
        assert!(
            before_kill < EVENTS,
            "the backlog drained before the kill ({before_kill} delivered): the test proves nothing"
        );
        server.server.child.kill().expect("SIGKILL sent");
        let exit = server.server.child.wait().expect("child reaped");
        assert!(!exit.success(), "a SIGKILLed server cannot exit 0");
        drop(server);

        // The same subscriber, now quick; the same data dir.
        receiver.set(Behavior::ok());
        let _server = Running::start(dir.path(), &env);
        assert_all_delivered(&receiver, &acknowledged, Duration::from_secs(30)).await;
    })
    .await;
}
}

on_both_engines! {
async fn sigterm_lets_attempts_finish_exits_0_and_loses_nothing() {
    bounded(Duration::from_secs(60), async {
        const EVENTS: usize = 40;
        const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(2500);
        // Attempt timeout + 1 s, plus 3 s of slack for a loaded machine.
        const EXIT_WITHIN: Duration = Duration::from_millis(2500 + 1000 + 3000);
        let receiver = TestReceiver::start().await;
        receiver.set(Behavior::slow(Duration::from_millis(1000)));
        let timeout_ms = ATTEMPT_TIMEOUT.as_millis().to_string();
        let env = [
            ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
            ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
            ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", timeout_ms.as_str()),
            ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "200"),
            ("ROLECALL_WEBHOOKS__MAX_IN_FLIGHT_PER_ORG", "2"),
        ];
        let dir = tempfile::tempdir().expect("tempdir");
        let http = client();
        let mut server = Running::start(dir.path(), &env);
        let address = server.address().to_owned();

        let world = world(&http, &address, "sigterm", EVENTS).await;
        setup_webhook(&http, &address, &world, &receiver.url).await;
        let acknowledged = invite_all(&http, &address, &world).await;
        assert_eq!(acknowledged.len(), EVENTS);

        // Wait until an attempt is in flight (the subscriber holds it 1 s).
        let deadline = Instant::now() + Duration::from_secs(10);
        while member_added(&receiver.received()).is_empty() {
            assert!(Instant::now() < deadline, "no delivery started");
            actix_web::rt::time::sleep(Duration::from_millis(5)).await;
        }
        let in_flight: Vec<String> = member_added(&receiver.received()).into_keys().collect();

        let pid = server.server.child.id();
        let signalled = Instant::now();
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {pid} failed");
        let exit = loop {
            if let Some(exit) = server.server.child.try_wait().expect("try_wait") {
                break exit;
            }
            assert!(
                signalled.elapsed() < Duration::from_secs(15),
                "the server did not exit within 15 s of SIGTERM"
            );
            actix_web::rt::time::sleep(Duration::from_millis(10)).await;
        };
        let took = signalled.elapsed();
        assert!(exit.success(), "SIGTERM must end in exit 0, got {exit}");
        assert!(
            took <= EXIT_WITHIN,
            "exit took {took:?} after SIGTERM; at most the attempt timeout ({ATTEMPT_TIMEOUT:?}) \
             + 1 s (+ 3 s slack) = {EXIT_WITHIN:?}"
        );
        let delivered_before_exit = users_received(&receiver.received()).len();
        assert!(
            delivered_before_exit < EVENTS,
            "the backlog drained before the exit ({delivered_before_exit} delivered): the test proves nothing"
        );
        drop(server);

        receiver.set(Behavior::ok());
        let server = Running::start(dir.path(), &env);
        let address = server.address().to_owned();

        // The attempts in flight at SIGTERM finished (the subscriber answered
        // 200 within the timeout) and were logged before the exit.
        let log = call(
            &http,
            &address,
            Method::GET,
            &format!(
                "{}/webhook/deliveries?limit=200&event=member.added",
                world.base
            ),
            &world.owner_token,
            None,
        )
        .await
        .expect(200)
        .json();
        let records = log["items"].as_array().expect("items").clone();
        for delivery in &in_flight {
            assert!(
                records.iter().any(|r| r["delivery_id"] == json!(delivery)
                    && r["outcome"] == json!("succeeded")
                    && r["attempt"] == json!(1)
                    && r["response_code"] == json!(200)),
                "the attempt of {delivery}, in flight at SIGTERM, was let finish and logged: {log}"
            );
        }

        assert_all_delivered(&receiver, &acknowledged, Duration::from_secs(30)).await;
    })
    .await;
}
}
