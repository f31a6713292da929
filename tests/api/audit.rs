//! The audit log (CONTRACT §5a): one record per successful change, with the
//! REST representations before and after, the actor and the request id;
//! nothing for refused requests or no-op PATCHes; newest first, filterable,
//! paged with an opaque cursor; readable with `org:settings:read` only.

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Org, Reply, Req, TestApp};

/// A request with an optional JSON body and extra headers.
async fn send_json(
    app: &TestApp,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
    headers: &[(&'static str, &str)],
) -> Reply {
    let req = headers.iter().fold(
        Req::json(method, path, token, body),
        |req, (name, value)| req.header(name, *value),
    );
    app.raw(req).await
}

/// The response's `X-Request-Id`, which must be present.
#[track_caller]
fn request_id_of(reply: &Reply) -> String {
    let id = reply.header("x-request-id");
    assert!(
        !id.is_empty(),
        "response without X-Request-Id (status {})",
        reply.status
    );
    id
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn is_millis_timestamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 24
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            10 => *b == b'T',
            13 | 16 => *b == b':',
            19 => *b == b'.',
            23 => *b == b'Z',
            _ => b.is_ascii_digit(),
        })
}

/// The organization's id, owner and system roles, for an org made by hand.
async fn org_handle(app: &TestApp, id: &str, owner_id: &str, owner_token: &str) -> Org {
    let roles = app
        .get(&format!("/organizations/{id}/roles"), owner_token)
        .await
        .expect(200)
        .json();
    let role = |i: usize| {
        roles["items"][i]["id"]
            .as_str()
            .expect("role id")
            .to_owned()
    };
    Org {
        id: id.to_owned(),
        owner_id: owner_id.to_owned(),
        owner_token: owner_token.to_owned(),
        owner_role: role(0),
        member_role: role(1),
    }
}

/// One record the log must hold.
struct Expected {
    actor: Value,
    action: &'static str,
    target_type: &'static str,
    target_id: String,
    before: Value,
    after: Value,
    request_id: String,
}

/// The whole log page body (limit 200) as the owner.
async fn audit_page(app: &TestApp, org: &Org, query: &str) -> Value {
    app.get(&org.path(&format!("/audit-log{query}")), &org.owner_token)
        .await
        .expect(200)
        .json()
}

