//! State machines of the workspace resources (seed 3.1, 3.2, CONTRACT §7):
//! decision status moves and their keys, adjacent task moves, capsule
//! freezing and superseding, import outcomes and pull-request analyses. Every
//! refused move is 409 INVALID_TRANSITION (or CAPSULE_FROZEN) and changes
//! nothing; every allowed one fires its events, checked at a real subscriber
//! (see `resources_events.rs` for how "exactly these, once" is proven).

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{Org, Reply, TestApp};
use crate::resources_events::{event_ids, get, owner, spawn_serial_app, Hub};

const STATUSES: [&str; 5] = ["DRAFT", "PENDING", "ACCEPTED", "REJECTED", "DEPRECATED"];

/// The allowed decision moves and their keys (CONTRACT §7).
const MOVES: [(&str, &str, &str); 5] = [
    ("DRAFT", "PENDING", "org:decisions:update"),
    ("PENDING", "ACCEPTED", "org:decisions:accept"),
    ("PENDING", "REJECTED", "org:decisions:reject"),
    ("PENDING", "DEPRECATED", "org:decisions:deprecate"),
    ("ACCEPTED", "DEPRECATED", "org:decisions:deprecate"),
];

const DECISION_KEYS: [&str; 7] = [
    "org:decisions:create",
    "org:decisions:read",
    "org:decisions:update",
    "org:decisions:delete",
    "org:decisions:accept",
    "org:decisions:reject",
    "org:decisions:deprecate",
];

fn id_of(value: &Value) -> String {
    value["id"].as_str().expect("an id").to_owned()
}

/// `POST {path}/status {"status": to}` with `token`.
async fn move_to(app: &TestApp, org: &Org, id: &str, to: &str, token: &str) -> Reply {
    app.post(
        &org.path(&format!("/decisions/{id}/status")),
        token,
        json!({ "status": to }),
    )
    .await
}

/// A decision in `status`, made by the owner through allowed moves: its id.
async fn decision_in(app: &TestApp, org: &Org, status: &str) -> String {
    let initial = if status == "DRAFT" {
        "DRAFT"
    } else {
        "PENDING"
    };
    let created = owner(
        app,
        org,
        Method::POST,
        "/decisions",
        Some(json!({"title": format!("Decision {status}"), "status": initial})),
        201,
    )
    .await;
    let id = id_of(&created);
    if !matches!(status, "DRAFT" | "PENDING") {
        let reply = move_to(app, org, &id, status, &org.owner_token).await;
        assert_eq!(reply.status, 200, "setup: PENDING→{status}");
    }
    id
}

/// Asserts a 409 INVALID_TRANSITION naming `from` and `to`.
#[track_caller]
fn assert_invalid_transition(reply: &Reply, from: &str, to: &str, case: &str) {
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (409, json!("INVALID_TRANSITION")),
        "{case}: body {}",
        String::from_utf8_lossy(&reply.body)
    );
    let body = reply.problem(409, "INVALID_TRANSITION");
    assert_eq!(
        (&body["from"], &body["to"]),
        (&json!(from), &json!(to)),
        "{case}: the problem names from and to"
    );
}

#[actix_web::test]
async fn every_allowed_decision_move_works_with_its_key_and_only_with_it() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;

    // Per move: a decision in its `from` status, a member holding only the
    // move's key, and one holding every other decision key.
    let mut cases = Vec::new();
    for (i, (from, to, key)) in MOVES.iter().enumerate() {
        let id = decision_in(&app, &org, from).await;
        let holder = app.role(&org, &format!("Mover {i}"), &[key]).await;
        let others: Vec<&str> = DECISION_KEYS.iter().copied().filter(|k| k != key).collect();
        let lacker = app.role(&org, &format!("Lacker {i}"), &others).await;
        let (_, holder) = app.member(&org, &holder).await;
        let (_, lacker) = app.member(&org, &lacker).await;
        cases.push((*from, *to, *key, id, holder, lacker));
    }
    let mut hub = Hub::start(&app, &org, &event_ids()).await;

    for (from, to, key, id, holder, lacker) in &cases {
        let case = format!("{from}→{to}");
        let path = format!("/decisions/{id}");
        let before = get(&app, &org, &path).await;
        assert_eq!(before["status"], json!(from), "{case}: setup");

        let refused = move_to(&app, &org, id, to, lacker).await;
        assert_eq!(refused.status, 403, "{case} without {key}: 403");
        let body = refused.problem(403, "FORBIDDEN");
        assert_eq!(
            body["missing_permission"],
            json!(key),
            "{case}: names the missing key"
        );
        assert_eq!(
            get(&app, &org, &path).await,
            before,
            "{case}: the refused move changed nothing"
        );

        let moved = move_to(&app, &org, id, to, holder).await;
        assert_eq!(
            moved.status,
            200,
            "{case} with only {key}: {}",
            String::from_utf8_lossy(&moved.body)
        );
        let moved = moved.json();
        let now = get(&app, &org, &path).await;
        assert_eq!(moved, now, "{case}: answers the GET representation");
        assert_eq!(now["status"], json!(to), "{case}: the status moved");
        for field in [
            "title",
            "statement",
            "rationale",
            "tags",
            "links",
            "created_at",
        ] {
            assert_eq!(now[field], before[field], "{case}: {field} unchanged");
        }
        assert!(
            now["updated_at"].as_str() >= before["updated_at"].as_str(),
            "{case}: updated_at does not go back"
        );
        hub.expect(&case, &[("decision.status_changed", now)]).await;
    }
    hub.quiet("after the last allowed move").await;
}

