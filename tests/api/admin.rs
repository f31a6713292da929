//! The admin API (users, tokens, organizations) and the organization
//! resource itself (`GET`/`PATCH /organizations/{id}`).

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};

/// The sorted member names of a JSON object.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("expected an object, got {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

/// A UUID v7 string.
#[track_caller]
fn assert_v7(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("id is not a string: {value}"));
    let id = uuid::Uuid::parse_str(text).unwrap_or_else(|_| panic!("not a UUID: {text}"));
    assert_eq!(id.get_version_num(), 7, "not a v7 UUID: {text}");
    assert_eq!(id.hyphenated().to_string(), text, "canonical form expected");
}

/// RFC 3339 UTC with milliseconds and `Z`: `2026-11-22T10:00:00.123Z`.
#[track_caller]
fn assert_timestamp(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {value}"));
    let bytes = text.as_bytes();
    let shape_ok = bytes.len() == 24
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            10 => *b == b'T',
            13 | 16 => *b == b':',
            19 => *b == b'.',
            23 => *b == b'Z',
            _ => b.is_ascii_digit(),
        });
    assert!(
        shape_ok,
        "not an RFC 3339 UTC millisecond timestamp: {text}"
    );
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
        .to_owned()
}

/// A random id that names nothing.
fn unknown_id() -> String {
    rolecall::ids::new_v7().to_string()
}

async fn new_org(app: &TestApp, owner: &str, plan: &str) -> Value {
    app.post(
        "/admin/organizations",
        &app.admin,
        json!({"name": "Acme", "plan": plan, "owner_user_id": owner}),
    )
    .await
    .expect(201)
    .json()
}

