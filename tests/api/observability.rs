//! Observability: `/metrics` agrees with the delivery log and the requests
//! made, the metrics token guards it, JSON logs carry request ids, and not
//! even trace-level logs contain a secret.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{
    client, eventually, send, spawn_app, spawn_app_with, spawn_binary_capturing, CapturedOutput,
    ChildServer, Org, Reply, Req, TestApp, ADMIN, WEBHOOK_TEST_CONFIG,
};
use crate::receiver::{Behavior, Received, TestReceiver};

/// The exposition format's content type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

// ---------------------------------------------------------------------------
// A small parser for the Prometheus text exposition.
// ---------------------------------------------------------------------------

/// One scrape: every sample as (metric name, labels, value).
struct Scrape {
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
    text: String,
}

impl Scrape {
    /// Parses the text format (label values may hold `{`, `}`, `,` and escapes).
    fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let name_end = line
                .find(['{', ' '])
                .unwrap_or_else(|| panic!("no value in sample line {line:?}"));
            let name = line[..name_end].to_owned();
            let mut labels = BTreeMap::new();
            let mut rest = &line[name_end..];
            if rest.starts_with('{') {
                let mut chars = rest[1..].char_indices();
                let mut key = String::new();
                let end = loop {
                    let (i, c) = chars.next().unwrap_or_else(|| panic!("unclosed {line:?}"));
                    match c {
                        '}' => break i + 2,
                        ',' | ' ' => {}
                        '=' => {
                            assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line:?}");
                            let mut value = String::new();
                            loop {
                                let (_, c) = chars.next().unwrap_or_else(|| panic!("{line:?}"));
                                match c {
                                    '"' => break,
                                    '\\' => match chars.next().map(|(_, c)| c) {
                                        Some('n') => value.push('\n'),
                                        Some(other) => value.push(other),
                                        None => panic!("{line:?}"),
                                    },
                                    other => value.push(other),
                                }
                            }
                            labels.insert(std::mem::take(&mut key), value);
                        }
                        other => key.push(other),
                    }
                };
                rest = &rest[end..];
            }
            let value = rest.split_whitespace().next().unwrap_or("");
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v
                    .parse::<f64>()
                    .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}")),
            };
            samples.push((name, labels, value));
        }
        Scrape {
            samples,
            text: text.to_owned(),
        }
    }

    /// Every sample of `name` (labels, value).
    fn series(&self, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        self.samples
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, l, v)| (l.clone(), *v))
            .collect()
    }

    /// The sample of `name` with exactly these labels, if any.
    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .iter()
            .find(|(n, l, _)| n == name && *l == wanted)
            .map(|(_, _, v)| *v)
    }

    /// The sample of `name` with exactly these labels; panics when absent.
    #[track_caller]
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.find(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?} in the scrape:\n{}", self.text))
    }
}

async fn scrape(app: &TestApp) -> Scrape {
    let reply = app
        .call(Method::GET, "/metrics", None, None)
        .await
        .expect(200);
    assert_eq!(reply.header("content-type"), PROMETHEUS_TEXT);
    Scrape::parse(&String::from_utf8_lossy(&reply.body))
}

// ---------------------------------------------------------------------------
// 1. Delivery counters agree with the delivery log.
// ---------------------------------------------------------------------------

/// Every record of the org's delivery log, paging with `limit=200&cursor=`.
async fn whole_delivery_log(app: &TestApp, org: &Org) -> (Vec<Value>, usize) {
    let mut records = Vec::new();
    let mut pages = 0;
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => org.path("/webhook/deliveries?limit=200"),
            Some(c) => org.path(&format!("/webhook/deliveries?limit=200&cursor={c}")),
        };
        let page = app.get(&path, &org.owner_token).await.expect(200).json();
        pages += 1;
        records.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages < 100, "the delivery log does not end");
    }
    (records, pages)
}

/// (outcome, attempt label) -> count, attempt label "1", "2" or "none".
type Tally = BTreeMap<(String, String), u64>;

fn tally_log(records: &[Value]) -> Tally {
    let mut tally = Tally::new();
    for record in records {
        let outcome = record["outcome"].as_str().expect("outcome").to_owned();
        let attempt = match &record["attempt"] {
            Value::Null => "none".to_owned(),
            n => n.as_u64().expect("attempt number").to_string(),
        };
        *tally.entry((outcome, attempt)).or_default() += 1;
    }
    tally
}

fn count(tally: &Tally, outcome: &str, attempt: &str) -> u64 {
    tally
        .get(&(outcome.to_owned(), attempt.to_owned()))
        .copied()
        .unwrap_or(0)
}