#[actix_web::test]
async fn every_other_decision_move_is_409_invalid_transition_and_changes_nothing() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    let mut decisions = Vec::new();
    for status in STATUSES {
        decisions.push((status, decision_in(&app, &org, status).await));
    }
    let mut hub = Hub::start(&app, &org, &event_ids()).await;

    let mut refused = 0;
    for (from, id) in &decisions {
        let path = format!("/decisions/{id}");
        let before = get(&app, &org, &path).await;
        for to in STATUSES {
            if MOVES.iter().any(|(f, t, _)| f == from && *t == to) {
                continue;
            }
            let case = format!("{from}→{to}");
            let reply = move_to(&app, &org, id, to, &org.owner_token).await;
            assert_invalid_transition(&reply, from, to, &case);
            assert_eq!(
                get(&app, &org, &path).await,
                before,
                "{case}: the refused move changed nothing (updated_at included)"
            );
            refused += 1;
        }
    }
    assert_eq!(refused, 20, "25 pairs, 5 allowed");

    // A later allowed move is the first thing delivered: the 409s fired nothing.
    let (_, draft) = &decisions[0];
    move_to(&app, &org, draft, "PENDING", &org.owner_token)
        .await
        .expect(200);
    let now = get(&app, &org, &format!("/decisions/{draft}")).await;
    hub.expect(
        "DRAFT→PENDING after 20 refused moves",
        &[("decision.status_changed", now)],
    )
    .await;
    hub.quiet("after the allowed move").await;
}

#[actix_web::test]
async fn a_decision_is_created_draft_or_pending_only() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    let mut hub = Hub::start(&app, &org, &event_ids()).await;

    let cases = [
        ("no status", json!({"title": "Implicit"}), "DRAFT"),
        (
            "DRAFT",
            json!({"title": "Draft", "status": "DRAFT"}),
            "DRAFT",
        ),
        (
            "PENDING",
            json!({"title": "Proposed", "status": "PENDING"}),
            "PENDING",
        ),
    ];
    for (case, body, status) in cases {
        let created = owner(&app, &org, Method::POST, "/decisions", Some(body), 201).await;
        let now = get(&app, &org, &format!("/decisions/{}", id_of(&created))).await;
        assert_eq!(
            created, now,
            "create {case}: answers the GET representation"
        );
        assert_eq!(now["status"], json!(status), "create {case}");
        hub.expect(&format!("create {case}"), &[("decision.created", now)])
            .await;
    }
    for status in ["ACCEPTED", "REJECTED", "DEPRECATED"] {
        let reply = app
            .post(
                &org.path("/decisions"),
                &org.owner_token,
                json!({"title": "Straight in", "status": status}),
            )
            .await;
        assert_eq!(reply.status, 400, "create {status}: 400");
        reply.problem(400, "VALIDATION_FAILED");
    }
    let list = get(&app, &org, "/decisions?limit=200").await;
    assert_eq!(
        list["items"].as_array().map(Vec::len),
        Some(3),
        "only the three valid creates exist: {list}"
    );
    hub.quiet("after the refused creates").await;
}