on_both_engines! {
async fn every_mutation_is_recorded_exactly_once_with_rest_representations() {
    let app = spawn_app().await;
    let (owner_id, owner_token) = app.user("audit-owner@example.test").await;
    let mut expected: Vec<Expected> = Vec::new();

    // organization.created, by the admin token: actor null.
    let created = send_json(
        &app,
        Method::POST,
        "/admin/organizations",
        Some(&app.admin),
        Some(json!({"name": "Audited", "plan": "enterprise", "owner_user_id": owner_id})),
        &[],
    )
    .await
    .expect(201);
    let org_json = created.json();
    let org_id = org_json["id"].as_str().expect("org id").to_owned();
    expected.push(Expected {
        actor: Value::Null,
        action: "organization.created",
        target_type: "organization",
        target_id: org_id.clone(),
        before: Value::Null,
        after: org_json.clone(),
        request_id: request_id_of(&created),
    });
    let org = org_handle(&app, &org_id, &owner_id, &owner_token).await;
    let owner = json!(owner_id);

    // role.created, with an incoming X-Request-Id that is honoured and echoed.
    let role_created = send_json(
        &app,
        Method::POST,
        &org.path("/roles"),
        Some(&owner_token),
        Some(json!({
            "name": "Reviewer",
            "description": "Reads decisions",
            "permissions": ["org:decisions:read", "org:team:read"]
        })),
        &[("X-Request-Id", "my-trace-123")],
    )
    .await
    .expect(201);
    assert_eq!(role_created.header("x-request-id"), "my-trace-123");
    let role_json = role_created.json();
    let role_id = role_json["id"].as_str().expect("role id").to_owned();
    let role_path = org.path(&format!("/roles/{role_id}"));
    expected.push(Expected {
        actor: owner.clone(),
        action: "role.created",
        target_type: "role",
        target_id: role_id.clone(),
        before: Value::Null,
        after: role_json.clone(),
        request_id: "my-trace-123".to_owned(),
    });

    // role.updated: before is the GET just before, after is the PATCH answer.
    let role_get = app.get(&role_path, &owner_token).await.expect(200);
    let etag = role_get.header("etag");
    let role_before_update = role_get.json();
    let role_updated = send_json(
        &app,
        Method::PATCH,
        &role_path,
        Some(&owner_token),
        Some(json!({"description": "Reads decisions and the team"})),
        &[("If-Match", &etag)],
    )
    .await
    .expect(200);
    expected.push(Expected {
        actor: owner.clone(),
        action: "role.updated",
        target_type: "role",
        target_id: role_id.clone(),
        before: role_before_update,
        after: role_updated.json(),
        request_id: request_id_of(&role_updated),
    });

    // member.added: after is the POST answer.
    let (member_id, member_token) = app.user("audit-member@example.test").await;
    let added = app
        .post(
            &org.path("/members"),
            &owner_token,
            json!({"user_id": member_id, "role_id": role_id}),
        )
        .await
        .expect(201);
    expected.push(Expected {
        actor: owner.clone(),
        action: "member.added",
        target_type: "member",
        target_id: member_id.clone(),
        before: Value::Null,
        after: added.json(),
        request_id: request_id_of(&added),
    });

    // member.role_changed: before is the membership's GET, after the PATCH answer.
    let member_path = org.path(&format!("/members/{member_id}"));
    let membership_before = app.get(&member_path, &owner_token).await.expect(200).json();
    let changed = app
        .patch(
            &member_path,
            &owner_token,
            json!({"role_id": org.member_role}),
        )
        .await
        .expect(200);
    expected.push(Expected {
        actor: owner.clone(),
        action: "member.role_changed",
        target_type: "member",
        target_id: member_id.clone(),
        before: membership_before,
        after: changed.json(),
        request_id: request_id_of(&changed),
    });

    // member.removed: before is the membership's last GET.
    let membership_last = app.get(&member_path, &owner_token).await.expect(200).json();
    let removed = app.delete(&member_path, &owner_token).await.expect(204);
    expected.push(Expected {
        actor: owner.clone(),
        action: "member.removed",
        target_type: "member",
        target_id: member_id.clone(),
        before: membership_last,
        after: Value::Null,
        request_id: request_id_of(&removed),
    });

    // role.deleted: before is the role's last GET.
    let role_last = app.get(&role_path, &owner_token).await.expect(200);
    let etag = role_last.header("etag");
    let role_deleted = send_json(
        &app,
        Method::DELETE,
        &role_path,
        Some(&owner_token),
        None,
        &[("If-Match", &etag)],
    )
    .await
    .expect(204);
    expected.push(Expected {
        actor: owner.clone(),
        action: "role.deleted",
        target_type: "role",
        target_id: role_id.clone(),
        before: role_last.json(),
        after: Value::Null,
        request_id: request_id_of(&role_deleted),
    });

    // organization.plan_changed by the admin: actor null.
    let org_before = app
        .get(&org.path(""), &owner_token)
        .await
        .expect(200)
        .json();
    let admin_plan = app
        .patch(
            &format!("/admin/organizations/{org_id}"),
            &app.admin,
            json!({"plan": "pro"}),
        )
        .await
        .expect(200);
    assert_eq!(admin_plan.json()["plan"], json!("pro"));
    expected.push(Expected {
        actor: Value::Null,
        action: "organization.plan_changed",
        target_type: "organization",
        target_id: org_id.clone(),
        before: org_before,
        after: admin_plan.json(),
        request_id: request_id_of(&admin_plan),
    });

    // organization.plan_changed by the owner.
    let org_before = app
        .get(&org.path(""), &owner_token)
        .await
        .expect(200)
        .json();
    let owner_plan = app
        .patch(&org.path(""), &owner_token, json!({"plan": "enterprise"}))
        .await
        .expect(200);
    assert_eq!(owner_plan.json()["plan"], json!("enterprise"));
    expected.push(Expected {
        actor: owner.clone(),
        action: "organization.plan_changed",
        target_type: "organization",
        target_id: org_id.clone(),
        before: org_before,
        after: owner_plan.json(),
        request_id: request_id_of(&owner_plan),
    });

    // organization.renamed: only the name changed.
    let org_before = app
        .get(&org.path(""), &owner_token)
        .await
        .expect(200)
        .json();
    let renamed = app
        .patch(
            &org.path(""),
            &owner_token,
            json!({"name": "Audited Renamed"}),
        )
        .await
        .expect(200);
    assert_eq!(renamed.json()["name"], json!("Audited Renamed"));
    expected.push(Expected {
        actor: owner.clone(),
        action: "organization.renamed",
        target_type: "organization",
        target_id: org_id.clone(),
        before: org_before,
        after: renamed.json(),
        request_id: request_id_of(&renamed),
    });

    // Name and plan at once: one record, organization.plan_changed.
    let org_before = app
        .get(&org.path(""), &owner_token)
        .await
        .expect(200)
        .json();
    let both = app
        .patch(
            &org.path(""),
            &owner_token,
            json!({"name": "Audited Both", "plan": "free"}),
        )
        .await
        .expect(200);
    expected.push(Expected {
        actor: owner.clone(),
        action: "organization.plan_changed",
        target_type: "organization",
        target_id: org_id.clone(),
        before: org_before,
        after: both.json(),
        request_id: request_id_of(&both),
    });
    assert_eq!(
        app.get(&org.path(""), &owner_token)
            .await
            .expect(200)
            .json(),
        both.json(),
        "the organization's GET equals the last PATCH answer"
    );

    // The log: exactly these records, newest first.
    let page = audit_page(&app, &org, "?limit=200").await;
    assert_eq!(page["next_cursor"], Value::Null);
    let records = page["items"].as_array().expect("items").clone();
    let actions: Vec<&str> = records
        .iter()
        .map(|r| r["action"].as_str().unwrap_or("?"))
        .collect();
    let wanted: Vec<&str> = expected.iter().rev().map(|e| e.action).collect();
    assert_eq!(actions, wanted, "one record per mutation, newest first");

    let mut ids = std::collections::HashSet::new();
    let mut request_ids = std::collections::HashSet::new();
    for (record, want) in records.iter().zip(expected.iter().rev()) {
        let what = want.action;
        let fields: Vec<&str> = record
            .as_object()
            .expect("record is an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut fields_sorted = fields.clone();
        fields_sorted.sort_unstable();
        assert_eq!(
            fields_sorted,
            vec![
                "action",
                "actor_user_id",
                "after",
                "before",
                "id",
                "occurred_at",
                "organization_id",
                "request_id",
                "target_id",
                "target_type"
            ],
            "{what}: record members"
        );
        let id = record["id"].as_str().expect("id");
        assert!(
            uuid::Uuid::parse_str(id).is_ok(),
            "{what}: id {id} is not a UUID"
        );
        assert!(ids.insert(id.to_owned()), "{what}: duplicate record id");
        assert_eq!(record["organization_id"], json!(org_id), "{what}");
        assert_eq!(record["actor_user_id"], want.actor, "{what}: actor");
        assert_eq!(record["target_type"], json!(want.target_type), "{what}");
        assert_eq!(record["target_id"], json!(want.target_id), "{what}");
        assert_eq!(record["before"], want.before, "{what}: before");
        assert_eq!(record["after"], want.after, "{what}: after");
        assert_eq!(
            record["request_id"],
            json!(want.request_id),
            "{what}: request_id"
        );
        assert!(
            request_ids.insert(want.request_id.clone()),
            "{what}: request ids are per request"
        );
        let at = record["occurred_at"].as_str().expect("occurred_at");
        assert!(is_millis_timestamp(at), "{what}: occurred_at {at}");
    }
    let times: Vec<&str> = records
        .iter()
        .map(|r| r["occurred_at"].as_str().unwrap_or(""))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );

    // Secrets never appear: no token string anywhere in the log.
    let text = serde_json::to_string(&page).expect("serialize");
    for (who, token) in [
        ("owner", owner_token.as_str()),
        ("member", member_token.as_str()),
        ("admin", app.admin.as_str()),
    ] {
        assert!(
            !text.contains(token),
            "the {who} token appears in the audit log"
        );
    }
}
}