#[actix_web::test]
async fn admin_creates_users_and_refuses_a_taken_email() {
    let app = spawn_app().await;
    let reply = app
        .post(
            "/admin/users",
            &app.admin,
            json!({"email": "Ada@Example.test", "name": "Ada Lovelace"}),
        )
        .await
        .expect(201);
    assert_eq!(reply.header("content-type"), "application/json");
    let user = reply.json();
    assert_eq!(keys(&user), ["created_at", "email", "id", "name"]);
    assert_v7(&user["id"]);
    assert_timestamp(&user["created_at"]);
    assert_eq!(
        text(&user["email"]).to_lowercase(),
        "ada@example.test",
        "the email is the one given"
    );
    assert_eq!(user["name"], json!("Ada Lovelace"));

    // Without a name.
    let nameless = app
        .post(
            "/admin/users",
            &app.admin,
            json!({"email": "grace@example.test"}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(keys(&nameless), ["created_at", "email", "id", "name"]);
    assert_ne!(nameless["id"], user["id"]);

    // The same email in another case.
    for taken in ["ada@example.test", "ADA@EXAMPLE.TEST", "Ada@Example.test"] {
        app.post(
            "/admin/users",
            &app.admin,
            json!({"email": taken, "name": "Impostor"}),
        )
        .await
        .problem(409, "EMAIL_TAKEN");
    }

    // The user exists once, with its first name: a token for it shows it.
    let token = app.create_token(&text(&user["id"])).await;
    let me = app.get("/me", &token).await.expect(200).json();
    assert_eq!(me["user"], user);
    assert_eq!(me["memberships"], json!([]));

    // Only the admin token may call it.
    let anonymous = app
        .call(
            Method::POST,
            "/admin/users",
            None,
            Some(json!({"email": "x@example.test"})),
        )
        .await;
    anonymous.problem(401, "UNAUTHENTICATED");
    assert_eq!(anonymous.header("www-authenticate"), "Bearer");
    let as_user = app
        .post("/admin/users", &token, json!({"email": "y@example.test"}))
        .await;
    as_user.problem(401, "UNAUTHENTICATED");
    assert_eq!(as_user.header("www-authenticate"), "Bearer");
    app.post(
        "/admin/users",
        "wrong-admin-token",
        json!({"email": "z@example.test"}),
    )
    .await
    .problem(401, "UNAUTHENTICATED");
    // None of the refused requests created a user.
    for email in ["x@example.test", "y@example.test", "z@example.test"] {
        app.post("/admin/users", &app.admin, json!({"email": email}))
            .await
            .expect(201);
    }
}

#[actix_web::test]
async fn admin_issues_api_and_session_tokens() {
    let app = spawn_app().await;
    let user = app.create_user("tokens@example.test").await;
    let user_id = text(&user["id"]);
    let path = format!("/admin/users/{user_id}/tokens");

    let api = app
        .post(&path, &app.admin, json!({"kind": "api"}))
        .await
        .expect(201)
        .json();
    assert_eq!(keys(&api), ["created_at", "id", "kind", "name", "token"]);
    assert_v7(&api["id"]);
    assert_timestamp(&api["created_at"]);
    assert_eq!(api["kind"], json!("api"));
    assert_eq!(api["name"], Value::Null);

    let session = app
        .post(
            &path,
            &app.admin,
            json!({"kind": "session", "name": "laptop"}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(
        keys(&session),
        ["created_at", "id", "kind", "name", "token"]
    );
    assert_v7(&session["id"]);
    assert_eq!(session["kind"], json!("session"));
    assert_eq!(session["name"], json!("laptop"));

    let api_token = text(&api["token"]);
    let session_token = text(&session["token"]);
    assert_ne!(api_token, session_token);
    assert_ne!(api["id"], session["id"]);
    for token in [&api_token, &session_token] {
        assert!(token.len() >= 32, "a random token: {token}");
        let me = app.get("/me", token).await.expect(200).json();
        assert_eq!(me["user"], user);
    }

    // Unknown user.
    app.post(
        &format!("/admin/users/{}/tokens", unknown_id()),
        &app.admin,
        json!({"kind": "api"}),
    )
    .await
    .problem(404, "NOT_FOUND");
    // A user token cannot mint tokens.
    app.post(&path, &api_token, json!({"kind": "api"}))
        .await
        .problem(401, "UNAUTHENTICATED");
}

#[actix_web::test]
async fn revoked_token_fails_on_the_next_request() {
    let app = spawn_app().await;
    let user = app.create_user("revoke@example.test").await;
    let user_id = text(&user["id"]);
    let path = format!("/admin/users/{user_id}/tokens");
    let doomed = app
        .post(
            &path,
            &app.admin,
            json!({"kind": "session", "name": "phone"}),
        )
        .await
        .expect(201)
        .json();
    let kept = app.create_token(&user_id).await;
    let doomed_token = text(&doomed["token"]);
    app.get("/me", &doomed_token).await.expect(200);

    let revoke = format!("/admin/tokens/{}", text(&doomed["id"]));
    // Only the admin may revoke.
    app.delete(&revoke, &kept)
        .await
        .problem(401, "UNAUTHENTICATED");
    app.get("/me", &doomed_token).await.expect(200);

    let reply = app.delete(&revoke, &app.admin).await.expect(204);
    assert!(reply.body.is_empty(), "204 has no body");
    let refused = app.get("/me", &doomed_token).await;
    refused.problem(401, "UNAUTHENTICATED");
    assert_eq!(refused.header("www-authenticate"), "Bearer");
    // The user's other token is untouched.
    app.get("/me", &kept).await.expect(200);

    app.delete(&revoke, &app.admin)
        .await
        .problem(404, "NOT_FOUND");
    app.delete(&format!("/admin/tokens/{}", unknown_id()), &app.admin)
        .await
        .problem(404, "NOT_FOUND");
    app.get("/me", &doomed_token)
        .await
        .problem(401, "UNAUTHENTICATED");
}

#[actix_web::test]
async fn admin_creates_an_organization_with_its_owner() {
    let app = spawn_app().await;
    let (owner, owner_token) = app.user("founder@example.test").await;
    let reply = app
        .post(
            "/admin/organizations",
            &app.admin,
            json!({"name": "Acme", "plan": "enterprise", "owner_user_id": owner}),
        )
        .await
        .expect(201);
    assert_eq!(reply.header("content-type"), "application/json");
    let org = reply.json();
    assert_eq!(
        keys(&org),
        ["created_at", "id", "name", "plan", "updated_at"]
    );
    assert_v7(&org["id"]);
    assert_timestamp(&org["created_at"]);
    assert_timestamp(&org["updated_at"]);
    assert_eq!(org["name"], json!("Acme"));
    assert_eq!(org["plan"], json!("enterprise"));
    let org_id = text(&org["id"]);

    let me = app.get("/me", &owner_token).await.expect(200).json();
    let memberships = me["memberships"].as_array().expect("memberships");
    assert_eq!(memberships.len(), 1);
    assert_eq!(memberships[0]["organization_id"], json!(org_id));
    assert_eq!(memberships[0]["role_name"], json!("Owner"));

    // The Owner and Member roles exist, and the owner holds Owner.
    let roles = app
        .get(&format!("/organizations/{org_id}/roles"), &owner_token)
        .await
        .expect(200)
        .json();
    let names: Vec<&Value> = roles["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| &r["name"])
        .collect();
    assert_eq!(names, [&json!("Owner"), &json!("Member")]);
    assert_eq!(memberships[0]["role_id"], roles["items"][0]["id"]);
    assert_eq!(
        app.get(&format!("/organizations/{org_id}"), &owner_token)
            .await
            .expect(200)
            .json(),
        org
    );

    // Every plan.
    for plan in ["free", "pro"] {
        let created = new_org(&app, &owner, plan).await;
        assert_eq!(created["plan"], json!(plan));
    }

    // Unknown owner: 404, and no organization appears.
    app.post(
        "/admin/organizations",
        &app.admin,
        json!({"name": "Ghost", "plan": "pro", "owner_user_id": unknown_id()}),
    )
    .await
    .problem(404, "NOT_FOUND");
    let me = app.get("/me", &owner_token).await.expect(200).json();
    assert_eq!(me["memberships"].as_array().expect("memberships").len(), 3);

    // Only the admin token.
    app.post(
        "/admin/organizations",
        &owner_token,
        json!({"name": "Mine", "plan": "pro", "owner_user_id": owner}),
    )
    .await
    .problem(401, "UNAUTHENTICATED");
}

#[actix_web::test]
async fn admin_changes_plan_and_name() {
    let app = spawn_app().await;
    let (owner, owner_token) = app.user("plans@example.test").await;
    let org = new_org(&app, &owner, "free").await;
    let org_id = text(&org["id"]);
    let path = format!("/admin/organizations/{org_id}");

    let pro = app
        .patch(&path, &app.admin, json!({"plan": "pro"}))
        .await
        .expect(200)
        .json();
    assert_eq!(
        keys(&pro),
        ["created_at", "id", "name", "plan", "updated_at"]
    );
    assert_eq!(pro["plan"], json!("pro"));
    assert_eq!(pro["name"], org["name"]);
    assert_eq!(pro["id"], org["id"]);
    assert_eq!(pro["created_at"], org["created_at"]);
    assert_timestamp(&pro["updated_at"]);
    assert!(
        text(&pro["updated_at"]) >= text(&org["updated_at"]),
        "updated_at does not go back"
    );

    let renamed = app
        .patch(&path, &app.admin, json!({"name": "X"}))
        .await
        .expect(200)
        .json();
    assert_eq!(renamed["name"], json!("X"));
    assert_eq!(renamed["plan"], json!("pro"));

    let both = app
        .patch(
            &path,
            &app.admin,
            json!({"name": "Acme Enterprise", "plan": "enterprise"}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(both["name"], json!("Acme Enterprise"));
    assert_eq!(both["plan"], json!("enterprise"));

    // The members see the change.
    let seen = app
        .get(&format!("/organizations/{org_id}"), &owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(seen, both);
    // The enterprise plan is in force: role writes work now.
    app.post(
        &format!("/organizations/{org_id}/roles"),
        &owner_token,
        json!({"name": "Now allowed"}),
    )
    .await
    .expect(201);

    // The admin's plan change is audited, with no actor.
    let audit = app
        .get(
            &format!("/organizations/{org_id}/audit-log?action=organization.plan_changed"),
            &owner_token,
        )
        .await
        .expect(200)
        .json();
    let records = audit["items"].as_array().expect("items");
    assert_eq!(records.len(), 2, "free→pro and pro→enterprise: {audit}");
    assert_eq!(records[0]["actor_user_id"], Value::Null);
    assert_eq!(records[0]["after"]["plan"], json!("enterprise"));
    assert_eq!(records[1]["before"]["plan"], json!("free"));
    assert_eq!(records[1]["after"]["plan"], json!("pro"));

    app.patch(
        &format!("/admin/organizations/{}", unknown_id()),
        &app.admin,
        json!({"plan": "pro"}),
    )
    .await
    .problem(404, "NOT_FOUND");
    app.patch(&path, &owner_token, json!({"plan": "free"}))
        .await
        .problem(401, "UNAUTHENTICATED");
}

#[actix_web::test]
async fn owner_renames_and_changes_the_plan() {
    let app = spawn_app().await;
    let org = app.org("pro").await;
    let path = org.path("");

    let renamed = app
        .patch(&path, &org.owner_token, json!({"name": "Renamed"}))
        .await
        .expect(200)
        .json();
    assert_eq!(renamed["name"], json!("Renamed"));
    assert_eq!(renamed["plan"], json!("pro"));
    assert_eq!(renamed["id"], json!(org.id));

    let upgraded = app
        .patch(&path, &org.owner_token, json!({"plan": "enterprise"}))
        .await
        .expect(200)
        .json();
    assert_eq!(upgraded["name"], json!("Renamed"));
    assert_eq!(upgraded["plan"], json!("enterprise"));

    let seen = app.get(&path, &org.owner_token).await.expect(200).json();
    assert_eq!(seen, upgraded);

    let actions: Vec<Value> = app
        .audit(&org)
        .await
        .iter()
        .map(|r| r["action"].clone())
        .collect();
    assert_eq!(
        actions,
        [
            json!("organization.plan_changed"),
            json!("organization.renamed"),
            json!("organization.created")
        ]
    );
    let latest = &app.audit(&org).await[0];
    assert_eq!(latest["actor_user_id"], json!(org.owner_id));
    assert_eq!(latest["before"]["plan"], json!("pro"));
    assert_eq!(latest["after"], upgraded);

    // The admin token is not a member.
    app.patch(&path, &app.admin, json!({"name": "Hijacked"}))
        .await
        .problem(401, "UNAUTHENTICATED");
}

#[actix_web::test]
async fn organization_patch_needs_the_matching_permission() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let path = org.path("");
    let billing = app
        .role(&org, "Billing", &["org:billing:manage", "org:billing:read"])
        .await;
    let settings = app
        .role(
            &org,
            "Settings",
            &["org:settings:manage", "org:settings:read"],
        )
        .await;
    let (_, plain) = app.member(&org, &org.member_role).await;
    let (_, biller) = app.member(&org, &billing).await;
    let (_, admin_of_settings) = app.member(&org, &settings).await;
    let original = app.get(&path, &org.owner_token).await.expect(200).json();

    let refusals = [
        (&plain, json!({"plan": "pro"}), "org:billing:manage"),
        (&plain, json!({"name": "Nope"}), "org:settings:manage"),
        (
            &admin_of_settings,
            json!({"plan": "pro"}),
            "org:billing:manage",
        ),
        (&biller, json!({"name": "Nope"}), "org:settings:manage"),
        // Both fields: one missing key is enough to refuse the whole change.
        (
            &admin_of_settings,
            json!({"name": "Nope", "plan": "free"}),
            "org:billing:manage",
        ),
        (
            &biller,
            json!({"name": "Nope", "plan": "free"}),
            "org:settings:manage",
        ),
    ];
    for (token, body, missing) in refusals {
        let reply = app.patch(&path, token, body.clone()).await;
        let problem = reply.problem(403, "FORBIDDEN");
        assert_eq!(
            problem["missing_permission"],
            json!(missing),
            "PATCH {body}"
        );
    }
    // Nothing changed.
    assert_eq!(
        app.get(&path, &org.owner_token).await.expect(200).json(),
        original
    );
    assert_eq!(
        app.audit(&org).await.len(),
        6,
        "no audit record for refusals"
    );

    // Each may do what their key allows.
    let renamed = app
        .patch(&path, &admin_of_settings, json!({"name": "Settled"}))
        .await
        .expect(200)
        .json();
    assert_eq!(renamed["name"], json!("Settled"));
    assert_eq!(renamed["plan"], json!("enterprise"));
    let downgraded = app
        .patch(&path, &biller, json!({"plan": "pro"}))
        .await
        .expect(200)
        .json();
    assert_eq!(downgraded["plan"], json!("pro"));
    assert_eq!(downgraded["name"], json!("Settled"));
}

#[actix_web::test]
async fn any_member_reads_the_organization() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let path = org.path("");
    let empty = app.role(&org, "Nothing", &[]).await;
    let (_, plain) = app.member(&org, &org.member_role).await;
    let (_, powerless) = app.member(&org, &empty).await;
    let as_owner = app.get(&path, &org.owner_token).await.expect(200).json();
    assert_eq!(
        keys(&as_owner),
        ["created_at", "id", "name", "plan", "updated_at"]
    );
    assert_eq!(as_owner["id"], json!(org.id));
    for token in [&plain, &powerless] {
        assert_eq!(app.get(&path, token).await.expect(200).json(), as_owner);
    }

    // Not a member, unknown org, no token, admin token.
    let (_, outsider) = app.user("outsider@example.test").await;
    app.get(&path, &outsider).await.problem(404, "NOT_FOUND");
    app.get(&format!("/organizations/{}", unknown_id()), &plain)
        .await
        .problem(404, "NOT_FOUND");
    app.call(Method::GET, &path, None, None)
        .await
        .problem(401, "UNAUTHENTICATED");
    app.get(&path, &app.admin)
        .await
        .problem(401, "UNAUTHENTICATED");
    // A non-member cannot change it either (404, not 403).
    app.patch(&path, &outsider, json!({"name": "Mine"}))
        .await
        .problem(404, "NOT_FOUND");
}