#[actix_web::test]
async fn task_status_moves_only_to_adjacent_statuses() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    let mut hub = Hub::start(&app, &org, &event_ids()).await;

    let created = owner(
        &app,
        &org,
        Method::POST,
        "/tasks",
        Some(json!({"title": "Ship it", "description": "all of it"})),
        201,
    )
    .await;
    let path = format!("/tasks/{}", id_of(&created));
    let now = get(&app, &org, &path).await;
    assert_eq!(created, now, "create answers the GET representation");
    assert_eq!(
        (&now["status"], &now["completed_at"]),
        (&json!("open"), &Value::Null),
        "a new task is open"
    );
    hub.expect("task create", &[("task.created", now)]).await;

    let step = |to: &'static str| {
        let app = &app;
        let org = &org;
        let path = path.clone();
        async move {
            let answer = owner(
                app,
                org,
                Method::PATCH,
                &path,
                Some(json!({ "status": to })),
                200,
            )
            .await;
            let now = get(app, org, &path).await;
            assert_eq!(answer, now, "move to {to}: answers the GET representation");
            assert_eq!(now["status"], json!(to), "move to {to}");
            now
        }
    };
    let refuse = |from: &'static str, to: &'static str| {
        let app = &app;
        let org = &org;
        let path = path.clone();
        async move {
            let before = get(app, org, &path).await;
            let reply = app
                .patch(&org.path(&path), &org.owner_token, json!({ "status": to }))
                .await;
            assert_invalid_transition(&reply, from, to, &format!("task {from}→{to}"));
            assert_eq!(
                get(app, org, &path).await,
                before,
                "task {from}→{to}: changes nothing"
            );
        }
    };

    let now = step("in-progress").await;
    assert_eq!(
        now["completed_at"],
        Value::Null,
        "in-progress: not completed"
    );
    hub.expect("open→in-progress", &[("task.status_changed", now)])
        .await;

    let now = step("done").await;
    let completed_at = now["completed_at"].as_str().unwrap_or("");
    assert!(
        crate::webhook_delivery::is_rfc3339_millis(completed_at),
        "done sets completed_at: {now}"
    );
    hub.expect(
        "in-progress→done",
        &[
            ("task.status_changed", now.clone()),
            ("task.completed", now),
        ],
    )
    .await;

    refuse("done", "open").await;

    let now = step("in-progress").await;
    assert_eq!(
        now["completed_at"],
        Value::Null,
        "leaving done clears completed_at"
    );
    hub.expect(
        "done→in-progress (after done→open was refused)",
        &[("task.status_changed", now)],
    )
    .await;

    let now = step("open").await;
    hub.expect("in-progress→open", &[("task.status_changed", now)])
        .await;

    refuse("open", "done").await;

    let now = step("in-progress").await;
    hub.expect(
        "open→in-progress (after open→done was refused)",
        &[("task.status_changed", now)],
    )
    .await;
    hub.quiet("after the last task move").await;
}