on_both_engines! {
async fn request_ids_are_echoed_and_unacceptable_ones_replaced() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;

    // No incoming id: one is generated, echoed, and stored.
    let plain = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "Plain"}),
        )
        .await
        .expect(201);
    let generated = request_id_of(&plain);

    // A sane incoming id is honoured.
    let traced = send_json(
        &app,
        Method::POST,
        &org.path("/roles"),
        Some(&org.owner_token),
        Some(json!({"name": "Traced"})),
        &[("X-Request-Id", "my-trace-123")],
    )
    .await
    .expect(201);
    assert_eq!(traced.header("x-request-id"), "my-trace-123");

    // An id longer than 128 characters is not honoured: a fresh one is used.
    let too_long = "x".repeat(129);
    let long = send_json(
        &app,
        Method::POST,
        &org.path("/roles"),
        Some(&org.owner_token),
        Some(json!({"name": "Long"})),
        &[("X-Request-Id", &too_long)],
    )
    .await
    .expect(201);
    let replaced = request_id_of(&long);
    assert_ne!(replaced, too_long);

    // Refused requests carry a request id too.
    let refused = send_json(
        &app,
        Method::POST,
        &org.path("/roles"),
        Some(&org.owner_token),
        Some(json!({"name": "Plain"})),
        &[("X-Request-Id", "refused-trace-1")],
    )
    .await;
    refused.problem(409, "NAME_CONFLICT");
    assert_eq!(refused.header("x-request-id"), "refused-trace-1");

    let stored: Vec<(String, String)> = app
        .audit(&org)
        .await
        .iter()
        .filter(|r| r["action"] == json!("role.created"))
        .map(|r| {
            (
                r["after"]["name"].as_str().unwrap_or("").to_owned(),
                r["request_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        stored,
        vec![
            ("Long".to_owned(), replaced),
            ("Traced".to_owned(), "my-trace-123".to_owned()),
            ("Plain".to_owned(), generated),
        ]
    );
}
}

on_both_engines! {
async fn action_filter_keeps_only_that_action_newest_first() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let first = app.role(&org, "Alpha", &["org:tasks:read"]).await;
    let (member, _) = app.member(&org, &first).await;
    let second = app.role(&org, "Beta", &[]).await;
    let third = app.role(&org, "Gamma", &["org:tasks:create"]).await;

    let page = audit_page(&app, &org, "?action=role.created").await;
    assert_eq!(page["next_cursor"], Value::Null);
    let items = page["items"].as_array().expect("items");
    let targets: Vec<&Value> = items.iter().map(|r| &r["target_id"]).collect();
    assert_eq!(targets, vec![&json!(third), &json!(second), &json!(first)]);
    assert!(items.iter().all(|r| r["action"] == json!("role.created")));

    let added = audit_page(&app, &org, "?action=member.added").await;
    let added = added["items"].as_array().expect("items");
    assert_eq!(added.len(), 1);
    assert_eq!(added[0]["target_id"], json!(member));
    assert_eq!(added[0]["target_type"], json!("member"));

    let none = audit_page(&app, &org, "?action=role.deleted").await;
    assert_eq!(none, json!({"items": [], "next_cursor": null}));

    // Unfiltered: 1 org + 3 roles + 1 member.
    let all = app.audit(&org).await;
    assert_eq!(all.len(), 5);
    assert_eq!(all[4]["action"], json!("organization.created"));
}
}