async fn create_task(app: &TestApp, org: &Org, i: usize) {
    app.post(
        &org.path("/tasks"),
        &org.owner_token,
        json!({"title": format!("task {i}")}),
    )
    .await
    .expect(201);
}

#[actix_web::test]
async fn metrics_delivery_counters_equal_the_delivery_log() {
    const DOWN_TASKS: usize = 3; // both attempts fail
    const TASKS: usize = 180; // the burst (subscribed)
    const MEMORIES: usize = 18; // unsubscribed: skipped records
    const SCRIPTED_FAILURES: usize = 5; // the burst's first answers are 500

    // A generous attempt timeout, so that every attempt's outcome is the
    // receiver's answer (which the test knows) and never a timeout.
    let mut config = WEBHOOK_TEST_CONFIG.to_vec();
    config.push(("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "5000"));
    let app = spawn_app_with(&config).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["task.created"])
        .await;
    let preflight = receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(preflight[0].header("x-service-event"), "test.preflight");

    // Phase 1: the endpoint is down, so attempt 1 and the retry both fail.
    receiver.set(Behavior::status(500));
    for i in 0..DOWN_TASKS {
        create_task(&app, &org, i).await;
    }
    eventually(
        Duration::from_secs(10),
        "both attempts of the first tasks to be logged as failed",
        || async {
            let failed = app.deliveries(&org, "&outcome=failed").await;
            (failed.len() == 2 * DOWN_TASKS).then_some(())
        },
    )
    .await;
    let phase2_start = receiver.received().len();
    assert_eq!(phase2_start, 1 + 2 * DOWN_TASKS);

    // Phase 2: a burst; the first few answers are 500 (retried), then 200.
    receiver.set(Behavior::ok());
    receiver.script(vec![Behavior::status(500); SCRIPTED_FAILURES]);
    for i in 0..TASKS {
        create_task(&app, &org, DOWN_TASKS + i).await;
        if i % 10 == 0 {
            app.post(
                &org.path("/memories"),
                &org.owner_token,
                json!({"content": format!("memory {i}")}),
            )
            .await
            .expect(201);
        }
    }
    // The receiver knows what it answered: phase 1 all 500, then the first
    // SCRIPTED_FAILURES of phase 2, then 200. Each failed attempt 1 has a retry.
    let received: Vec<Received> = eventually(
        Duration::from_secs(15),
        "every attempt of the burst to reach the receiver",
        || async {
            let all = receiver.received();
            let phase2 = &all[phase2_start..];
            let failed_first = phase2
                .iter()
                .take(SCRIPTED_FAILURES)
                .filter(|r| r.header("x-service-attempt") == "1")
                .count();
            (phase2.len() == TASKS + failed_first).then_some(all)
        },
    )
    .await;
    let mut expected = Tally::new();
    for (i, request) in received.iter().enumerate() {
        let outcome = if i == 0 || i >= phase2_start + SCRIPTED_FAILURES {
            "succeeded"
        } else {
            "failed"
        };
        let attempt = request.header("x-service-attempt");
        assert!(attempt == "1" || attempt == "2", "attempt {attempt:?}");
        *expected.entry((outcome.to_owned(), attempt)).or_default() += 1;
    }
    *expected
        .entry(("skipped".to_owned(), "none".to_owned()))
        .or_default() += MEMORIES as u64;
    let expected_total: u64 = expected.values().sum();

    // The log is complete once it holds one record per attempt and per skip.
    let (records, pages) = eventually(
        Duration::from_secs(10),
        "the delivery log to be complete",
        || async {
            let (records, pages) = whole_delivery_log(&app, &org).await;
            (records.len() as u64 == expected_total).then_some((records, pages))
        },
    )
    .await;
    assert!(
        pages >= 2,
        "the log must span pages ({} records)",
        records.len()
    );
    let mut ids: Vec<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), records.len(), "paging repeated a record");
    let preflights: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == json!("test.preflight"))
        .collect();
    assert_eq!(
        preflights.len(),
        1,
        "the preflight is in the org's log once"
    );
    assert_eq!(
        (&preflights[0]["outcome"], &preflights[0]["attempt"]),
        (&json!("succeeded"), &json!(1))
    );
    let log = tally_log(&records);
    assert_eq!(
        log, expected,
        "the delivery log disagrees with the receiver"
    );
    // The scenario covers every series.
    assert_eq!(count(&log, "skipped", "none"), MEMORIES as u64);
    assert_eq!(
        count(&log, "failed", "1") + count(&log, "succeeded", "1"),
        1 + (DOWN_TASKS + TASKS) as u64,
        "one attempt 1 per task plus the preflight"
    );
    assert!(
        count(&log, "failed", "1") >= (DOWN_TASKS + 1) as u64,
        "{log:?}"
    );
    assert!(count(&log, "failed", "2") >= DOWN_TASKS as u64, "{log:?}");
    assert!(count(&log, "succeeded", "2") >= 1, "{log:?}");

    // Records are counted right after they are stored: allow that instant.
    let deliveries_of = |s: &Scrape| -> Tally {
        s.series("rolecall_deliveries_total")
            .into_iter()
            .map(|(labels, value)| {
                (
                    (labels["outcome"].clone(), labels["attempt"].clone()),
                    value as u64,
                )
            })
            .filter(|(_, value)| *value > 0)
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let metrics = loop {
        let metrics = scrape(&app).await;
        if deliveries_of(&metrics) == log || Instant::now() > deadline {
            break metrics;
        }
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    };
    for (outcome, attempt) in [
        ("succeeded", "1"),
        ("succeeded", "2"),
        ("failed", "1"),
        ("failed", "2"),
        ("skipped", "none"),
    ] {
        assert_eq!(
            metrics.value(
                "rolecall_deliveries_total",
                &[("outcome", outcome), ("attempt", attempt)]
            ),
            count(&log, outcome, attempt) as f64,
            "rolecall_deliveries_total{{outcome={outcome},attempt={attempt}}}"
        );
    }
    let exported: f64 = metrics
        .series("rolecall_deliveries_total")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(
        exported,
        records.len() as f64,
        "no other series counts records"
    );
    for outcome in ["succeeded", "failed"] {
        assert_eq!(
            metrics.value(
                "rolecall_delivery_attempt_duration_seconds_count",
                &[("outcome", outcome)]
            ),
            (count(&log, outcome, "1") + count(&log, outcome, "2")) as f64,
            "attempt-duration observations for {outcome}"
        );
        assert_eq!(
            metrics.value(
                "rolecall_delivery_attempt_duration_seconds_bucket",
                &[("outcome", outcome), ("le", "+Inf")]
            ),
            (count(&log, outcome, "1") + count(&log, outcome, "2")) as f64,
        );
    }
    assert_eq!(
        metrics.find(
            "rolecall_delivery_attempt_duration_seconds_count",
            &[("outcome", "skipped")]
        ),
        None,
        "skipped records are not attempts"
    );
    for state in ["ready", "in_flight", "scheduled"] {
        assert_eq!(
            metrics.value("rolecall_delivery_queue_depth", &[("state", state)]),
            0.0,
            "queue depth {state} once everything is delivered"
        );
    }
    assert_eq!(metrics.value("rolecall_outbox_size", &[]), 0.0);
    assert_eq!(
        metrics.value("rolecall_org_actors", &[]),
        1.0,
        "this server has exactly one organization, and it was just used"
    );
    assert!(metrics.value("rolecall_storage_size_bytes", &[]) > 0.0);

    // HTTP counters, by route template.
    let tasks = [
        ("method", "POST"),
        ("route", "/organizations/{org_id}/tasks"),
    ];
    assert_eq!(
        metrics.value(
            "rolecall_http_requests_total",
            &[tasks[0], tasks[1], ("status", "201")]
        ),
        (DOWN_TASKS + TASKS) as f64
    );
    assert_eq!(
        metrics.value("rolecall_http_request_duration_seconds_count", &tasks),
        (DOWN_TASKS + TASKS) as f64
    );
    assert_eq!(
        metrics.value(
            "rolecall_http_requests_total",
            &[
                ("method", "POST"),
                ("route", "/organizations/{org_id}/memories"),
                ("status", "201")
            ]
        ),
        MEMORIES as f64
    );
    for (method, route) in [
        ("POST", "/organizations/{org_id}/webhook/test"),
        ("PUT", "/organizations/{org_id}/webhook"),
    ] {
        assert_eq!(
            metrics.value(
                "rolecall_http_requests_total",
                &[("method", method), ("route", route), ("status", "200")]
            ),
            1.0,
            "{method} {route}"
        );
    }
    assert_eq!(
        metrics.find(
            "rolecall_http_requests_total",
            &[("method", "GET"), ("route", "unmatched"), ("status", "404")]
        ),
        None
    );

    // Unmatched paths share one label; /metrics counts itself.
    for path in ["/nope", &format!("/nope/{}", org.id)] {
        app.call(Method::GET, path, None, None)
            .await
            .problem(404, "NOT_FOUND");
    }
    // A scrape is counted once answered, so it does not see itself.
    let scrapes_before = metrics
        .find(
            "rolecall_http_requests_total",
            &[("method", "GET"), ("route", "/metrics"), ("status", "200")],
        )
        .unwrap_or(0.0);
    let later = scrape(&app).await;
    assert_eq!(
        later.value(
            "rolecall_http_requests_total",
            &[("method", "GET"), ("route", "unmatched"), ("status", "404")]
        ),
        2.0
    );
    assert_eq!(
        later.value(
            "rolecall_http_requests_total",
            &[("method", "GET"), ("route", "/metrics"), ("status", "200")]
        ),
        scrapes_before + 1.0
    );
    assert!(
        !later.text.contains(&org.id),
        "ids never become label values"
    );
}