#[actix_web::test]
async fn capsules_freeze_refuse_edits_and_are_superseded_once() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    let mut hub = Hub::start(&app, &org, &event_ids()).await;
    use Method as M;

    let created = owner(
        &app,
        &org,
        M::POST,
        "/capsules",
        Some(json!({"title": "Runbook", "body": "v1", "scope": "ops",
            "attachments": ["https://example.test/runbook"]})),
        201,
    )
    .await;
    let old_id = id_of(&created);
    let old = format!("/capsules/{old_id}");
    let now = get(&app, &org, &old).await;
    assert_eq!(created, now, "create answers the GET representation");
    assert_eq!(
        (&now["frozen"], &now["superseded_by"]),
        (&json!(false), &Value::Null),
        "a new capsule is editable"
    );
    hub.expect("capsule create", &[("capsule.created", now)])
        .await;

    let edited = owner(&app, &org, M::PATCH, &old, Some(json!({"body": "v2"})), 200).await;
    let now = get(&app, &org, &old).await;
    assert_eq!(edited, now, "PATCH answers the GET representation");
    assert_eq!(now["body"], json!("v2"));
    hub.expect("capsule PATCH", &[("capsule.updated", now)])
        .await;

    let frozen = owner(&app, &org, M::POST, &format!("{old}/freeze"), None, 200).await;
    let now = get(&app, &org, &old).await;
    assert_eq!(frozen, now, "freeze answers the GET representation");
    assert_eq!(now["frozen"], json!(true), "freeze sets frozen");
    assert_eq!(now["body"], json!("v2"), "freeze changes nothing else");
    hub.expect("capsule freeze", &[("capsule.updated", now.clone())])
        .await;

    for body in [
        json!({"body": "v3"}),
        json!({"title": "Other"}),
        json!({"scope": "dev"}),
        json!({"attachments": []}),
    ] {
        let reply = app
            .patch(&org.path(&old), &org.owner_token, body.clone())
            .await;
        assert_eq!(reply.status, 409, "PATCH {body} of a frozen capsule");
        reply.problem(409, "CAPSULE_FROZEN");
        assert_eq!(
            get(&app, &org, &old).await,
            now,
            "PATCH {body} of a frozen capsule changed nothing"
        );
    }

    // Supersede with only a body: title and scope default to the old ones.
    let successor = owner(
        &app,
        &org,
        M::POST,
        &format!("{old}/supersede"),
        Some(json!({"body": "v3"})),
        201,
    )
    .await;
    let new_id = id_of(&successor);
    assert_ne!(new_id, old_id, "the successor is a new capsule");
    let new = format!("/capsules/{new_id}");
    let new_now = get(&app, &org, &new).await;
    assert_eq!(successor, new_now, "supersede answers the successor's GET");
    assert_eq!(
        new_now["title"],
        json!("Runbook"),
        "title defaults to the old one"
    );
    assert_eq!(
        new_now["scope"],
        json!("ops"),
        "scope defaults to the old one"
    );
    assert_eq!(new_now["body"], json!("v3"));
    assert_eq!(new_now["organization_id"], json!(org.id));
    assert_eq!(
        (&new_now["frozen"], &new_now["superseded_by"]),
        (&json!(false), &Value::Null),
        "the successor is editable"
    );
    let old_now = get(&app, &org, &old).await;
    assert_eq!(
        old_now["frozen"],
        json!(true),
        "the old capsule stays frozen"
    );
    assert_eq!(
        old_now["superseded_by"],
        json!(new_id),
        "the old capsule points to its successor"
    );
    for field in ["title", "body", "scope", "attachments", "created_at"] {
        assert_eq!(
            old_now[field], now[field],
            "supersede keeps the old {field}"
        );
    }
    hub.expect(
        "supersede",
        &[
            ("capsule.created", new_now.clone()),
            ("capsule.updated", old_now.clone()),
        ],
    )
    .await;

    let reply = app
        .post(
            &org.path(&format!("{old}/supersede")),
            &org.owner_token,
            json!({"body": "v4"}),
        )
        .await;
    assert_eq!(reply.status, 409, "superseding twice");
    let body = reply.problem(409, "INVALID_TRANSITION");
    assert!(
        body["from"].is_string() && body["to"].is_string(),
        "superseding twice names from and to: {body}"
    );
    assert_eq!(
        get(&app, &org, &old).await,
        old_now,
        "superseding twice changed nothing"
    );
    let list = get(&app, &org, "/capsules?limit=200").await;
    assert_eq!(
        list["items"].as_array().map(Vec::len),
        Some(2),
        "superseding twice created nothing: {list}"
    );

    // Supersede an unfrozen capsule with every field.
    let third = owner(
        &app,
        &org,
        M::POST,
        &format!("{new}/supersede"),
        Some(json!({"title": "Runbook 2", "body": "v4", "scope": "platform"})),
        201,
    )
    .await;
    let third_now = get(&app, &org, &format!("/capsules/{}", id_of(&third))).await;
    assert_eq!(third, third_now, "supersede answers the successor's GET");
    assert_eq!(
        (&third_now["title"], &third_now["body"], &third_now["scope"]),
        (&json!("Runbook 2"), &json!("v4"), &json!("platform")),
        "the given title, body and scope"
    );
    let second_now = get(&app, &org, &new).await;
    assert_eq!(
        (&second_now["frozen"], &second_now["superseded_by"]),
        (&json!(true), &third_now["id"]),
        "superseding freezes an unfrozen capsule"
    );
    hub.expect(
        "supersede an unfrozen capsule (after superseding twice was refused)",
        &[
            ("capsule.created", third_now),
            ("capsule.updated", second_now),
        ],
    )
    .await;
    hub.quiet("after the last supersede").await;
}