#[actix_web::test]
async fn an_action_filter_that_names_no_audit_action_is_refused() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let reply = app
        .get(
            &org.path("/audit-log?action=role.renamed"),
            &org.owner_token,
        )
        .await
        .expect(400);
    let body = reply.json();
    assert_eq!(body["code"], json!("VALIDATION_FAILED"));
    assert_eq!(body["field"], json!("action"));
}

/// Pages `query` with `limit=2` to the end; returns the pages' item lists.
async fn pages_of(app: &TestApp, org: &Org, filter: &str) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(c) => format!("?limit=2{filter}&cursor={c}"),
            None => format!("?limit=2{filter}"),
        };
        let page = audit_page(app, org, &query).await;
        let items = page["items"].as_array().expect("items").clone();
        assert!(items.len() <= 2, "a page holds at most `limit` records");
        pages.push(items);
        match &page["next_cursor"] {
            Value::Null => break,
            Value::String(next) => cursor = Some(next.clone()),
            other => panic!("next_cursor is neither null nor a string: {other}"),
        }
        assert!(pages.len() <= 20, "paging does not end");
    }
    pages
}

on_both_engines! {
async fn limit_and_cursor_page_without_overlap_or_gaps() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    for name in ["R1", "R2", "R3", "R4"] {
        app.role(&org, name, &[]).await;
    }
    // 5 records: pages of 2, 2, 1.
    let all = app.audit(&org).await;
    assert_eq!(all.len(), 5);
    let pages = pages_of(&app, &org, "").await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    assert_eq!(pages.concat(), all);

    // 6 records: pages of 2, 2, 2; the last page already says null.
    app.role(&org, "R5", &[]).await;
    let all = app.audit(&org).await;
    assert_eq!(all.len(), 6);
    let pages = pages_of(&app, &org, "").await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![2, 2, 2]);
    assert_eq!(pages.concat(), all);

    // With a filter, paging walks the filtered records only.
    let pages = pages_of(&app, &org, "&action=role.created").await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    let created: Vec<Value> = all
        .iter()
        .filter(|r| r["action"] == json!("role.created"))
        .cloned()
        .collect();
    assert_eq!(pages.concat(), created);

    // A record appended between pages does not shift the next page.
    let first = audit_page(&app, &org, "?limit=2").await;
    let cursor = first["next_cursor"].as_str().expect("cursor").to_owned();
    app.role(&org, "R6", &[]).await;
    let second = audit_page(&app, &org, &format!("?limit=2&cursor={cursor}")).await;
    assert_eq!(second["items"], json!(all[2..4]));
}
}

