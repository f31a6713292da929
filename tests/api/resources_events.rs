//! Workspace-resource events (CONTRACT §7, seed §6) over real HTTP to a real
//! subscriber on loopback: every one of the 22 non-preflight event ids is
//! delivered once per triggering operation, with `data` equal to the
//! resource's GET representation at that moment; refused requests and no-op
//! writes fire nothing.
//!
//! The servers here run with `max_in_flight_per_org = 1`, so one
//! organization's deliveries leave in the order their events were recorded.
//! An extra event fired by an operation therefore reaches the subscriber
//! before the events of the next operation, and every check below ("the new
//! receipts are exactly these") also proves that the operation before fired
//! nothing more. Receipts are deduplicated by `X-Service-Delivery` (a retry
//! repeats it); a second delivery of one event would carry a new id and fail.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_app_with, Org, TestApp, WEBHOOK_TEST_CONFIG};
use crate::receiver::{Received, TestReceiver};

/// How long to wait for something that should happen promptly.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// How long to keep watching for an event that must not come, after a later
/// event proved the queue has moved past the point where it would have been.
pub(crate) const QUIET: Duration = Duration::from_millis(600);

/// Every event id but `test.preflight`, from the implementation's catalog.
pub(crate) fn event_ids() -> Vec<&'static str> {
    rolecall::domain::event::EventKind::ALL
        .iter()
        .map(|kind| kind.id())
        .filter(|id| *id != "test.preflight")
        .collect()
}

/// A server whose deliveries leave one at a time per organization (see the
/// module docs), with the usual webhook test settings.
pub(crate) async fn spawn_serial_app() -> TestApp {
    let mut config: Vec<(&str, &str)> = WEBHOOK_TEST_CONFIG.to_vec();
    config.push(("ROLECALL_WEBHOOKS__MAX_IN_FLIGHT_PER_ORG", "1"));
    spawn_app_with(&config).await
}

/// A fresh random id that names nothing.
pub(crate) fn unknown_id() -> String {
    rolecall::ids::new_v7().to_string()
}

/// A subscriber and the bookkeeping of what it got.
pub(crate) struct Hub {
    pub receiver: TestReceiver,
    /// Delivery ids already accounted for.
    consumed: HashSet<String>,
    /// Event ids observed (and checked) so far.
    pub covered: BTreeSet<String>,
    /// The last operation checked, for failure messages.
    last: String,
}

fn delivery_id(r: &Received) -> String {
    r.header("x-service-delivery")
}

fn describe(receipts: &[Received]) -> Vec<String> {
    receipts
        .iter()
        .map(|r| format!("{} ({})", r.header("x-service-event"), delivery_id(r)))
        .collect()
}

impl Hub {
    /// Starts a receiver, tests and saves `org`'s webhook for `events`, and
    /// accounts for the `test.preflight` request of the test.
    pub(crate) async fn start(app: &TestApp, org: &Org, events: &[&str]) -> Hub {
        let receiver = TestReceiver::start().await;
        app.setup_webhook(org, &receiver.url, events).await;
        let mut hub = Hub {
            receiver,
            consumed: HashSet::new(),
            covered: BTreeSet::new(),
            last: "webhook setup".into(),
        };
        let first = hub.wait_new(1, "the test.preflight request").await;
        assert_eq!(
            first[0].header("x-service-event"),
            "test.preflight",
            "the first request of a fresh receiver is the webhook test"
        );
        assert_eq!(
            first.len(),
            1,
            "only the preflight so far: {:?}",
            describe(&first)
        );
        hub.consumed.insert(delivery_id(&first[0]));
        hub
    }

    /// Receipts not yet accounted for, one per delivery id, in arrival order.
    fn fresh(&self) -> Vec<Received> {
        let mut seen = HashSet::new();
        self.receiver
            .received()
            .into_iter()
            .filter(|r| {
                let id = delivery_id(r);
                assert!(!id.is_empty(), "every request carries X-Service-Delivery");
                !self.consumed.contains(&id) && seen.insert(id)
            })
            .collect()
    }

    async fn wait_new(&self, n: usize, what: &str) -> Vec<Received> {
        let what = format!("{n} new deliveries after {what}");
        eventually(WAIT, &what, || async {
            let fresh = self.fresh();
            (fresh.len() >= n).then_some(fresh)
        })
        .await
    }

    /// Asserts that `label` caused exactly `expected` (event id, data), in
    /// this order, each delivered once.
    pub(crate) async fn expect(&mut self, label: &str, expected: &[(&str, Value)]) {
        self.check(label, expected, true).await;
    }

    /// Like [`Hub::expect`], in any order.
    pub(crate) async fn expect_unordered(&mut self, label: &str, expected: &[(&str, Value)]) {
        self.check(label, expected, false).await;
    }