// ---------------------------------------------------------------------------
// 2. The metrics token.
// ---------------------------------------------------------------------------

#[actix_web::test]
async fn metrics_token_restricts_the_endpoint() {
    let token = format!("metrics-{}", rolecall::ids::new_v7().simple());
    let app = spawn_app_with(&[("ROLECALL_METRICS__TOKEN", &token)]).await;

    let missing = app.call(Method::GET, "/metrics", None, None).await;
    missing.problem(401, "UNAUTHENTICATED");
    assert_eq!(missing.header("www-authenticate"), "Bearer");
    for wrong in ["wrong-token", ADMIN, &format!("{token}x")] {
        let reply = app.get("/metrics", wrong).await;
        reply.problem(401, "UNAUTHENTICATED");
        assert_eq!(reply.header("www-authenticate"), "Bearer");
    }
    let basic = app
        .raw(Req {
            method: Method::GET,
            path: "/metrics".into(),
            token: None,
            body: None,
            content_type: None,
            headers: vec![("Authorization", format!("Basic {token}"))],
        })
        .await;
    basic.problem(401, "UNAUTHENTICATED");

    let ok = app.get("/metrics", &token).await.expect(200);
    assert_eq!(ok.header("content-type"), PROMETHEUS_TEXT);
    let metrics = Scrape::parse(&String::from_utf8_lossy(&ok.body));
    assert!(metrics
        .text
        .contains("# TYPE rolecall_http_requests_total counter"));
    assert_eq!(
        metrics.value(
            "rolecall_http_requests_total",
            &[("method", "GET"), ("route", "/metrics"), ("status", "401")]
        ),
        5.0,
        "the refused scrapes are counted"
    );
    assert!(!metrics.text.contains(&token), "the token is not exported");

    // Without the setting the endpoint is open, whatever is sent.
    let open = spawn_app().await;
    let reply = open
        .call(Method::GET, "/metrics", None, None)
        .await
        .expect(200);
    assert_eq!(reply.header("content-type"), PROMETHEUS_TEXT);
    assert!(String::from_utf8_lossy(&reply.body).contains("rolecall_outbox_size 0"));
    let reply = open.get("/metrics", "anything").await.expect(200);
    assert_eq!(reply.header("content-type"), PROMETHEUS_TEXT);
}