on_both_engines! {
async fn bogus_cursor_is_a_validation_failure() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    for cursor in [
        "bogus!",
        "AAAA",
        "%25%25%25",
        "not-a-cursor-at-all-0123456789",
    ] {
        let reply = app
            .get(
                &org.path(&format!("/audit-log?cursor={cursor}")),
                &org.owner_token,
            )
            .await;
        let body = reply.problem(400, "VALIDATION_FAILED");
        assert_eq!(body["field"], json!("cursor"), "cursor {cursor}");
    }
}
}

on_both_engines! {
async fn refused_requests_append_nothing() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let pro = app.org("pro").await;
    let busy = app.role(&org, "Busy", &["org:tasks:read"]).await;
    let (_, busy_token) = app.member(&org, &busy).await;
    let manager = app
        .role(
            &org,
            "Manager",
            &[
                "org:settings:read",
                "org:settings:manage",
                "org:team:read",
                "org:team:invite",
                "org:team:manage",
            ],
        )
        .await;
    let (_, manager_token) = app.member(&org, &manager).await;
    let (_, plain_token) = app.member(&org, &org.member_role).await;
    let (outsider, _) = app.user("outsider@example.test").await;

    let before = app.audit(&org).await;
    let pro_before = app.audit(&pro).await;
    assert_eq!(before.len(), 6, "org created, 2 roles, 3 members");

    let busy_path = org.path(&format!("/roles/{busy}"));
    let owner_role_path = org.path(&format!("/roles/{}", org.owner_role));
    let member_role_path = org.path(&format!("/roles/{}", org.member_role));
    let owner_member_path = org.path(&format!("/members/{}", org.owner_id));
    let t = org.owner_token.as_str();

    // 409 NAME_CONFLICT, case-insensitively, Owner included.
    app.post(&org.path("/roles"), t, json!({"name": "busy"}))
        .await
        .problem(409, "NAME_CONFLICT");
    app.post(&org.path("/roles"), t, json!({"name": "OWNER"}))
        .await
        .problem(409, "NAME_CONFLICT");
    app.patch(&busy_path, t, json!({"name": "Manager"}))
        .await
        .problem(409, "NAME_CONFLICT");
    // 403 FORBIDDEN: the Member role lacks org:settings:manage / team:manage / billing.
    app.post(&org.path("/roles"), &plain_token, json!({"name": "Nope"}))
        .await
        .problem(403, "FORBIDDEN");
    app.patch(&busy_path, &plain_token, json!({"description": "x"}))
        .await
        .problem(403, "FORBIDDEN");
    app.patch(&org.path(""), &plain_token, json!({"name": "Hijacked"}))
        .await
        .problem(403, "FORBIDDEN");
    app.patch(&org.path(""), &manager_token, json!({"plan": "free"}))
        .await
        .problem(403, "FORBIDDEN");
    app.delete(&owner_member_path, &busy_token)
        .await
        .problem(403, "FORBIDDEN");
    // 402 on a pro organization.
    app.post(
        &pro.path("/roles"),
        &pro.owner_token,
        json!({"name": "Pro"}),
    )
    .await
    .problem(402, "LICENSE_REQUIRED");
    app.patch(
        &pro.path(&format!("/roles/{}", pro.member_role)),
        &pro.owner_token,
        json!({"name": "Renamed"}),
    )
    .await
    .problem(402, "LICENSE_REQUIRED");
    // 400 validation.
    app.post(&org.path("/roles"), t, json!({"name": "   "}))
        .await
        .problem(400, "VALIDATION_FAILED");
    app.patch(&org.path(""), t, json!({"plan": "platinum"}))
        .await
        .problem(400, "VALIDATION_FAILED");
    app.patch(
        &format!("/admin/organizations/{}", org.id),
        &app.admin,
        json!({"plan": "gold"}),
    )
    .await
    .problem(400, "VALIDATION_FAILED");
    app.post(
        &org.path("/roles"),
        t,
        json!({"name": "Bad", "permissions": ["org:nope:read"]}),
    )
    .await
    .problem(400, "UNKNOWN_PERMISSION");
    // 403 escalation and immutability.
    app.post(
        &org.path("/roles"),
        &manager_token,
        json!({"name": "Esc", "permissions": ["org:billing:manage"]}),
    )
    .await
    .problem(403, "PERMISSION_ESCALATION");
    app.patch(&owner_role_path, t, json!({"description": "mine now"}))
        .await
        .problem(403, "ROLE_IMMUTABLE");
    app.delete(&owner_role_path, t)
        .await
        .problem(403, "ROLE_IMMUTABLE");
    app.delete(&member_role_path, t)
        .await
        .problem(403, "SYSTEM_ROLE");
    // 422 ROLE_IN_USE and UNKNOWN_ROLE.
    let in_use = app.delete(&busy_path, t).await;
    assert_eq!(in_use.problem(422, "ROLE_IN_USE")["member_count"], json!(1));
    app.post(
        &org.path("/members"),
        t,
        json!({"user_id": outsider, "role_id": pro.member_role}),
    )
    .await
    .problem(422, "UNKNOWN_ROLE");
    // 409 ALREADY_MEMBER.
    app.post(
        &org.path("/members"),
        t,
        json!({"user_id": org.owner_id, "role_id": org.member_role}),
    )
    .await
    .problem(409, "ALREADY_MEMBER");
    // 400 MUST_HAVE_OWNER: demoting or removing the last Owner.
    app.patch(&owner_member_path, t, json!({"role_id": org.member_role}))
        .await
        .problem(400, "MUST_HAVE_OWNER");
    app.delete(&owner_member_path, t)
        .await
        .problem(400, "MUST_HAVE_OWNER");
    // 412: If-Match does not match.
    let stale = app
        .raw(Req {
            method: Method::PATCH,
            path: busy_path.clone(),
            token: Some(t),
            body: Some(json!({"description": "stale"}).to_string().into_bytes()),
            content_type: Some("application/json"),
            headers: vec![("If-Match", "\"not-the-etag\"".to_owned())],
        })
        .await;
    stale.problem(412, "PRECONDITION_FAILED");
    let stale_delete = app
        .raw(Req {
            method: Method::DELETE,
            path: org.path(&format!("/roles/{manager}")),
            token: Some(t),
            body: None,
            content_type: None,
            headers: vec![("If-Match", "\"not-the-etag\"".to_owned())],
        })
        .await;
    stale_delete.problem(412, "PRECONDITION_FAILED");
    // 404: unknown resources.
    app.delete(&org.path("/roles/00000000-0000-7000-8000-000000000000"), t)
        .await
        .problem(404, "NOT_FOUND");
    app.delete(&org.path(&format!("/members/{outsider}")), t)
        .await
        .problem(404, "NOT_FOUND");

    assert_eq!(app.audit(&org).await, before, "the org's audit log changed");
    assert_eq!(
        app.audit(&pro).await,
        pro_before,
        "the pro org's audit log changed"
    );
}
}