#[actix_web::test]
async fn imports_finish_once_and_only_results_fire_events() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    let mut hub = Hub::start(&app, &org, &event_ids()).await;
    use Method as M;

    let project = owner(
        &app,
        &org,
        M::POST,
        "/projects",
        Some(json!({"name": "api"})),
        201,
    )
    .await;
    let project_id = id_of(&project);
    let now = get(&app, &org, &format!("/projects/{project_id}")).await;
    hub.expect("project create", &[("project.created", now)])
        .await;

    let start = |source: &'static str| {
        let app = &app;
        let org = &org;
        let project_id = project_id.clone();
        async move {
            let started = owner(
                app,
                org,
                M::POST,
                &format!("/projects/{project_id}/imports"),
                Some(json!({ "source": source })),
                202,
            )
            .await;
            let path = format!("/imports/{}", id_of(&started));
            let now = get(app, org, &path).await;
            assert_eq!(started, now, "import start answers the GET representation");
            let keys: std::collections::BTreeSet<&str> = now
                .as_object()
                .expect("object")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(
                keys,
                std::collections::BTreeSet::from([
                    "created_at",
                    "failure_reason",
                    "finished_at",
                    "id",
                    "project_id",
                    "source",
                    "status"
                ]),
                "import members"
            );
            assert_eq!(
                (
                    &now["status"],
                    &now["project_id"],
                    &now["source"],
                    &now["failure_reason"],
                    &now["finished_at"]
                ),
                (
                    &json!("running"),
                    &json!(project_id),
                    &json!(source),
                    &Value::Null,
                    &Value::Null
                ),
                "a started import is running"
            );
            path
        }
    };
    let refuse = |path: String, action: &'static str, body: Option<Value>, from, to| {
        let app = &app;
        let org = &org;
        async move {
            let before = get(app, org, &path).await;
            let reply = app
                .call(
                    M::POST,
                    &org.path(&format!("{path}/{action}")),
                    Some(&org.owner_token),
                    body,
                )
                .await;
            assert_invalid_transition(&reply, from, to, &format!("{action} of a {from} import"));
            assert_eq!(
                get(app, org, &path).await,
                before,
                "{action} of a {from} import changed nothing"
            );
        }
    };

    // Cancel: 200, no event.
    let a = start("git://a").await;
    let cancelled = owner(&app, &org, M::POST, &format!("{a}/cancel"), None, 200).await;
    let now = get(&app, &org, &a).await;
    assert_eq!(cancelled, now, "cancel answers the GET representation");
    assert_eq!(now["status"], json!("cancelled"));
    assert!(
        now["finished_at"].is_string(),
        "cancel sets finished_at: {now}"
    );
    assert_eq!(now["failure_reason"], Value::Null);
    let completed = json!({"status": "completed"});
    refuse(
        a.clone(),
        "result",
        Some(completed.clone()),
        "cancelled",
        "completed",
    )
    .await;
    refuse(a.clone(), "cancel", None, "cancelled", "cancelled").await;

    // Completed: 200 and project.import_completed, the first event since the project.
    let b = start("git://b").await;
    let done = owner(
        &app,
        &org,
        M::POST,
        &format!("{b}/result"),
        Some(completed.clone()),
        200,
    )
    .await;
    let now = get(&app, &org, &b).await;
    assert_eq!(done, now, "result answers the GET representation");
    assert_eq!(
        (&now["status"], &now["failure_reason"]),
        (&json!("completed"), &Value::Null)
    );
    assert!(
        now["finished_at"].is_string(),
        "a result sets finished_at: {now}"
    );
    hub.expect(
        "result completed (after a start, a cancel and refused results)",
        &[("project.import_completed", now)],
    )
    .await;
    let failed = json!({"status": "failed", "failure_reason": "late"});
    refuse(b.clone(), "result", Some(failed), "completed", "failed").await;
    refuse(
        b.clone(),
        "result",
        Some(completed.clone()),
        "completed",
        "completed",
    )
    .await;
    refuse(b.clone(), "cancel", None, "completed", "cancelled").await;

    // Failed: 200 and project.import_failed carrying failure_reason.
    let c = start("git://c").await;
    let reason = "clone timed out after 300 s";
    let done = owner(
        &app,
        &org,
        M::POST,
        &format!("{c}/result"),
        Some(json!({"status": "failed", "failure_reason": reason})),
        200,
    )
    .await;
    let now = get(&app, &org, &c).await;
    assert_eq!(done, now, "result answers the GET representation");
    assert_eq!(
        (&now["status"], &now["failure_reason"]),
        (&json!("failed"), &json!(reason))
    );
    assert!(
        now["finished_at"].is_string(),
        "a result sets finished_at: {now}"
    );
    hub.expect(
        "result failed (after refused moves of a completed import)",
        &[("project.import_failed", now)],
    )
    .await;
    refuse(c.clone(), "result", Some(completed), "failed", "completed").await;
    refuse(c.clone(), "cancel", None, "failed", "cancelled").await;

    // A later event comes first: the refusals fired nothing.
    let sentinel = owner(
        &app,
        &org,
        M::POST,
        "/projects",
        Some(json!({"name": "sentinel"})),
        201,
    )
    .await;
    let now = get(&app, &org, &format!("/projects/{}", id_of(&sentinel))).await;
    hub.expect(
        "sentinel project (after refused moves of a failed import)",
        &[("project.created", now)],
    )
    .await;
    hub.quiet("after the sentinel").await;
}