// ---------------------------------------------------------------------------
// The real binary, with its output kept.
// ---------------------------------------------------------------------------

/// A `rolecall` child process (SIGKILLed when dropped) whose output is captured.
struct Logged {
    server: ChildServer,
    output: Option<CapturedOutput>,
    client: awc::Client,
}

impl Logged {
    fn start(data_dir: &Path, env: &[(&str, &str)]) -> Logged {
        let (server, output) = spawn_binary_capturing(data_dir, env);
        Logged {
            server,
            output: Some(output),
            client: client(),
        }
    }

    /// Any request, with extra headers.
    async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
        headers: Vec<(&str, String)>,
    ) -> Reply {
        let req = headers.into_iter().fold(
            Req::json(method, path, token, body),
            |req, (name, value)| req.header(name, value),
        );
        send(&self.client, &self.server.address, req).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        self.send(method, path, token, body, Vec::new()).await
    }

    async fn get(&self, path: &str, token: &str) -> Reply {
        self.call(Method::GET, path, Some(token), None).await
    }

    async fn post(&self, path: &str, token: &str, body: Value) -> Reply {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    /// SIGTERM, wait for exit 0 (at most 10 s), then every line written:
    /// (stdout, stderr).
    async fn stop(mut self) -> (Vec<String>, Vec<String>) {
        let pid = self.server.child.id();
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(10);
        let exit = loop {
            if let Some(exit) = self.server.child.try_wait().expect("try_wait") {
                break exit;
            }
            assert!(Instant::now() < deadline, "no exit within 10 s of SIGTERM");
            actix_web::rt::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(exit.success(), "graceful shutdown must exit 0, got {exit}");
        self.output.take().expect("output").finish()
    }
}

fn str_of(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
        .to_owned()
}

/// A user with an API token, made with `admin`: (user id, token id, token).
async fn user(server: &Logged, admin: &str, email: &str) -> (String, String, String) {
    let user = server
        .post("/admin/users", admin, json!({"email": email}))
        .await
        .expect(201)
        .json();
    let id = str_of(&user["id"]);
    let token = server
        .post(
            &format!("/admin/users/{id}/tokens"),
            admin,
            json!({"kind": "api", "name": "obs"}),
        )
        .await
        .expect(201)
        .json();
    (id, str_of(&token["id"]), str_of(&token["token"]))
}

/// An enterprise org owned by `owner`: its id.
async fn enterprise_org(server: &Logged, admin: &str, owner: &str) -> String {
    let org = server
        .post(
            "/admin/organizations",
            admin,
            json!({"name": "Observed", "plan": "enterprise", "owner_user_id": owner}),
        )
        .await
        .expect(201)
        .json();
    str_of(&org["id"])
}

// ---------------------------------------------------------------------------
// 3. JSON logs and request ids.
// ---------------------------------------------------------------------------

/// Parses every line as a JSON object with string `timestamp`, `level` and
/// `message`.
#[track_caller]
fn json_lines(lines: &[String]) -> Vec<serde_json::Map<String, Value>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line {i} is not JSON ({e}): {line}"));
            let object = value
                .as_object()
                .unwrap_or_else(|| panic!("stdout line {i} is not an object: {line}"))
                .clone();
            for key in ["timestamp", "level", "message"] {
                assert!(
                    object.get(key).is_some_and(Value::is_string),
                    "stdout line {i} has no string {key:?}: {line}"
                );
            }
            object
        })
        .collect()
}