on_both_engines! {
async fn noop_patches_answer_200_and_append_nothing() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Steady", &["org:tasks:read"]).await;
    let (member, _) = app.member(&org, &role).await;
    let before = app.audit(&org).await;
    let t = org.owner_token.as_str();

    let org_json = app.get(&org.path(""), t).await.expect(200).json();
    let name = org_json["name"].as_str().expect("name").to_owned();
    let same_name = app
        .patch(&org.path(""), t, json!({"name": name}))
        .await
        .expect(200);
    assert_eq!(same_name.json(), org_json, "same name: unchanged org");
    let same_plan = app
        .patch(&org.path(""), t, json!({"plan": "enterprise"}))
        .await
        .expect(200);
    assert_eq!(same_plan.json(), org_json, "same plan: unchanged org");
    let admin_same = app
        .patch(
            &format!("/admin/organizations/{}", org.id),
            &app.admin,
            json!({"plan": "enterprise", "name": name}),
        )
        .await
        .expect(200);
    assert_eq!(admin_same.json(), org_json, "admin no-op: unchanged org");

    let role_path = org.path(&format!("/roles/{role}"));
    let role_json = app.get(&role_path, t).await.expect(200).json();
    let same_role = app
        .patch(
            &role_path,
            t,
            json!({"name": " Steady ", "description": role_json["description"], "permissions": ["org:tasks:read"]}),
        )
        .await
        .expect(200);
    assert_eq!(same_role.json(), role_json, "same role: unchanged");

    let member_path = org.path(&format!("/members/{member}"));
    let member_json = app.get(&member_path, t).await.expect(200).json();
    let same_member = app
        .patch(&member_path, t, json!({"role_id": role}))
        .await
        .expect(200);
    assert_eq!(same_member.json(), member_json, "same role_id: unchanged");

    assert_eq!(
        app.audit(&org).await,
        before,
        "no-op PATCHes wrote audit records"
    );
}
}