    async fn check(&mut self, label: &str, expected: &[(&str, Value)], ordered: bool) {
        let fresh = self.wait_new(expected.len(), label).await;
        let names: Vec<&str> = expected.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            fresh.len(),
            expected.len(),
            "{label}: expected exactly {names:?}, got {:?} (an extra one may also come from \
             the operation before: {})",
            describe(&fresh),
            self.last
        );
        let mut pending: Vec<&(&str, Value)> = expected.iter().collect();
        for receipt in &fresh {
            let event = receipt.header("x-service-event");
            let envelope = receipt.json();
            assert_eq!(
                envelope["event"],
                json!(event),
                "{label}: the envelope names the event of X-Service-Event"
            );
            let position = if ordered {
                0
            } else {
                pending
                    .iter()
                    .position(|(name, _)| *name == event)
                    .unwrap_or(0)
            };
            let (name, data) = pending.remove(position);
            assert_eq!(
                event,
                *name,
                "{label}: expected {names:?} in this order, got {:?} (an extra one may also \
                 come from the operation before: {})",
                describe(&fresh),
                self.last
            );
            assert_eq!(
                &envelope["data"], data,
                "{label}: {event} data must equal the resource's GET representation"
            );
            self.covered.insert(event);
        }
        for receipt in &fresh {
            self.consumed.insert(delivery_id(receipt));
        }
        self.last = label.to_owned();
    }

    /// Asserts nothing new arrives within [`QUIET`] (call it after an
    /// `expect` of a later event, so that anything due has had its turn).
    pub(crate) async fn quiet(&mut self, label: &str) {
        actix_web::rt::time::sleep(QUIET).await;
        let fresh = self.fresh();
        assert!(
            fresh.is_empty(),
            "{label}: nothing more may be delivered, got {:?}",
            describe(&fresh)
        );
    }
}