/// The access lines (`"message":"request"`) with this `request_id`.
fn access_lines<'a>(
    lines: &'a [serde_json::Map<String, Value>],
    request_id: &str,
) -> Vec<&'a serde_json::Map<String, Value>> {
    lines
        .iter()
        .filter(|l| {
            l["message"] == json!("request") && l.get("request_id") == Some(&json!(request_id))
        })
        .collect()
}

#[actix_web::test]
async fn json_logs_parse_line_by_line_and_carry_the_request_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Logged::start(
        dir.path(),
        &[
            ("ROLECALL_LOG__FORMAT", "json"),
            ("ROLECALL_LOG__LEVEL", "info"),
        ],
    );
    let tag = rolecall::ids::new_v7().simple().to_string();
    let (owner, _, token) = user(&server, ADMIN, &format!("obs-{tag}@example.test")).await;
    let org = enterprise_org(&server, ADMIN, &owner).await;

    let health_id = format!("obs-test-health-{tag}");
    let health = server
        .send(
            Method::GET,
            "/healthz",
            None,
            None,
            vec![("X-Request-Id", health_id.clone())],
        )
        .await
        .expect(200);
    assert_eq!(health.header("x-request-id"), health_id);

    let role_id = format!("obs-test-role-{tag}");
    let created = server
        .send(
            Method::POST,
            &format!("/organizations/{org}/roles"),
            Some(&token),
            Some(json!({"name": "Observer", "permissions": ["org:team:read"]})),
            vec![("X-Request-Id", role_id.clone())],
        )
        .await
        .expect(201);
    assert_eq!(created.header("x-request-id"), role_id);
    let role = str_of(&created.json()["id"]);

    let refused_id = format!("obs-test-refused-{tag}");
    let refused = server
        .send(
            Method::GET,
            &format!("/organizations/{org}/roles/{role}"),
            Some("rc_not-a-token"),
            None,
            vec![("X-Request-Id", refused_id.clone())],
        )
        .await;
    refused.problem(401, "UNAUTHENTICATED");
    assert_eq!(refused.header("x-request-id"), refused_id);

    // Unacceptable ids are replaced by a generated one (a UUID).
    let long_id = format!("obs-test-{}", "x".repeat(191));
    assert_eq!(long_id.len(), 200);
    let mut generated = Vec::new();
    for bad in [long_id.clone(), format!("obs-test two words {tag}")] {
        let reply = server
            .send(
                Method::GET,
                "/healthz",
                None,
                None,
                vec![("X-Request-Id", bad.clone())],
            )
            .await
            .expect(200);
        let echoed = reply.header("x-request-id");
        assert_ne!(echoed, bad);
        assert!(
            uuid::Uuid::parse_str(&echoed).is_ok(),
            "a generated id is a UUID, got {echoed:?}"
        );
        generated.push(echoed);
    }
    assert_ne!(generated[0], generated[1]);
    // No id at all: one is generated too.
    let plain = server
        .call(Method::GET, "/healthz", None, None)
        .await
        .expect(200);
    assert!(uuid::Uuid::parse_str(&plain.header("x-request-id")).is_ok());

    let audit = server
        .get(
            &format!("/organizations/{org}/audit-log?action=role.created"),
            &token,
        )
        .await
        .expect(200)
        .json();
    let records = audit["items"].as_array().expect("items");
    assert_eq!(records.len(), 1, "{audit}");
    assert_eq!(records[0]["target_id"], json!(role));
    assert_eq!(records[0]["request_id"], json!(role_id));

    let (stdout, stderr) = server.stop().await;
    println!(
        "captured {} stdout and {} stderr lines",
        stdout.len(),
        stderr.len()
    );
    let lines = json_lines(&stdout);
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("listening on "))),
        "the 'listening on' line is captured"
    );

    for (id, method, path, route, status) in [
        (&health_id, "GET", "/healthz".to_owned(), "/healthz", 200),
        (
            &role_id,
            "POST",
            format!("/organizations/{org}/roles"),
            "/organizations/{org_id}/roles",
            201,
        ),
        (
            &refused_id,
            "GET",
            format!("/organizations/{org}/roles/{role}"),
            "/organizations/{org_id}/roles/{role_id}",
            401,
        ),
    ] {
        let access = access_lines(&lines, id);
        assert_eq!(access.len(), 1, "one access line for {id}: {access:?}");
        let line = access[0];
        assert_eq!(line["level"], json!("INFO"), "{line:?}");
        assert_eq!(line["route"], json!(route), "{line:?}");
        assert_eq!(line["status"], json!(status), "{line:?}");
        assert!(line["latency_ms"].is_number(), "{line:?}");
        assert_eq!(
            line["span"],
            json!({"name": "request", "request_id": id, "method": method, "path": path}),
            "{line:?}"
        );
    }
    // The generated ids are the ones logged, and the rejected ones never are.
    for id in &generated {
        let access = access_lines(&lines, id);
        assert_eq!(access.len(), 1, "one access line for {id}");
        assert_eq!(access[0]["span"]["request_id"], json!(id));
        assert_eq!(access[0]["route"], json!("/healthz"));
    }
    assert!(
        !stdout
            .iter()
            .any(|l| l.contains(&long_id) || l.contains("two words")),
        "a refused request id is never logged"
    );
    // Every line logged inside a request span names that request.
    for line in &lines {
        if let Some(span) = line.get("span") {
            assert!(span["request_id"].is_string(), "span without id: {line:?}");
        }
    }
    assert!(
        stderr.is_empty(),
        "json logs go to stdout only; stderr: {stderr:?}"
    );
}