on_both_engines! {
async fn audit_log_needs_settings_read() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let without = app.role(&org, "Team Reader", &["org:team:read"]).await;
    let with = app
        .role(&org, "Settings Reader", &["org:settings:read"])
        .await;
    let (_, without_token) = app.member(&org, &without).await;
    let (_, with_token) = app.member(&org, &with).await;
    let (_, plain_token) = app.member(&org, &org.member_role).await;
    let (_, outsider_token) = app.user("stranger@example.test").await;
    let path = org.path("/audit-log");
    let owner_view = app.get(&path, &org.owner_token).await.expect(200).json();

    let refused = app.get(&path, &without_token).await;
    let body = refused.problem(403, "FORBIDDEN");
    assert_eq!(body["missing_permission"], json!("org:settings:read"));

    // The permission is what counts: a custom role holding it, and Member (which holds it).
    assert_eq!(
        app.get(&path, &with_token).await.expect(200).json(),
        owner_view
    );
    assert_eq!(
        app.get(&path, &plain_token).await.expect(200).json(),
        owner_view
    );

    // Taking the key away takes effect on the very next request.
    app.patch(
        &org.path(&format!("/roles/{with}")),
        &org.owner_token,
        json!({"permissions": []}),
    )
    .await
    .expect(200);
    app.get(&path, &with_token).await.problem(403, "FORBIDDEN");

    app.get(&path, &outsider_token)
        .await
        .problem(404, "NOT_FOUND");
    let admin = app.get(&path, &app.admin).await;
    admin.problem(401, "UNAUTHENTICATED");
    assert_eq!(admin.header("www-authenticate"), "Bearer");
    app.call(Method::GET, &path, None, None)
        .await
        .problem(401, "UNAUTHENTICATED");
}
}