/// GET `path` as the owner: 200 and its JSON.
pub(crate) async fn get(app: &TestApp, org: &Org, path: &str) -> Value {
    let reply = app.get(&org.path(path), &org.owner_token).await;
    assert_eq!(
        reply.status,
        200,
        "GET {path}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}

/// A request as the owner that must answer `status`; its JSON.
pub(crate) async fn owner(
    app: &TestApp,
    org: &Org,
    method: Method,
    path: &str,
    body: Option<Value>,
    status: u16,
) -> Value {
    let reply = app
        .call(
            method.clone(),
            &org.path(path),
            Some(&org.owner_token),
            body,
        )
        .await;
    assert_eq!(
        reply.status,
        status,
        "{method} {path}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}

fn id_of(value: &Value) -> String {
    value["id"].as_str().expect("an id").to_owned()
}

on_both_engines! {
async fn every_event_id_fires_once_per_operation_with_the_get_representation() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    let ids = event_ids();
    assert_eq!(
        ids.len(),
        22,
        "the seed lists 22 events besides test.preflight"
    );
    let mut hub = Hub::start(&app, &org, &ids).await;
    use Method as M;

    // Decisions: created, updated, status_changed (twice), and a second one in DRAFT.
    let created = owner(
        &app,
        &org,
        M::POST,
        "/decisions",
        Some(
            json!({"title": "Use Postgres", "statement": "We use Postgres.",
            "rationale": "It is boring.", "tags": ["db"], "links": ["https://example.test/adr/1"]}),
        ),
        201,
    )
    .await;
    let accepted_id = id_of(&created);
    let decision = format!("/decisions/{accepted_id}");
    let now = get(&app, &org, &decision).await;
    assert_eq!(
        created, now,
        "POST /decisions answers the GET representation"
    );
    hub.expect("decision create", &[("decision.created", now)])
        .await;

    owner(
        &app,
        &org,
        M::PATCH,
        &decision,
        Some(json!({"statement": "We use Postgres 16."})),
        200,
    )
    .await;
    let now = get(&app, &org, &decision).await;
    assert_eq!(now["statement"], json!("We use Postgres 16."));
    hub.expect("decision PATCH", &[("decision.updated", now)])
        .await;

    for status in ["PENDING", "ACCEPTED"] {
        let moved = owner(
            &app,
            &org,
            M::POST,
            &format!("{decision}/status"),
            Some(json!({ "status": status })),
            200,
        )
        .await;
        let now = get(&app, &org, &decision).await;
        assert_eq!(moved, now, "the status move answers the GET representation");
        assert_eq!(now["status"], json!(status));
        hub.expect(
            &format!("decision move to {status}"),
            &[("decision.status_changed", now)],
        )
        .await;
    }

    let draft = owner(
        &app,
        &org,
        M::POST,
        "/decisions",
        Some(json!({"title": "Maybe Kafka"})),
        201,
    )
    .await;
    let draft_id = id_of(&draft);
    let now = get(&app, &org, &format!("/decisions/{draft_id}")).await;
    assert_eq!(now["status"], json!("DRAFT"));
    hub.expect("second decision create", &[("decision.created", now)])
        .await;

    // Memories: created, updated, deleted (with the last GET).
    let memory = owner(
        &app,
        &org,
        M::POST,
        "/memories",
        Some(json!({"content": "The build needs 4 GB.", "metadata": {"source": "ci"}})),
        201,
    )
    .await;
    let memory = format!("/memories/{}", id_of(&memory));
    let now = get(&app, &org, &memory).await;
    hub.expect("memory create", &[("memory.created", now)])
        .await;
    owner(
        &app,
        &org,
        M::PATCH,
        &memory,
        Some(json!({"content": "The build needs 8 GB."})),
        200,
    )
    .await;
    let last = get(&app, &org, &memory).await;
    hub.expect("memory PATCH", &[("memory.updated", last.clone())])
        .await;
    owner(&app, &org, M::DELETE, &memory, None, 204).await;
    hub.expect("memory DELETE", &[("memory.deleted", last)])
        .await;

    // Capsules: created, updated (edit, freeze), supersede (created + updated), deleted.
    let capsule = owner(
        &app,
        &org,
        M::POST,
        "/capsules",
        Some(
            json!({"title": "Onboarding", "body": "Read the ADRs.", "scope": "team",
            "attachments": ["https://example.test/onboarding"]}),
        ),
        201,
    )
    .await;
    let old_id = id_of(&capsule);
    let capsule = format!("/capsules/{old_id}");
    let now = get(&app, &org, &capsule).await;
    hub.expect("capsule create", &[("capsule.created", now)])
        .await;
    owner(
        &app,
        &org,
        M::PATCH,
        &capsule,
        Some(json!({"body": "Read the ADRs first."})),
        200,
    )
    .await;
    let now = get(&app, &org, &capsule).await;
    hub.expect("capsule PATCH", &[("capsule.updated", now)])
        .await;
    owner(&app, &org, M::POST, &format!("{capsule}/freeze"), None, 200).await;
    let now = get(&app, &org, &capsule).await;
    assert_eq!(now["frozen"], json!(true));
    hub.expect("capsule freeze", &[("capsule.updated", now)])
        .await;
    let successor = owner(
        &app,
        &org,
        M::POST,
        &format!("{capsule}/supersede"),
        Some(json!({"body": "Read the ADRs, then the runbooks."})),
        201,
    )
    .await;
    let successor = format!("/capsules/{}", id_of(&successor));
    let new_now = get(&app, &org, &successor).await;
    let old_now = get(&app, &org, &capsule).await;
    assert_eq!(old_now["superseded_by"], new_now["id"]);
    hub.expect(
        "capsule supersede",
        &[
            ("capsule.created", new_now.clone()),
            ("capsule.updated", old_now),
        ],
    )
    .await;
    owner(&app, &org, M::DELETE, &successor, None, 204).await;
    hub.expect("capsule DELETE", &[("capsule.deleted", new_now)])
        .await;

    // Projects and tasks.
    let project = owner(
        &app,
        &org,
        M::POST,
        "/projects",
        Some(json!({"name": "api", "repository_url": "https://example.test/acme/api"})),
        201,
    )
    .await;
    let project_id = id_of(&project);
    let now = get(&app, &org, &format!("/projects/{project_id}")).await;
    hub.expect("project create", &[("project.created", now)])
        .await;

    let task = owner(
        &app,
        &org,
        M::POST,
        "/tasks",
        Some(json!({"title": "Write the migration", "project_id": project_id})),
        201,
    )
    .await;
    let task = format!("/tasks/{}", id_of(&task));
    let now = get(&app, &org, &task).await;
    assert_eq!(now["status"], json!("open"));
    hub.expect("task create", &[("task.created", now)]).await;
    owner(
        &app,
        &org,
        M::PATCH,
        &task,
        Some(json!({"status": "in-progress"})),
        200,
    )
    .await;
    let now = get(&app, &org, &task).await;
    hub.expect("task move to in-progress", &[("task.status_changed", now)])
        .await;
    owner(
        &app,
        &org,
        M::PATCH,
        &task,
        Some(json!({"status": "done"})),
        200,
    )
    .await;
    let now = get(&app, &org, &task).await;
    assert!(
        now["completed_at"].is_string(),
        "done sets completed_at: {now}"
    );
    hub.expect(
        "task move to done",
        &[
            ("task.status_changed", now.clone()),
            ("task.completed", now),
        ],
    )
    .await;

    // Imports: completed, failed (with failure_reason); starting one fires nothing.
    let imports = format!("/projects/{project_id}/imports");
    let started = owner(
        &app,
        &org,
        M::POST,
        &imports,
        Some(json!({"source": "https://example.test/acme/api.git"})),
        202,
    )
    .await;
    let import = format!("/imports/{}", id_of(&started));
    owner(
        &app,
        &org,
        M::POST,
        &format!("{import}/result"),
        Some(json!({"status": "completed"})),
        200,
    )
    .await;
    let now = get(&app, &org, &import).await;
    assert_eq!(now["status"], json!("completed"));
    hub.expect(
        "import start + result completed",
        &[("project.import_completed", now)],
    )
    .await;
    let started = owner(
        &app,
        &org,
        M::POST,
        &imports,
        Some(json!({"source": "https://example.test/acme/gone.git"})),
        202,
    )
    .await;
    let import = format!("/imports/{}", id_of(&started));
    owner(
        &app,
        &org,
        M::POST,
        &format!("{import}/result"),
        Some(json!({"status": "failed", "failure_reason": "repository not found"})),
        200,
    )
    .await;
    let now = get(&app, &org, &import).await;
    assert_eq!(now["failure_reason"], json!("repository not found"));
    hub.expect(
        "import start + result failed",
        &[("project.import_failed", now)],
    )
    .await;

    // Pull-request analyses: one violation, for the ACCEPTED decision only.
    let violating = json!({"decision_id": accepted_id, "summary": "Adds a MySQL client"});
    let harmless = json!({"decision_id": draft_id, "summary": "Adds a Kafka topic"});
    let analysis = owner(
        &app,
        &org,
        M::POST,
        "/pull-requests/analyses",
        Some(json!({"repository": "acme/api", "number": 42,
            "findings": [violating.clone(), harmless]})),
        201,
    )
    .await;
    let analysis = format!("/pull-requests/analyses/{}", id_of(&analysis));
    let now = get(&app, &org, &analysis).await;
    let mut violation = now.clone();
    violation["finding"] = violating;
    hub.expect_unordered(
        "analysis report",
        &[
            ("pr.analysis_completed", now),
            ("pr.violation_detected", violation),
        ],
    )
    .await;
    owner(
        &app,
        &org,
        M::POST,
        &format!("{analysis}/accept"),
        None,
        200,
    )
    .await;
    let now = get(&app, &org, &analysis).await;
    assert_eq!(now["status"], json!("accepted"));
    hub.expect("analysis accept", &[("pr.results_accepted", now)])
        .await;

    // Members: added, role_changed, removed.
    let (user, _) = app.user("events-member@example.test").await;
    owner(
        &app,
        &org,
        M::POST,
        "/members",
        Some(json!({"user_id": user, "role_id": org.member_role})),
        201,
    )
    .await;
    let member = format!("/members/{user}");
    let now = get(&app, &org, &member).await;
    hub.expect("member invite", &[("member.added", now)]).await;
    owner(
        &app,
        &org,
        M::PATCH,
        &member,
        Some(json!({"role_id": org.owner_role})),
        200,
    )
    .await;
    let last = get(&app, &org, &member).await;
    hub.expect(
        "member role change",
        &[("member.role_changed", last.clone())],
    )
    .await;
    owner(&app, &org, M::DELETE, &member, None, 204).await;
    hub.expect("member remove", &[("member.removed", last)])
        .await;

    // Decision delete, with its last GET.
    let last = get(&app, &org, &decision).await;
    owner(&app, &org, M::DELETE, &decision, None, 204).await;
    hub.expect("decision DELETE", &[("decision.deleted", last)])
        .await;

    hub.quiet("after the last operation").await;
    let expected: BTreeSet<String> = ids.iter().map(|id| id.to_string()).collect();
    let missing: Vec<&String> = expected.difference(&hub.covered).collect();
    assert!(missing.is_empty(), "event ids never observed: {missing:?}");
    assert_eq!(hub.covered, expected, "exactly the 22 ids were observed");
}
}

/// One request that must be refused, and nothing else.
struct Refusal<'a> {
    label: &'a str,
    method: Method,
    path: String,
    token: &'a str,
    body: Option<Value>,
    status: u16,
    code: &'a str,
    missing: Option<&'a str>,
}

on_both_engines! {
async fn refused_requests_and_no_op_writes_fire_nothing() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    use Method as M;

    // A reader (read keys only), a plain member, an outsider.
    let reader_role = app
        .role(
            &org,
            "Reader",
            &[
                "org:decisions:read",
                "org:tasks:read",
                "org:memories:read",
                "org:capsules:read",
                "org:projects:read",
                "org:imports:read",
                "org:conflicts:read",
                "org:team:read",
            ],
        )
        .await;
    let (_, reader) = app.member(&org, &reader_role).await;
    let (victim, _) = app.member(&org, &org.member_role).await;
    let (newcomer, _) = app.user("refused-newcomer@example.test").await;
    let (_, outsider) = app.user("refused-outsider@example.test").await;

    // Resources in every state the refusals need, made before the webhook exists.
    let o = |method, path: &str, body, status| {
        let path = path.to_owned();
        let app = &app;
        let org = &org;
        async move { owner(app, org, method, &path, body, status).await }
    };
    let d = id_of(
        &o(
            M::POST,
            "/decisions",
            Some(json!({"title": "Draft", "statement": "s", "rationale": "r",
                "tags": ["a"], "links": ["https://example.test/x"]})),
            201,
        )
        .await,
    );
    let p = id_of(
        &o(
            M::POST,
            "/decisions",
            Some(json!({"title": "Pending", "status": "PENDING"})),
            201,
        )
        .await,
    );
    let t = id_of(&o(M::POST, "/tasks", Some(json!({"title": "Task"})), 201).await);
    let t2 = id_of(&o(M::POST, "/tasks", Some(json!({"title": "Doomed"})), 201).await);
    let m = id_of(&o(M::POST, "/memories", Some(json!({"content": "fact"})), 201).await);
    let c = id_of(
        &o(
            M::POST,
            "/capsules",
            Some(json!({"title": "Open", "body": "b", "scope": "s"})),
            201,
        )
        .await,
    );
    let f = id_of(&o(M::POST, "/capsules", Some(json!({"title": "Frozen"})), 201).await);
    o(M::POST, &format!("/capsules/{f}/freeze"), None, 200).await;
    let s = id_of(&o(M::POST, "/capsules", Some(json!({"title": "Old"})), 201).await);
    let s2 = id_of(
        &o(
            M::POST,
            &format!("/capsules/{s}/supersede"),
            Some(json!({"body": "new"})),
            201,
        )
        .await,
    );
    let pr = id_of(&o(M::POST, "/projects", Some(json!({"name": "api"})), 201).await);
    let pr2 = id_of(&o(M::POST, "/projects", Some(json!({"name": "old"})), 201).await);
    let running = id_of(
        &o(
            M::POST,
            &format!("/projects/{pr}/imports"),
            Some(json!({"source": "git://one"})),
            202,
        )
        .await,
    );
    let finished = id_of(
        &o(
            M::POST,
            &format!("/projects/{pr}/imports"),
            Some(json!({"source": "git://two"})),
            202,
        )
        .await,
    );
    o(
        M::POST,
        &format!("/imports/{finished}/result"),
        Some(json!({"status": "completed"})),
        200,
    )
    .await;
    let findings = json!([{"decision_id": d, "summary": "touches it"}]);
    let proposed = id_of(
        &o(
            M::POST,
            "/pull-requests/analyses",
            Some(json!({"repository": "acme/api", "number": 1, "findings": findings})),
            201,
        )
        .await,
    );
    let accepted = id_of(
        &o(
            M::POST,
            "/pull-requests/analyses",
            Some(json!({"repository": "acme/api", "number": 2, "findings": []})),
            201,
        )
        .await,
    );
    o(
        M::POST,
        &format!("/pull-requests/analyses/{accepted}/accept"),
        None,
        200,
    )
    .await;

    let mut hub = Hub::start(&app, &org, &event_ids()).await;

    let snapshot_paths = vec![
        format!("/decisions/{d}"),
        format!("/decisions/{p}"),
        format!("/tasks/{t}"),
        format!("/tasks/{t2}"),
        format!("/memories/{m}"),
        format!("/capsules/{c}"),
        format!("/capsules/{f}"),
        format!("/capsules/{s}"),
        format!("/capsules/{s2}"),
        format!("/projects/{pr}"),
        format!("/projects/{pr2}"),
        format!("/imports/{running}"),
        format!("/imports/{finished}"),
        format!("/pull-requests/analyses/{proposed}"),
        format!("/pull-requests/analyses/{accepted}"),
        "/decisions?limit=200".to_owned(),
        "/tasks?limit=200".to_owned(),
        "/memories?limit=200".to_owned(),
        "/capsules?limit=200".to_owned(),
        "/projects?limit=200".to_owned(),
        format!("/projects/{pr}/imports?limit=200"),
        "/pull-requests/analyses?limit=200".to_owned(),
        "/members?limit=200".to_owned(),
    ];
    let mut before = Vec::new();
    for path in &snapshot_paths {
        before.push(get(&app, &org, path).await);
    }

    let ot = org.owner_token.as_str();
    let r = reader.as_str();
    let x = unknown_id();
    let refuse = |label, method, path: String, token, body, status, code, missing| Refusal {
        label,
        method,
        path,
        token,
        body,
        status,
        code,
        missing,
    };
    let forbidden = |label, method, path: String, body, key| {
        refuse(label, method, path, r, body, 403, "FORBIDDEN", key)
    };
    let invalid = |label, method, path: String, body| {
        refuse(
            label,
            method,
            path,
            ot,
            body,
            400,
            "VALIDATION_FAILED",
            None,
        )
    };
    let conflict = |label, method, path: String, body, code| {
        refuse(label, method, path, ot, body, 409, code, None)
    };
    let absent = |label, method, path: String, body| {
        refuse(label, method, path, ot, body, 404, "NOT_FOUND", None)
    };
    let refusals = vec![
        // 403: the reader lacks the key.
        forbidden(
            "reader creates a decision",
            M::POST,
            "/decisions".into(),
            Some(json!({"title": "x"})),
            Some("org:decisions:create"),
        ),
        forbidden(
            "reader edits a decision",
            M::PATCH,
            format!("/decisions/{d}"),
            Some(json!({"title": "x"})),
            Some("org:decisions:update"),
        ),
        forbidden(
            "reader deletes a decision",
            M::DELETE,
            format!("/decisions/{d}"),
            None,
            Some("org:decisions:delete"),
        ),
        forbidden(
            "reader moves DRAFT→PENDING",
            M::POST,
            format!("/decisions/{d}/status"),
            Some(json!({"status": "PENDING"})),
            Some("org:decisions:update"),
        ),
        forbidden(
            "reader accepts",
            M::POST,
            format!("/decisions/{p}/status"),
            Some(json!({"status": "ACCEPTED"})),
            Some("org:decisions:accept"),
        ),
        forbidden(
            "reader rejects",
            M::POST,
            format!("/decisions/{p}/status"),
            Some(json!({"status": "REJECTED"})),
            Some("org:decisions:reject"),
        ),
        forbidden(
            "reader deprecates",
            M::POST,
            format!("/decisions/{p}/status"),
            Some(json!({"status": "DEPRECATED"})),
            Some("org:decisions:deprecate"),
        ),
        forbidden(
            "reader opens a task",
            M::POST,
            "/tasks".into(),
            Some(json!({"title": "x"})),
            Some("org:tasks:create"),
        ),
        forbidden(
            "reader moves a task",
            M::PATCH,
            format!("/tasks/{t}"),
            Some(json!({"status": "in-progress"})),
            Some("org:tasks:update"),
        ),
        forbidden(
            "reader deletes a task",
            M::DELETE,
            format!("/tasks/{t}"),
            None,
            Some("org:tasks:delete"),
        ),
        forbidden(
            "reader captures a memory",
            M::POST,
            "/memories".into(),
            Some(json!({"content": "x"})),
            Some("org:memories:create"),
        ),
        forbidden(
            "reader edits a memory",
            M::PATCH,
            format!("/memories/{m}"),
            Some(json!({"content": "x"})),
            Some("org:memories:update"),
        ),
        forbidden(
            "reader deletes a memory",
            M::DELETE,
            format!("/memories/{m}"),
            None,
            Some("org:memories:delete"),
        ),
        forbidden(
            "reader creates a capsule",
            M::POST,
            "/capsules".into(),
            Some(json!({"title": "x"})),
            Some("org:capsules:create"),
        ),
        forbidden(
            "reader edits a capsule",
            M::PATCH,
            format!("/capsules/{c}"),
            Some(json!({"body": "x"})),
            Some("org:capsules:create"),
        ),
        forbidden(
            "reader freezes a capsule",
            M::POST,
            format!("/capsules/{c}/freeze"),
            None,
            Some("org:capsules:freeze"),
        ),
        forbidden(
            "reader supersedes a capsule",
            M::POST,
            format!("/capsules/{c}/supersede"),
            Some(json!({"body": "x"})),
            Some("org:capsules:supersede"),
        ),
        forbidden(
            "reader deletes a capsule",
            M::DELETE,
            format!("/capsules/{c}"),
            None,
            None,
        ),
        forbidden(
            "reader adds a project",
            M::POST,
            "/projects".into(),
            Some(json!({"name": "x"})),
            Some("org:projects:create"),
        ),
        forbidden(
            "reader edits a project",
            M::PATCH,
            format!("/projects/{pr}"),
            Some(json!({"name": "x"})),
            Some("org:projects:update"),
        ),
        forbidden(
            "reader starts an import",
            M::POST,
            format!("/projects/{pr}/imports"),
            Some(json!({"source": "git://x"})),
            Some("org:imports:start"),
        ),
        forbidden(
            "reader cancels an import",
            M::POST,
            format!("/imports/{running}/cancel"),
            None,
            Some("org:imports:cancel"),
        ),
        forbidden(
            "reader reports an import result",
            M::POST,
            format!("/imports/{running}/result"),
            Some(json!({"status": "completed"})),
            Some("org:imports:start"),
        ),
        forbidden(
            "reader reports an analysis",
            M::POST,
            "/pull-requests/analyses".into(),
            Some(json!({"repository": "acme/api", "number": 3, "findings": []})),
            Some("org:conflicts:resolve"),
        ),
        forbidden(
            "reader accepts an analysis",
            M::POST,
            format!("/pull-requests/analyses/{proposed}/accept"),
            None,
            Some("org:conflicts:resolve"),
        ),
        forbidden(
            "reader invites",
            M::POST,
            "/members".into(),
            Some(json!({"user_id": newcomer, "role_id": org.member_role})),
            Some("org:team:invite"),
        ),
        forbidden(
            "reader changes a role",
            M::PATCH,
            format!("/members/{victim}"),
            Some(json!({"role_id": reader_role})),
            Some("org:team:manage"),
        ),
        forbidden(
            "reader removes a member",
            M::DELETE,
            format!("/members/{victim}"),
            None,
            Some("org:team:manage"),
        ),
        // 400.
        invalid(
            "decision created ACCEPTED",
            M::POST,
            "/decisions".into(),
            Some(json!({"title": "x", "status": "ACCEPTED"})),
        ),
        invalid(
            "decision with an empty title",
            M::POST,
            "/decisions".into(),
            Some(json!({"title": ""})),
        ),
        invalid(
            "decision PATCH with an unknown field",
            M::PATCH,
            format!("/decisions/{d}"),
            Some(json!({"title": "x", "bogus": 1})),
        ),
        invalid(
            "decision move to a status that does not exist",
            M::POST,
            format!("/decisions/{d}/status"),
            Some(json!({"status": "DONE"})),
        ),
        invalid(
            "task with a status",
            M::POST,
            "/tasks".into(),
            Some(json!({"title": "x", "status": "done"})),
        ),
        invalid(
            "task with a malformed project_id",
            M::POST,
            "/tasks".into(),
            Some(json!({"title": "x", "project_id": "nope"})),
        ),
        invalid(
            "task moved to an unknown status",
            M::PATCH,
            format!("/tasks/{t}"),
            Some(json!({"status": "closed"})),
        ),
        invalid(
            "memory without content",
            M::POST,
            "/memories".into(),
            Some(json!({})),
        ),
        invalid(
            "memory metadata not an object",
            M::PATCH,
            format!("/memories/{m}"),
            Some(json!({"metadata": "x"})),
        ),
        invalid(
            "capsule PATCH with an empty title",
            M::PATCH,
            format!("/capsules/{c}"),
            Some(json!({"title": ""})),
        ),
        invalid(
            "supersede without a body",
            M::POST,
            format!("/capsules/{c}/supersede"),
            Some(json!({})),
        ),
        invalid(
            "project with an empty name",
            M::POST,
            "/projects".into(),
            Some(json!({"name": ""})),
        ),
        invalid(
            "import without a source",
            M::POST,
            format!("/projects/{pr}/imports"),
            Some(json!({})),
        ),
        invalid(
            "completed import with a failure_reason",
            M::POST,
            format!("/imports/{running}/result"),
            Some(json!({"status": "completed", "failure_reason": "x"})),
        ),
        invalid(
            "import result cancelled",
            M::POST,
            format!("/imports/{running}/result"),
            Some(json!({"status": "cancelled"})),
        ),
        invalid(
            "analysis number 0",
            M::POST,
            "/pull-requests/analyses".into(),
            Some(json!({"repository": "acme/api", "number": 0, "findings": []})),
        ),
        refuse(
            "owner demotes the last Owner",
            M::PATCH,
            format!("/members/{}", org.owner_id),
            ot,
            Some(json!({"role_id": org.member_role})),
            400,
            "MUST_HAVE_OWNER",
            None,
        ),
        refuse(
            "owner removes the last Owner",
            M::DELETE,
            format!("/members/{}", org.owner_id),
            ot,
            None,
            400,
            "MUST_HAVE_OWNER",
            None,
        ),
        // 409.
        conflict(
            "DRAFT→ACCEPTED",
            M::POST,
            format!("/decisions/{d}/status"),
            Some(json!({"status": "ACCEPTED"})),
            "INVALID_TRANSITION",
        ),
        conflict(
            "DRAFT→DRAFT",
            M::POST,
            format!("/decisions/{d}/status"),
            Some(json!({"status": "DRAFT"})),
            "INVALID_TRANSITION",
        ),
        conflict(
            "task open→done",
            M::PATCH,
            format!("/tasks/{t}"),
            Some(json!({"status": "done"})),
            "INVALID_TRANSITION",
        ),
        conflict(
            "PATCH of a frozen capsule",
            M::PATCH,
            format!("/capsules/{f}"),
            Some(json!({"body": "x"})),
            "CAPSULE_FROZEN",
        ),
        conflict(
            "supersede a superseded capsule",
            M::POST,
            format!("/capsules/{s}/supersede"),
            Some(json!({"body": "x"})),
            "INVALID_TRANSITION",
        ),
        conflict(
            "result of a finished import",
            M::POST,
            format!("/imports/{finished}/result"),
            Some(json!({"status": "failed"})),
            "INVALID_TRANSITION",
        ),
        conflict(
            "cancel of a finished import",
            M::POST,
            format!("/imports/{finished}/cancel"),
            None,
            "INVALID_TRANSITION",
        ),
        conflict(
            "accept an accepted analysis",
            M::POST,
            format!("/pull-requests/analyses/{accepted}/accept"),
            None,
            "INVALID_TRANSITION",
        ),
        conflict(
            "invite a member again",
            M::POST,
            "/members".into(),
            Some(json!({"user_id": victim, "role_id": org.member_role})),
            "ALREADY_MEMBER",
        ),
        // 404.
        absent(
            "PATCH an unknown decision",
            M::PATCH,
            format!("/decisions/{x}"),
            Some(json!({"title": "x"})),
        ),
        absent(
            "DELETE an unknown decision",
            M::DELETE,
            format!("/decisions/{x}"),
            None,
        ),
        absent(
            "move an unknown decision",
            M::POST,
            format!("/decisions/{x}/status"),
            Some(json!({"status": "PENDING"})),
        ),
        absent(
            "PATCH an unknown task",
            M::PATCH,
            format!("/tasks/{x}"),
            Some(json!({"status": "in-progress"})),
        ),
        absent(
            "DELETE an unknown memory",
            M::DELETE,
            format!("/memories/{x}"),
            None,
        ),
        absent(
            "freeze an unknown capsule",
            M::POST,
            format!("/capsules/{x}/freeze"),
            None,
        ),
        absent(
            "supersede an unknown capsule",
            M::POST,
            format!("/capsules/{x}/supersede"),
            Some(json!({"body": "x"})),
        ),
        absent(
            "import into an unknown project",
            M::POST,
            format!("/projects/{x}/imports"),
            Some(json!({"source": "git://x"})),
        ),
        absent(
            "result of an unknown import",
            M::POST,
            format!("/imports/{x}/result"),
            Some(json!({"status": "completed"})),
        ),
        absent(
            "accept an unknown analysis",
            M::POST,
            format!("/pull-requests/analyses/{x}/accept"),
            None,
        ),
        absent(
            "invite an unknown user",
            M::POST,
            "/members".into(),
            Some(json!({"user_id": x, "role_id": org.member_role})),
        ),
        absent(
            "remove an unknown member",
            M::DELETE,
            format!("/members/{x}"),
            None,
        ),
        refuse(
            "an outsider creates a decision",
            M::POST,
            "/decisions".into(),
            outsider.as_str(),
            Some(json!({"title": "x"})),
            404,
            "NOT_FOUND",
            None,
        ),
        refuse(
            "an outsider moves a decision",
            M::POST,
            format!("/decisions/{p}/status"),
            outsider.as_str(),
            Some(json!({"status": "ACCEPTED"})),
            404,
            "NOT_FOUND",
            None,
        ),
        // 422.
        refuse(
            "task in an unknown project",
            M::POST,
            "/tasks".into(),
            ot,
            Some(json!({"title": "x", "project_id": x})),
            422,
            "UNKNOWN_PROJECT",
            None,
        ),
        refuse(
            "finding naming an unknown decision",
            M::POST,
            "/pull-requests/analyses".into(),
            ot,
            Some(json!({"repository": "acme/api", "number": 4,
                "findings": [{"decision_id": x, "summary": "x"}]})),
            422,
            "UNKNOWN_DECISION",
            None,
        ),
        refuse(
            "invite with an unknown role",
            M::POST,
            "/members".into(),
            ot,
            Some(json!({"user_id": newcomer, "role_id": x})),
            422,
            "UNKNOWN_ROLE",
            None,
        ),
    ];
    for refusal in &refusals {
        let reply = app
            .call(
                refusal.method.clone(),
                &org.path(&refusal.path),
                Some(refusal.token),
                refusal.body.clone(),
            )
            .await;
        assert_eq!(
            (reply.status, reply.json()["code"].as_str().unwrap_or("")),
            (refusal.status, refusal.code),
            "{}: {} {} must be refused; body: {}",
            refusal.label,
            refusal.method,
            refusal.path,
            String::from_utf8_lossy(&reply.body)
        );
        let body = reply.problem(refusal.status, refusal.code);
        if let Some(key) = refusal.missing {
            assert_eq!(
                body["missing_permission"],
                json!(key),
                "{}: names the missing key",
                refusal.label
            );
        }
    }
    for (path, was) in snapshot_paths.iter().zip(&before) {
        assert_eq!(
            &get(&app, &org, path).await,
            was,
            "refused requests changed GET {path}"
        );
    }

    // No-op writes answer 200 with the unchanged representation.
    let noop = |label: &'static str, method: Method, path: String, read: String, body| {
        let app = &app;
        let org = &org;
        async move {
            let was = get(app, org, &read).await;
            let answer = owner(app, org, method, &path, body, 200).await;
            assert_eq!(answer, was, "{label}: answers the unchanged representation");
            assert_eq!(get(app, org, &read).await, was, "{label}: changes nothing");
        }
    };
    noop(
        "decision PATCH with identical values",
        M::PATCH,
        format!("/decisions/{d}"),
        format!("/decisions/{d}"),
        Some(json!({"title": "Draft", "statement": "s", "rationale": "r",
            "tags": ["a"], "links": ["https://example.test/x"]})),
    )
    .await;
    noop(
        "memory PATCH with identical content",
        M::PATCH,
        format!("/memories/{m}"),
        format!("/memories/{m}"),
        Some(json!({"content": "fact"})),
    )
    .await;
    noop(
        "capsule PATCH with identical values",
        M::PATCH,
        format!("/capsules/{c}"),
        format!("/capsules/{c}"),
        Some(json!({"title": "Open", "body": "b", "scope": "s"})),
    )
    .await;
    noop(
        "freeze of a frozen capsule",
        M::POST,
        format!("/capsules/{f}/freeze"),
        format!("/capsules/{f}"),
        None,
    )
    .await;

    // Writes that fire no event: a task retitled, a project edited, an import
    // started and cancelled, a task and a project deleted.
    let retitled = owner(
        &app,
        &org,
        M::PATCH,
        &format!("/tasks/{t}"),
        Some(json!({"title": "Task, renamed"})),
        200,
    )
    .await;
    assert_eq!(retitled["title"], json!("Task, renamed"));
    let renamed = owner(
        &app,
        &org,
        M::PATCH,
        &format!("/projects/{pr}"),
        Some(json!({"name": "api, renamed"})),
        200,
    )
    .await;
    assert_eq!(renamed["name"], json!("api, renamed"));
    let started = owner(
        &app,
        &org,
        M::POST,
        &format!("/projects/{pr}/imports"),
        Some(json!({"source": "git://three"})),
        202,
    )
    .await;
    let cancelled = owner(
        &app,
        &org,
        M::POST,
        &format!("/imports/{}/cancel", id_of(&started)),
        None,
        200,
    )
    .await;
    assert_eq!(cancelled["status"], json!("cancelled"));
    owner(&app, &org, M::DELETE, &format!("/tasks/{t2}"), None, 204).await;
    owner(
        &app,
        &org,
        M::DELETE,
        &format!("/projects/{pr2}"),
        None,
        204,
    )
    .await;

    // A later event: it must be the first thing delivered since the webhook test.
    let sentinel = owner(
        &app,
        &org,
        M::POST,
        "/memories",
        Some(json!({"content": "sentinel"})),
        201,
    )
    .await;
    let now = get(&app, &org, &format!("/memories/{}", id_of(&sentinel))).await;
    hub.expect(
        "the sentinel memory create, after every refused request and no-op write",
        &[("memory.created", now)],
    )
    .await;
    hub.quiet("after the sentinel").await;
}
}