// ---------------------------------------------------------------------------
// 4. No secret in trace logs.
// ---------------------------------------------------------------------------

/// A named secret value that no log line may contain.
struct Secrets(Vec<(String, String)>);

impl Secrets {
    /// Adds `value`, and for prefixed formats (`rc_…`, `whsec_…`, `sha256=…`,
    /// `v1,…`) the part after the prefix as well.
    fn add(&mut self, name: &str, value: &str) {
        assert!(
            value.len() >= 16,
            "{name} is too short to search for: {value:?}"
        );
        self.0.push((name.to_owned(), value.to_owned()));
        for prefix in ["rc_", "whsec_", "sha256=", "v1,"] {
            if let Some(rest) = value.strip_prefix(prefix) {
                self.add(&format!("{name} (after {prefix})"), rest);
            }
        }
    }

    /// Every signature the receiver saw.
    fn add_signatures(&mut self, received: &[Received]) -> usize {
        let mut n = 0;
        for (i, r) in received.iter().enumerate() {
            let service = r.header("x-service-signature");
            assert!(service.starts_with("sha256="), "{service:?}");
            self.add(&format!("x-service-signature #{i}"), &service);
            let standard = r.header("webhook-signature");
            assert!(standard.starts_with("v1,"), "{standard:?}");
            for sig in standard.split_whitespace() {
                self.add(&format!("webhook-signature #{i}"), sig);
            }
            n += 1;
        }
        n
    }