#[actix_web::test]
async fn pr_analyses_flag_only_accepted_decisions_and_are_accepted_once() {
    let app = spawn_serial_app().await;
    let org = app.org("enterprise").await;
    let accepted = decision_in(&app, &org, "ACCEPTED").await;
    let draft = decision_in(&app, &org, "DRAFT").await;
    let pending = decision_in(&app, &org, "PENDING").await;
    let rejected = decision_in(&app, &org, "REJECTED").await;
    let deprecated = decision_in(&app, &org, "DEPRECATED").await;
    let mut hub = Hub::start(&app, &org, &event_ids()).await;
    use Method as M;

    let violating = json!({"decision_id": accepted, "summary": "adds a second database"});
    let harmless = json!({"decision_id": draft, "summary": "touches a draft"});
    let reported = owner(
        &app,
        &org,
        M::POST,
        "/pull-requests/analyses",
        Some(json!({"repository": "acme/api", "number": 7,
            "findings": [harmless.clone(), violating.clone()]})),
        201,
    )
    .await;
    let path = format!("/pull-requests/analyses/{}", id_of(&reported));
    let now = get(&app, &org, &path).await;
    assert_eq!(reported, now, "report answers the GET representation");
    assert_eq!(
        (
            &now["repository"],
            &now["number"],
            &now["status"],
            &now["findings"]
        ),
        (
            &json!("acme/api"),
            &json!(7),
            &json!("proposed"),
            &json!([harmless, violating.clone()])
        ),
        "the reported analysis"
    );
    let mut violation = now.clone();
    violation["finding"] = violating;
    hub.expect_unordered(
        "report with an ACCEPTED and a DRAFT decision",
        &[
            ("pr.analysis_completed", now),
            ("pr.violation_detected", violation),
        ],
    )
    .await;

    let answer = owner(&app, &org, M::POST, &format!("{path}/accept"), None, 200).await;
    let now = get(&app, &org, &path).await;
    assert_eq!(answer, now, "accept answers the GET representation");
    assert_eq!(now["status"], json!("accepted"));
    hub.expect("accept", &[("pr.results_accepted", now.clone())])
        .await;

    let reply = app
        .call(
            M::POST,
            &org.path(&format!("{path}/accept")),
            Some(&org.owner_token),
            None,
        )
        .await;
    assert_eq!(reply.status, 409, "accepting twice");
    let body = reply.problem(409, "INVALID_TRANSITION");
    assert!(
        body["from"].is_string() && body["to"].is_string(),
        "accepting twice names from and to: {body}"
    );
    assert_eq!(
        get(&app, &org, &path).await,
        now,
        "accepting twice changed nothing"
    );

    // No decision but an ACCEPTED one is a violation.
    let findings: Vec<Value> = [pending, rejected, deprecated]
        .iter()
        .map(|id| json!({"decision_id": id, "summary": "touches it"}))
        .collect();
    let reported = owner(
        &app,
        &org,
        M::POST,
        "/pull-requests/analyses",
        Some(json!({"repository": "acme/api", "number": 8, "findings": findings})),
        201,
    )
    .await;
    let now = get(
        &app,
        &org,
        &format!("/pull-requests/analyses/{}", id_of(&reported)),
    )
    .await;
    hub.expect(
        "report with PENDING, REJECTED and DEPRECATED decisions (after accepting twice)",
        &[("pr.analysis_completed", now)],
    )
    .await;
    hub.quiet("after the last report").await;
}
