//! Bad input to the workspace resources (CONTRACT §1, §7), one table per
//! resource: every case gets a 4xx problem+json with the exact code (and
//! the `field` it concerns), stores nothing (the resource's list endpoints
//! are unchanged after each case) and fires no event (a webhook subscribed
//! to every event gets nothing but the preflight and, at the end, the
//! sentinel event, and the delivery log has no other record).

use std::time::Duration;

use actix_web::http::Method;
use rolecall::domain::event::EventKind;
use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_app_with, Org, Req, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::TestReceiver;

/// One refused request.
struct Case {
    name: &'static str,
    method: Method,
    /// Relative to the organization.
    path: String,
    body: Option<Vec<u8>>,
    content_type: Option<&'static str>,
    status: u16,
    code: &'static str,
    /// Problem members that must be present with these values (`field`, …).
    members: Vec<(&'static str, Value)>,
}

fn case(name: &'static str, method: Method, path: impl Into<String>) -> Case {
    Case {
        name,
        method,
        path: path.into(),
        body: None,
        content_type: None,
        status: 0,
        code: "",
        members: Vec::new(),
    }
}

fn post(name: &'static str, path: impl Into<String>, body: Value) -> Case {
    case(name, Method::POST, path).json(body)
}

fn patch(name: &'static str, path: impl Into<String>, body: Value) -> Case {
    case(name, Method::PATCH, path).json(body)
}

impl Case {
    fn json(mut self, body: Value) -> Self {
        self.body = Some(body.to_string().into_bytes());
        self.content_type = Some("application/json");
        self
    }

    fn raw(mut self, content_type: Option<&'static str>, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self.content_type = content_type;
        self
    }

    /// 400 VALIDATION_FAILED naming `field`.
    fn invalid(self, field: &'static str) -> Self {
        self.is(400, "VALIDATION_FAILED")
            .member("field", json!(field))
    }

    /// 400 VALIDATION_FAILED (a malformed body, not one field's fault).
    fn malformed(self) -> Self {
        self.is(400, "VALIDATION_FAILED")
    }

    fn not_found(self) -> Self {
        self.is(404, "NOT_FOUND")
    }

    fn is(mut self, status: u16, code: &'static str) -> Self {
        self.status = status;
        self.code = code;
        self
    }