    /// Panics with every offending line.
    fn assert_absent(&self, what: &str, lines: &[String]) {
        let mut offending = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            for (name, value) in &self.0 {
                if line.contains(value.as_str()) {
                    offending.push(format!("{what} line {i} contains {name}: {line}"));
                }
            }
        }
        assert!(
            offending.is_empty(),
            "{} secret occurrences in {what}:\n{}",
            offending.len(),
            offending
                .iter()
                .take(20)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[actix_web::test]
async fn trace_logs_never_contain_secrets() {
    let tag = rolecall::ids::new_v7().simple().to_string();
    let admin = format!("adm-secret-{tag}");
    let metrics_token = format!("metrics-secret-{tag}");
    let mut secrets = Secrets(Vec::new());
    secrets.add("configured admin token", &admin);
    secrets.add("metrics token", &metrics_token);
    let receiver = TestReceiver::start().await;

    // Run 1: admin token configured, webhooks, metrics token.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env: Vec<(&str, &str)> = WEBHOOK_TEST_CONFIG.to_vec();
    env.extend([
        ("ROLECALL_LOG__FORMAT", "json"),
        ("ROLECALL_LOG__LEVEL", "trace"),
        ("ROLECALL_ADMIN__TOKEN", admin.as_str()),
        ("ROLECALL_METRICS__TOKEN", metrics_token.as_str()),
    ]);
    let server = Logged::start(dir.path(), &env);
    let (owner, _, owner_token) = user(&server, &admin, &format!("a-{tag}@example.test")).await;
    secrets.add("owner api token", &owner_token);
    // A session token, revoked later.
    let session = server
        .post(
            &format!("/admin/users/{owner}/tokens"),
            &admin,
            json!({"kind": "session"}),
        )
        .await
        .expect(201)
        .json();
    let session_token = str_of(&session["token"]);
    secrets.add("session token", &session_token);
    let (bob, _, bob_token) = user(&server, &admin, &format!("b-{tag}@example.test")).await;
    secrets.add("bob's token", &bob_token);
    let org = enterprise_org(&server, &admin, &owner).await;
    let path = |suffix: &str| format!("/organizations/{org}{suffix}");
    server.get("/me", &owner_token).await.expect(200);
    server.get("/me", &session_token).await.expect(200);

    // Tokens sent wrongly.
    let wrong = format!("rc_wrong-secret-{tag}");
    secrets.add("wrong token", &wrong);
    server
        .get("/me", &wrong)
        .await
        .problem(401, "UNAUTHENTICATED");
    server
        .get("/me", &admin)
        .await
        .problem(401, "UNAUTHENTICATED");
    server
        .post(
            "/admin/users",
            &owner_token,
            json!({"email": "x@example.test"}),
        )
        .await
        .problem(401, "UNAUTHENTICATED");
    server
        .send(
            Method::GET,
            "/me",
            None,
            None,
            vec![("Authorization", format!("Token {owner_token}"))],
        )
        .await
        .problem(401, "UNAUTHENTICATED");

    // Webhook: test (reveals the secret), save, deliveries (one retried).
    let test = server
        .post(
            &path("/webhook/test"),
            &owner_token,
            json!({"url": receiver.url, "events": ["member.added", "member.removed", "task.created"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(test["passed"], json!(true), "{test}");
    let first_secret = str_of(&test["secret"]);
    secrets.add("first webhook secret", &first_secret);
    server
        .call(
            Method::PUT,
            &path("/webhook"),
            Some(&owner_token),
            Some(json!({"test_id": test["test_id"]})),
        )
        .await
        .expect(200);
    let roles = server
        .get(&path("/roles"), &owner_token)
        .await
        .expect(200)
        .json();
    let member_role = str_of(&roles["items"][1]["id"]);
    receiver.script(vec![Behavior::status(500)]); // member.added: attempt 1 fails
    server
        .post(
            &path("/members"),
            &owner_token,
            json!({"user_id": bob, "role_id": member_role}),
        )
        .await
        .expect(201);
    for i in 0..3 {
        server
            .post(
                &path("/tasks"),
                &bob_token,
                json!({"title": format!("t{i}")}),
            )
            .await
            .expect(201);
    }
    // preflight, member.added twice, three tasks
    receiver.wait_for(6, Duration::from_secs(10)).await;

    // Rotate (reveals the new secret), more deliveries, a test on the
    // configured endpoint, a redelivery: all signed with the new secret.
    let rotated = server
        .post(&path("/webhook/rotate"), &owner_token, json!({}))
        .await
        .expect(200)
        .json();
    let second_secret = str_of(&rotated["secret"]);
    secrets.add("rotated webhook secret", &second_secret);
    assert_ne!(first_secret, second_secret);
    server
        .post(
            &path("/tasks"),
            &owner_token,
            json!({"title": "after rotate"}),
        )
        .await
        .expect(201);
    let retest = server
        .post(
            &path("/webhook/test"),
            &owner_token,
            json!({"url": receiver.url, "events": ["member.added"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(retest["passed"], json!(true), "{retest}");
    assert!(retest.get("secret").is_none(), "{retest}");
    receiver.wait_for(8, Duration::from_secs(10)).await;
    let log = server
        .get(
            &path("/webhook/deliveries?limit=200&event=member.added"),
            &owner_token,
        )
        .await
        .expect(200)
        .json();
    let delivery_id = str_of(&log["items"][0]["delivery_id"]);
    server
        .post(
            &path(&format!("/webhook/deliveries/{delivery_id}/redeliver")),
            &owner_token,
            json!({}),
        )
        .await
        .expect(202);
    server
        .call(
            Method::DELETE,
            &format!("/organizations/{org}/members/{bob}"),
            Some(&owner_token),
            None,
        )
        .await
        .expect(204);
    let received = receiver.wait_for(10, Duration::from_secs(10)).await;

    // The metrics token, right and wrong.
    server.get("/metrics", &metrics_token).await.expect(200);
    server
        .get("/metrics", &format!("{metrics_token}-wrong"))
        .await
        .problem(401, "UNAUTHENTICATED");
    server
        .call(Method::GET, "/metrics", None, None)
        .await
        .problem(401, "UNAUTHENTICATED");

    // Revocation: the session token dies.
    server
        .call(
            Method::DELETE,
            &format!("/admin/tokens/{}", str_of(&session["id"])),
            Some(&admin),
            None,
        )
        .await
        .expect(204);
    server
        .get("/me", &session_token)
        .await
        .problem(401, "UNAUTHENTICATED");

    // Plenty of authenticated traffic, right and wrong, for the trace to cover.
    for _ in 0..40 {
        server.get("/me", &owner_token).await.expect(200);
        server
            .get(&path("/webhook"), &owner_token)
            .await
            .expect(200);
        server
            .get("/me", &wrong)
            .await
            .problem(401, "UNAUTHENTICATED");
    }

    let (stdout, stderr) = server.stop().await;
    let signatures = secrets.add_signatures(&received);
    assert_eq!(signatures, 10);

    // Run 2: no admin token configured, so one is generated into the data dir.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let server = Logged::start(
        dir2.path(),
        &[
            ("ROLECALL_LOG__FORMAT", "json"),
            ("ROLECALL_LOG__LEVEL", "trace"),
            ("ROLECALL_ADMIN__TOKEN", ""),
        ],
    );
    let generated = std::fs::read_to_string(dir2.path().join("admin-token")).expect("admin-token");
    let generated = generated.trim_end().to_owned();
    secrets.add("generated admin token", &generated);
    let (carol, _, carol_token) = user(&server, &generated, &format!("c-{tag}@example.test")).await;
    secrets.add("carol's token", &carol_token);
    server.get("/me", &carol_token).await.expect(200);
    server
        .get("/me", &generated)
        .await
        .problem(401, "UNAUTHENTICATED");
    server
        .post("/admin/users", &admin, json!({"email": "y@example.test"}))
        .await
        .problem(401, "UNAUTHENTICATED");
    server
        .post(
            &format!("/admin/users/{carol}/tokens"),
            &carol_token,
            json!({"kind": "api"}),
        )
        .await
        .problem(401, "UNAUTHENTICATED");
    let (stdout2, stderr2) = server.stop().await;

    println!(
        "captured at trace level: run 1 {} stdout + {} stderr lines, run 2 {} stdout + {} stderr lines; {} secret values checked",
        stdout.len(),
        stderr.len(),
        stdout2.len(),
        stderr2.len(),
        secrets.0.len()
    );
    assert!(
        stdout.len() > 1000,
        "trace level logs a lot ({} lines)",
        stdout.len()
    );
    assert!(
        stdout.iter().any(|l| l.contains(r#""level":"TRACE""#)),
        "trace lines were captured"
    );
    secrets.assert_absent("run 1 stdout", &stdout);
    secrets.assert_absent("run 1 stderr", &stderr);
    secrets.assert_absent("run 2 stdout", &stdout2);
    secrets.assert_absent("run 2 stderr", &stderr2);
}