    fn member(mut self, name: &'static str, value: Value) -> Self {
        self.members.push((name, value));
        self
    }
}

fn long(n: usize) -> String {
    "x".repeat(n)
}

/// Over 64 KiB.
fn huge() -> String {
    long(64 * 1024 + 1)
}

/// A webhook subscribed to every event, and what it had seen when armed.
struct Hook {
    receiver: TestReceiver,
    log: Vec<Value>,
}

/// Creates a resource as the owner; its id.
async fn create(app: &TestApp, org: &Org, suffix: &str, body: Value, status: u16) -> String {
    let reply = app.post(&org.path(suffix), &org.owner_token, body).await;
    assert_eq!(
        reply.status,
        status,
        "fixture POST {suffix}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()["id"].as_str().expect("fixture id").to_owned()
}

/// A fresh server and free organization (fixtures are created before the
/// webhook is armed, so they are not delivered).
async fn start() -> (TestApp, Org) {
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let org = app.org("free").await;
    (app, org)
}

impl Hook {
    /// Subscribes a receiver to all 22 events.
    async fn arm(app: &TestApp, org: &Org) -> Hook {
        let receiver = TestReceiver::start().await;
        let events: Vec<&str> = EventKind::ALL
            .iter()
            .map(|kind| kind.id())
            .filter(|id| *id != "test.preflight")
            .collect();
        assert_eq!(events.len(), 22, "seed §6 has 22 subscribable events");
        app.setup_webhook(org, &receiver.url, &events).await;
        let received = receiver.received();
        assert_eq!(received.len(), 1, "only the preflight so far");
        assert_eq!(received[0].json()["event"], json!("test.preflight"));
        // The preflight's own log record may land just after the answer.
        let log = eventually(
            Duration::from_secs(10),
            "the preflight's log record",
            || async {
                let log = app.deliveries(org, "").await;
                (!log.is_empty()).then_some(log)
            },
        )
        .await;
        assert_eq!(log.len(), 1, "only the preflight is logged: {log:?}");
        assert_eq!(log[0]["event"], json!("test.preflight"), "{log:?}");
        Hook { receiver, log }
    }

    /// After the last case: fires one sentinel event (`project.created`),
    /// waits until it is delivered and logged, then asserts nothing else was
    /// delivered or logged since the hook was armed.
    async fn settle(self, app: &TestApp, org: &Org) {
        let sentinel = create(app, org, "/projects", json!({"name": "Sentinel"}), 201).await;
        let received = self.receiver.wait_for(2, Duration::from_secs(10)).await;
        let log = eventually(Duration::from_secs(10), "the sentinel's log record", || {
            let expected = self.log.len() + 1;
            async move {
                let log = app.deliveries(org, "").await;
                (log.len() >= expected && log[0]["outcome"] == json!("succeeded")).then_some(log)
            }
        })
        .await;
        let events: Vec<Value> = self
            .receiver
            .received()
            .iter()
            .map(|r| r.json()["event"].clone())
            .collect();
        assert_eq!(
            events,
            vec![json!("test.preflight"), json!("project.created")],
            "a refused request fired an event"
        );
        assert_eq!(received[1].json()["data"]["id"], json!(sentinel));
        let new: Vec<&Value> = log.iter().take(log.len() - self.log.len()).collect();
        assert_eq!(new.len(), 1, "new delivery-log records: {new:?}");
        assert_eq!(new[0]["event"], json!("project.created"), "{new:?}");
        assert_eq!(&log[log.len() - self.log.len()..], &self.log[..]);
    }
}

/// The GET bodies of `watch` (paths relative to the org).
async fn snapshot(app: &TestApp, org: &Org, watch: &[String]) -> Vec<Value> {
    let mut all = Vec::new();
    for path in watch {
        let reply = app.get(&org.path(path), &org.owner_token).await.expect(200);
        all.push(reply.json());
    }
    all
}

/// Sends every case as the owner; checks its answer and that `watch` (the
/// resource's list endpoints) did not change. Returns every mismatch, so one
/// run reports all the cases that fail.
async fn run(app: &TestApp, org: &Org, watch: &[String], cases: Vec<Case>) -> Vec<String> {
    assert!(cases.len() >= 5, "at least 5 cases per resource");
    let mut failures = Vec::new();
    let mut before = snapshot(app, org, watch).await;
    for case in cases {
        let what = format!("case {:?} ({} {})", case.name, case.method, case.path);
        let reply = app
            .raw(Req {
                method: case.method.clone(),
                path: org.path(&case.path),
                token: Some(&org.owner_token),
                body: case.body,
                content_type: case.content_type,
                headers: Vec::new(),
            })
            .await;
        let body = reply.json();
        let text = String::from_utf8_lossy(&reply.body);
        let mut fail = |why: String| failures.push(format!("{what}: {why}; body: {text}"));
        let got = (reply.status, body["code"].as_str().unwrap_or(""));
        if got != (case.status, case.code) {
            fail(format!(
                "expected {} {}, got {} {}",
                case.status, case.code, got.0, got.1
            ));
        }
        if reply.header("content-type") != "application/problem+json" {
            fail(format!("content type {:?}", reply.header("content-type")));
        }
        if body["status"] != json!(reply.status) || body["type"] != json!("about:blank") {
            fail("status/type members".to_owned());
        }
        if !(body["title"].is_string() && body["detail"].is_string()) {
            fail("title/detail members".to_owned());
        }
        for (member, value) in &case.members {
            if &body[*member] != value {
                fail(format!(
                    "problem member {member:?}: expected {value}, got {}",
                    body[*member]
                ));
            }
        }
        let after = snapshot(app, org, watch).await;
        if after != before {
            fail("it changed what is stored".to_owned());
            before = after;
        }
    }
    failures
}

/// Runs the table, then checks no event fired, then reports every failure.
async fn check(app: &TestApp, org: &Org, hook: Hook, watch: &[String], cases: Vec<Case>) {
    let failures = run(app, org, watch, cases).await;
    for failure in &failures {
        eprintln!("FAILED {failure}");
    }
    hook.settle(app, org).await;
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[actix_web::test]
async fn decisions_bad_input() {
    let (app, org) = start().await;
    let draft = create(&app, &org, "/decisions", json!({"title": "Draft"}), 201).await;
    let hook = Hook::arm(&app, &org).await;
    let one = format!("/decisions/{draft}");
    let status = format!("/decisions/{draft}/status");
    let cases = vec![
        post(
            "title of 201 chars",
            "/decisions",
            json!({"title": long(201)}),
        )
        .invalid("title"),
        post("whitespace title", "/decisions", json!({"title": "  \t "})).invalid("title"),
        post("empty title", "/decisions", json!({"title": ""})).invalid("title"),
        post(
            "title with a control character",
            "/decisions",
            json!({"title": "a\u{7}b"}),
        )
        .invalid("title"),
        post(
            "statement over 64 KiB",
            "/decisions",
            json!({"title": "t", "statement": huge()}),
        )
        .invalid("statement"),
        post(
            "rationale over 64 KiB",
            "/decisions",
            json!({"title": "t", "rationale": huge()}),
        )
        .invalid("rationale"),
        post(
            "21 tags",
            "/decisions",
            json!({"title": "t", "tags": vec!["tag"; 21]}),
        )
        .invalid("tags"),
        post(
            "a 51-char tag",
            "/decisions",
            json!({"title": "t", "tags": [long(51)]}),
        )
        .invalid("tags"),
        post(
            "21 links",
            "/decisions",
            json!({"title": "t", "links": vec!["https://example.test/"; 21]}),
        )
        .invalid("links"),
        post(
            "unknown field",
            "/decisions",
            json!({"title": "t", "color": "red"}),
        )
        .invalid("color"),
        post("title of the wrong type", "/decisions", json!({"title": 5})).invalid("title"),
        post(
            "tags of the wrong type",
            "/decisions",
            json!({"title": "t", "tags": "a,b"}),
        )
        .invalid("tags"),
        post(
            "explicit null statement",
            "/decisions",
            json!({"title": "t", "statement": null}),
        )
        .invalid("statement"),
        post("explicit null title", "/decisions", json!({"title": null})).invalid("title"),
        post("missing title", "/decisions", json!({"statement": "s"})).invalid("title"),
        post("array body", "/decisions", json!([{"title": "t"}])).malformed(),
        case("malformed JSON", Method::POST, "/decisions")
            .raw(Some("application/json"), "{\"title\": ")
            .malformed(),
        case("not JSON", Method::POST, "/decisions")
            .raw(Some("text/plain"), "title=t")
            .is(415, "UNSUPPORTED_MEDIA_TYPE"),
        case("body over 1 MiB", Method::POST, "/decisions")
            .raw(
                Some("application/json"),
                json!({"title": "t", "statement": long(1024 * 1024)}).to_string(),
            )
            .is(413, "PAYLOAD_TOO_LARGE"),
        post(
            "created ACCEPTED",
            "/decisions",
            json!({"title": "t", "status": "ACCEPTED"}),
        )
        .invalid("status"),
        post(
            "created DEPRECATED",
            "/decisions",
            json!({"title": "t", "status": "DEPRECATED"}),
        )
        .invalid("status"),
        post(
            "bad status value",
            "/decisions",
            json!({"title": "t", "status": "draft"}),
        )
        .invalid("status"),
        patch(
            "PATCH title of 201 chars",
            &one,
            json!({"title": long(201)}),
        )
        .invalid("title"),
        patch("PATCH null tags", &one, json!({"tags": null})).invalid("tags"),
        patch(
            "PATCH status (not editable)",
            &one,
            json!({"status": "PENDING"}),
        )
        .invalid("status"),
        patch("PATCH array body", &one, json!(["title"])).malformed(),
        post(
            "status move to an unknown status",
            &status,
            json!({"status": "DONE"}),
        )
        .invalid("status"),
        post("status body missing status", &status, json!({})).invalid("status"),
        post(
            "impossible move DRAFT → ACCEPTED",
            &status,
            json!({"status": "ACCEPTED"}),
        )
        .is(409, "INVALID_TRANSITION")
        .member("from", json!("DRAFT"))
        .member("to", json!("ACCEPTED")),
        case("GET non-UUID id", Method::GET, "/decisions/not-a-uuid").not_found(),
        patch("PATCH non-UUID id", "/decisions/42", json!({"title": "t"})).not_found(),
        case("DELETE non-UUID id", Method::DELETE, "/decisions/42").not_found(),
        post(
            "status of non-UUID id",
            "/decisions/x/status",
            json!({"status": "PENDING"}),
        )
        .not_found(),
    ];
    check(
        &app,
        &org,
        hook,
        &["/decisions?limit=200".to_owned()],
        cases,
    )
    .await;
}

#[actix_web::test]
async fn tasks_bad_input() {
    let (app, org) = start().await;
    let task = create(&app, &org, "/tasks", json!({"title": "Open task"}), 201).await;
    let hook = Hook::arm(&app, &org).await;
    let one = format!("/tasks/{task}");
    let unknown = rolecall::ids::new_v7().to_string();
    let cases = vec![
        post("title of 201 chars", "/tasks", json!({"title": long(201)})).invalid("title"),
        post("empty title", "/tasks", json!({"title": ""})).invalid("title"),
        post(
            "description over 64 KiB",
            "/tasks",
            json!({"title": "t", "description": huge()}),
        )
        .invalid("description"),
        post(
            "description of the wrong type",
            "/tasks",
            json!({"title": "t", "description": [1]}),
        )
        .invalid("description"),
        post(
            "malformed project_id",
            "/tasks",
            json!({"title": "t", "project_id": "project-1"}),
        )
        .invalid("project_id"),
        post(
            "unknown project_id",
            "/tasks",
            json!({"title": "t", "project_id": unknown}),
        )
        .is(422, "UNKNOWN_PROJECT")
        .member("field", json!("project_id")),
        post(
            "explicit null project_id",
            "/tasks",
            json!({"title": "t", "project_id": null}),
        )
        .invalid("project_id"),
        post(
            "status on create (unknown field)",
            "/tasks",
            json!({"title": "t", "status": "done"}),
        )
        .invalid("status"),
        post("missing title", "/tasks", json!({"description": "d"})).invalid("title"),
        post("array body", "/tasks", json!(["t"])).malformed(),
        patch("bad status value", &one, json!({"status": "finished"})).invalid("status"),
        patch("PATCH null title", &one, json!({"title": null})).invalid("title"),
        patch("PATCH whitespace title", &one, json!({"title": "   "})).invalid("title"),
        patch("PATCH unknown field", &one, json!({"owner": "me"})).invalid("owner"),
        patch(
            "skipping a status: open → done",
            &one,
            json!({"status": "done"}),
        )
        .is(409, "INVALID_TRANSITION")
        .member("from", json!("open"))
        .member("to", json!("done")),
        case("GET non-UUID id", Method::GET, "/tasks/123").not_found(),
        patch("PATCH non-UUID id", "/tasks/123", json!({"title": "t"})).not_found(),
    ];
    check(&app, &org, hook, &["/tasks?limit=200".to_owned()], cases).await;
}

#[actix_web::test]
async fn memories_bad_input() {
    let (app, org) = start().await;
    let memory = create(&app, &org, "/memories", json!({"content": "kept"}), 201).await;
    let hook = Hook::arm(&app, &org).await;
    let one = format!("/memories/{memory}");
    let cases = vec![
        post(
            "content over 64 KiB",
            "/memories",
            json!({"content": huge()}),
        )
        .invalid("content"),
        post(
            "metadata not an object",
            "/memories",
            json!({"content": "c", "metadata": "tags"}),
        )
        .invalid("metadata"),
        post(
            "metadata an array",
            "/memories",
            json!({"content": "c", "metadata": [1, 2]}),
        )
        .invalid("metadata"),
        post(
            "metadata over 16 KiB",
            "/memories",
            json!({"content": "c", "metadata": {"k": long(16 * 1024)}}),
        )
        .invalid("metadata"),
        post(
            "explicit null metadata",
            "/memories",
            json!({"content": "c", "metadata": null}),
        )
        .invalid("metadata"),
        post(
            "content of the wrong type",
            "/memories",
            json!({"content": 42}),
        )
        .invalid("content"),
        post("missing content", "/memories", json!({"metadata": {}})).invalid("content"),
        post(
            "unknown field",
            "/memories",
            json!({"content": "c", "title": "t"}),
        )
        .invalid("title"),
        post("array body", "/memories", json!([])).malformed(),
        patch(
            "PATCH content over 64 KiB",
            &one,
            json!({"content": huge()}),
        )
        .invalid("content"),
        patch("PATCH metadata not an object", &one, json!({"metadata": 7})).invalid("metadata"),
        patch("PATCH null content", &one, json!({"content": null})).invalid("content"),
        case("GET non-UUID id", Method::GET, "/memories/zzz").not_found(),
        case("DELETE non-UUID id", Method::DELETE, "/memories/zzz").not_found(),
    ];
    check(&app, &org, hook, &["/memories?limit=200".to_owned()], cases).await;
}

#[actix_web::test]
async fn capsules_bad_input() {
    let (app, org) = start().await;
    let open = create(&app, &org, "/capsules", json!({"title": "Open"}), 201).await;
    let old = create(&app, &org, "/capsules", json!({"title": "Old"}), 201).await;
    app.post(
        &org.path(&format!("/capsules/{old}/supersede")),
        &org.owner_token,
        json!({"body": "newer"}),
    )
    .await
    .expect(201);
    let hook = Hook::arm(&app, &org).await;
    let one = format!("/capsules/{open}");
    let supersede = format!("/capsules/{open}/supersede");
    let cases = vec![
        post(
            "title of 201 chars",
            "/capsules",
            json!({"title": long(201)}),
        )
        .invalid("title"),
        post("whitespace title", "/capsules", json!({"title": " "})).invalid("title"),
        post(
            "body over 64 KiB",
            "/capsules",
            json!({"title": "t", "body": huge()}),
        )
        .invalid("body"),
        post(
            "scope of 201 chars",
            "/capsules",
            json!({"title": "t", "scope": long(201)}),
        )
        .invalid("scope"),
        post(
            "21 attachments",
            "/capsules",
            json!({"title": "t", "attachments": vec!["a"; 21]}),
        )
        .invalid("attachments"),
        post(
            "attachments of the wrong type",
            "/capsules",
            json!({"title": "t", "attachments": "a"}),
        )
        .invalid("attachments"),
        post(
            "frozen on create (unknown field)",
            "/capsules",
            json!({"title": "t", "frozen": true}),
        )
        .invalid("frozen"),
        post(
            "explicit null body",
            "/capsules",
            json!({"title": "t", "body": null}),
        )
        .invalid("body"),
        post("missing title", "/capsules", json!({"body": "b"})).invalid("title"),
        post("array body", "/capsules", json!([1])).malformed(),
        patch(
            "PATCH title of 201 chars",
            &one,
            json!({"title": long(201)}),
        )
        .invalid("title"),
        patch("PATCH frozen (not editable)", &one, json!({"frozen": true})).invalid("frozen"),
        patch(
            "PATCH a frozen capsule",
            format!("/capsules/{old}"),
            json!({"body": "edit"}),
        )
        .is(409, "CAPSULE_FROZEN"),
        post("supersede without body", &supersede, json!({"title": "t"})).invalid("body"),
        post(
            "supersede with a 201-char title",
            &supersede,
            json!({"title": long(201), "body": "b"}),
        )
        .invalid("title"),
        post(
            "supersede an already superseded capsule",
            format!("/capsules/{old}/supersede"),
            json!({"body": "again"}),
        )
        .is(409, "INVALID_TRANSITION"),
        case("GET non-UUID id", Method::GET, "/capsules/nope").not_found(),
        case("freeze non-UUID id", Method::POST, "/capsules/nope/freeze").not_found(),
        case("DELETE non-UUID id", Method::DELETE, "/capsules/nope").not_found(),
    ];
    check(&app, &org, hook, &["/capsules?limit=200".to_owned()], cases).await;
}

#[actix_web::test]
async fn projects_bad_input() {
    let (app, org) = start().await;
    let project = create(&app, &org, "/projects", json!({"name": "Kept"}), 201).await;
    let hook = Hook::arm(&app, &org).await;
    let one = format!("/projects/{project}");
    let cases = vec![
        post("name of 201 chars", "/projects", json!({"name": long(201)})).invalid("name"),
        post("empty name", "/projects", json!({"name": ""})).invalid("name"),
        post(
            "repository_url of 2049 chars",
            "/projects",
            json!({"name": "n", "repository_url": long(2049)}),
        )
        .invalid("repository_url"),
        post("name of the wrong type", "/projects", json!({"name": 1})).invalid("name"),
        post(
            "explicit null repository_url",
            "/projects",
            json!({"name": "n", "repository_url": null}),
        )
        .invalid("repository_url"),
        post(
            "unknown field",
            "/projects",
            json!({"name": "n", "owner": "me"}),
        )
        .invalid("owner"),
        post("missing name", "/projects", json!({})).invalid("name"),
        post("array body", "/projects", json!(["n"])).malformed(),
        patch("PATCH null name", &one, json!({"name": null})).invalid("name"),
        patch("PATCH whitespace name", &one, json!({"name": "  "})).invalid("name"),
        case("GET non-UUID id", Method::GET, "/projects/xyz").not_found(),
        case("DELETE non-UUID id", Method::DELETE, "/projects/xyz").not_found(),
    ];
    check(&app, &org, hook, &["/projects?limit=200".to_owned()], cases).await;
}

#[actix_web::test]
async fn imports_bad_input() {
    let (app, org) = start().await;
    let project = create(&app, &org, "/projects", json!({"name": "Target"}), 201).await;
    let imports = format!("/projects/{project}/imports");
    let source = json!({"source": "https://example.test/repo.git"});
    let running = create(&app, &org, &imports, source.clone(), 202).await;
    let cancelled = create(&app, &org, &imports, source, 202).await;
    app.post(
        &org.path(&format!("/imports/{cancelled}/cancel")),
        &org.owner_token,
        json!({}),
    )
    .await
    .expect(200);
    let hook = Hook::arm(&app, &org).await;
    let result = format!("/imports/{running}/result");
    let unknown = rolecall::ids::new_v7().to_string();
    let cases = vec![
        post("start without source", &imports, json!({})).invalid("source"),
        post("start with empty source", &imports, json!({"source": ""})).invalid("source"),
        post(
            "start with a 2049-char source",
            &imports,
            json!({"source": long(2049)}),
        )
        .invalid("source"),
        post(
            "start with an unknown field",
            &imports,
            json!({"source": "s", "status": "completed"}),
        )
        .invalid("status"),
        post(
            "start with a null source",
            &imports,
            json!({"source": null}),
        )
        .invalid("source"),
        post("start with an array body", &imports, json!(["s"])).malformed(),
        post(
            "start on an unknown project",
            format!("/projects/{unknown}/imports"),
            json!({"source": "s"}),
        )
        .not_found(),
        post(
            "start on a non-UUID project",
            "/projects/p1/imports",
            json!({"source": "s"}),
        )
        .not_found(),
        post(
            "result completed with a failure_reason",
            &result,
            json!({"status": "completed", "failure_reason": "boom"}),
        )
        .invalid("failure_reason"),
        post(
            "result with status running",
            &result,
            json!({"status": "running"}),
        )
        .invalid("status"),
        post(
            "result with status cancelled",
            &result,
            json!({"status": "cancelled"}),
        )
        .invalid("status"),
        post(
            "result failed with a 2001-char reason",
            &result,
            json!({"status": "failed", "failure_reason": long(2001)}),
        )
        .invalid("failure_reason"),
        post("result without status", &result, json!({})).invalid("status"),
        post(
            "result for a finished import",
            format!("/imports/{cancelled}/result"),
            json!({"status": "completed"}),
        )
        .is(409, "INVALID_TRANSITION")
        .member("from", json!("cancelled"))
        .member("to", json!("completed")),
        case(
            "cancel a finished import",
            Method::POST,
            format!("/imports/{cancelled}/cancel"),
        )
        .is(409, "INVALID_TRANSITION")
        .member("from", json!("cancelled"))
        .member("to", json!("cancelled")),
        case("GET non-UUID id", Method::GET, "/imports/abc").not_found(),
        post(
            "result of non-UUID id",
            "/imports/abc/result",
            json!({"status": "completed"}),
        )
        .not_found(),
    ];
    check(&app, &org, hook, &[format!("{imports}?limit=200")], cases).await;
}

#[actix_web::test]
async fn analyses_bad_input() {
    let (app, org) = start().await;
    let decision = create(&app, &org, "/decisions", json!({"title": "Rule"}), 201).await;
    let accepted = create(
        &app,
        &org,
        "/pull-requests/analyses",
        json!({"repository": "acme/app", "number": 1, "findings": []}),
        201,
    )
    .await;
    app.post(
        &org.path(&format!("/pull-requests/analyses/{accepted}/accept")),
        &org.owner_token,
        json!({}),
    )
    .await
    .expect(200);
    let hook = Hook::arm(&app, &org).await;
    let finding = json!({"decision_id": decision, "summary": "touches the rule"});
    let report = |number: Value, findings: Value| json!({"repository": "acme/app", "number": number, "findings": findings});
    let path = "/pull-requests/analyses";
    let unknown = rolecall::ids::new_v7().to_string();
    let cases = vec![
        post("number 0", path, report(json!(0), json!([finding]))).invalid("number"),
        post("negative number", path, report(json!(-1), json!([]))).invalid("number"),
        post("number as text", path, report(json!("7"), json!([]))).invalid("number"),
        post(
            "101 findings",
            path,
            report(json!(7), json!(vec![finding.clone(); 101])),
        )
        .invalid("findings"),
        post(
            "empty repository",
            path,
            json!({"repository": "", "number": 7, "findings": []}),
        )
        .invalid("repository"),
        post(
            "empty finding summary",
            path,
            report(json!(7), json!([{"decision_id": decision, "summary": ""}])),
        )
        .invalid("findings.summary"),
        post(
            "non-UUID decision_id",
            path,
            report(json!(7), json!([{"decision_id": "d1", "summary": "s"}])),
        )
        .invalid("findings[0].decision_id"),
        post(
            "unknown decision_id",
            path,
            report(json!(7), json!([{"decision_id": unknown, "summary": "s"}])),
        )
        .is(422, "UNKNOWN_DECISION")
        .member("field", json!("findings.decision_id")),
        post(
            "unknown field in a finding",
            path,
            report(
                json!(7),
                json!([{"decision_id": decision, "summary": "s", "severity": "high"}]),
            ),
        )
        .invalid("findings[0].severity"),
        post(
            "missing findings",
            path,
            json!({"repository": "acme/app", "number": 7}),
        )
        .invalid("findings"),
        post("findings null", path, report(json!(7), Value::Null)).invalid("findings"),
        post("array body", path, json!([finding])).malformed(),
        case(
            "accept an accepted analysis",
            Method::POST,
            format!("{path}/{accepted}/accept"),
        )
        .is(409, "INVALID_TRANSITION"),
        case("GET non-UUID id", Method::GET, format!("{path}/abc")).not_found(),
        case(
            "accept non-UUID id",
            Method::POST,
            format!("{path}/abc/accept"),
        )
        .not_found(),
    ];
    check(&app, &org, hook, &[format!("{path}?limit=200")], cases).await;
}
