//! The role catalog over real HTTP (CONTRACT §3, §4; seed 2.1, 2.4, 3.3, 4.1).

use std::collections::BTreeSet;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Org, Reply, Req, TestApp};

/// The 52 catalog keys in the seed's order (seed 2.3).
const CATALOG: [&str; 52] = [
    "org:decisions:create",
    "org:decisions:read",
    "org:decisions:update",
    "org:decisions:delete",
    "org:decisions:accept",
    "org:decisions:reject",
    "org:decisions:deprecate",
    "org:memories:create",
    "org:memories:read",
    "org:memories:update",
    "org:memories:delete",
    "org:capsules:create",
    "org:capsules:read",
    "org:capsules:freeze",
    "org:capsules:supersede",
    "org:tasks:create",
    "org:tasks:read",
    "org:tasks:update",
    "org:tasks:delete",
    "org:comments:create",
    "org:comments:read",
    "org:sharing:create",
    "org:sharing:read",
    "org:sharing:revoke",
    "org:tags:create",
    "org:tags:read",
    "org:tags:delete",
    "org:tags:attach",
    "org:chat:create",
    "org:chat:read",
    "org:chat:update",
    "org:chat:delete",
    "org:conflicts:read",
    "org:conflicts:resolve",
    "org:imports:start",
    "org:imports:read",
    "org:imports:cancel",
    "org:graph:read",
    "org:graph:manage",
    "org:notifications:read",
    "org:notifications:manage",
    "org:team:read",
    "org:team:invite",
    "org:team:manage",
    "org:settings:read",
    "org:settings:manage",
    "org:billing:read",
    "org:billing:manage",
    "org:projects:create",
    "org:projects:read",
    "org:projects:update",
    "org:projects:delete",
];

/// The keys of a custom "admin" role used by the escalation tests: it may
/// manage settings and the team, but holds no billing key.
const ADMIN_KEYS: [&str; 6] = [
    "org:settings:manage",
    "org:settings:read",
    "org:team:read",
    "org:team:invite",
    "org:team:manage",
    "org:decisions:read",
];

/// `keys`, sorted, as a JSON array.
fn sorted(keys: &[&str]) -> Value {
    let set: BTreeSet<&str> = keys.iter().copied().collect();
    json!(set.into_iter().collect::<Vec<_>>())
}

/// Every catalog key, sorted.
fn all_keys() -> Value {
    sorted(&CATALOG)
}

/// Member's default: every key but `*:delete` and `*:manage`, sorted.
fn member_keys() -> Value {
    let keys: Vec<&str> = CATALOG
        .iter()
        .copied()
        .filter(|k| !k.ends_with(":delete") && !k.ends_with(":manage"))
        .collect();
    sorted(&keys)
}

/// Catalog keys not in `held`, sorted.
fn lacking(held: &[&str]) -> Value {
    let keys: Vec<&str> = CATALOG
        .iter()
        .copied()
        .filter(|k| !held.contains(k))
        .collect();
    sorted(&keys)
}

/// Member's default set without `without`, as a JSON array.
fn member_keys_without(without: &str) -> Value {
    let keys: Vec<Value> = member_keys()
        .as_array()
        .expect("array")
        .iter()
        .filter(|k| k.as_str() != Some(without))
        .cloned()
        .collect();
    json!(keys)
}

/// `2026-11-22T10:00:00.123Z`: RFC 3339 UTC with milliseconds and `Z`.
#[track_caller]
fn assert_timestamp(value: &Value) {
    let text = value.as_str().expect("timestamp is a string");
    let pattern = "dddd-dd-ddTdd:dd:dd.dddZ";
    let ok = text.len() == pattern.len()
        && text.chars().zip(pattern.chars()).all(|(c, p)| match p {
            'd' => c.is_ascii_digit(),
            other => c == other,
        });
    assert!(ok, "not a millisecond UTC timestamp: {text}");
}

/// The role names of a list answer, in order.
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| r["name"].as_str().expect("name").to_owned())
        .collect()
}

/// The `user_id`s of a members list answer, in order.
fn user_ids(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|m| m["user_id"].as_str().expect("user_id").to_owned())
        .collect()
}

/// Sets the plan with the admin token.
async fn set_plan(app: &TestApp, org: &Org, plan: &str) {
    let reply = app
        .patch(
            &format!("/admin/organizations/{}", org.id),
            &app.admin,
            json!({ "plan": plan }),
        )
        .await
        .expect(200);
    assert_eq!(reply.json()["plan"], json!(plan));
}

/// A request with an `If-Match` header.
async fn with_if_match(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    tag: &str,
    body: Option<Value>,
) -> Reply {
    app.raw(Req::json(method, path, Some(token), body).header("If-Match", tag))
        .await
}

/// GET of one role, as the owner.
async fn get_role(app: &TestApp, org: &Org, role: &str) -> Reply {
    app.get(&org.path(&format!("/roles/{role}")), &org.owner_token)
        .await
}

/// A strong ETag: quoted, not `W/`.
#[track_caller]
fn assert_strong_etag(tag: &str) {
    assert!(
        tag.len() >= 2 && tag.starts_with('"') && tag.ends_with('"'),
        "not a strong ETag: {tag:?}"
    );
}

/// Minimal percent-encoding for a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// 1. Built-in roles, list order, representation, Get, member_count
// ---------------------------------------------------------------------------

on_both_engines! {
async fn every_new_org_has_owner_and_member_with_contract_flags_and_keys() {
    let app = spawn_app().await;
    let mut seen_ids = BTreeSet::new();
    for plan in ["free", "pro", "enterprise"] {
        let org = app.org(plan).await;
        let list = app
            .get(&org.path("/roles"), &org.owner_token)
            .await
            .expect(200)
            .json();
        assert_eq!(names(&list), ["Owner", "Member"], "plan {plan}");
        assert_eq!(list["next_cursor"], Value::Null);

        let owner = &list["items"][0];
        assert_eq!(owner["id"], json!(org.owner_role));
        assert_eq!(owner["organization_id"], json!(org.id));
        assert_eq!(owner["is_immutable"], json!(true));
        assert_eq!(owner["is_system"], json!(true));
        assert_eq!(owner["permissions"], all_keys());
        assert_eq!(owner["permissions"].as_array().expect("keys").len(), 52);
        assert_eq!(owner["member_count"], json!(1));

        let member = &list["items"][1];
        assert_eq!(member["id"], json!(org.member_role));
        assert_eq!(member["organization_id"], json!(org.id));
        assert_eq!(member["is_immutable"], json!(false));
        assert_eq!(member["is_system"], json!(true));
        assert_eq!(member["permissions"], member_keys());
        let keys = member["permissions"].as_array().expect("keys");
        assert_eq!(keys.len(), 41);
        for key in keys {
            let key = key.as_str().expect("key");
            assert!(
                !key.ends_with(":delete") && !key.ends_with(":manage"),
                "Member holds {key}"
            );
        }
        assert_eq!(member["member_count"], json!(0));

        // The list and Get agree.
        for (i, id) in [&org.owner_role, &org.member_role].into_iter().enumerate() {
            let one = get_role(&app, &org, id).await.expect(200).json();
            assert_eq!(one, list["items"][i]);
        }
        assert!(seen_ids.insert(org.owner_role.clone()));
        assert!(seen_ids.insert(org.member_role.clone()));
    }
    // Six distinct role rows across three organizations.
    assert_eq!(seen_ids.len(), 6);
}
}

on_both_engines! {
async fn role_list_is_owner_member_then_custom_roles_by_case_insensitive_name() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    for name in ["beta", "Alpha", "gamma"] {
        app.role(&org, name, &[]).await;
    }
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&list), ["Owner", "Member", "Alpha", "beta", "gamma"]);
    assert_eq!(list["next_cursor"], Value::Null);

    // Renaming Member (and a custom role before it alphabetically) does not
    // move the built-in rows.
    app.patch(
        &org.path(&format!("/roles/{}", org.member_role)),
        &org.owner_token,
        json!({"name": "Zz staff"}),
    )
    .await
    .expect(200);
    app.role(&org, "aardvark", &[]).await;
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(
        names(&list),
        ["Owner", "Zz staff", "aardvark", "Alpha", "beta", "gamma"]
    );

    // Without `limit` every row comes back (more than the default page of 50).
    for i in 0..48 {
        app.role(&org, &format!("r{i:02}"), &[]).await;
    }
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    let mut expected: Vec<String> = ["Owner", "Zz staff", "aardvark", "Alpha", "beta", "gamma"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    expected.extend((0..48).map(|i| format!("r{i:02}")));
    assert_eq!(names(&list), expected);
    assert_eq!(list["items"].as_array().expect("items").len(), 54);
    assert_eq!(list["next_cursor"], Value::Null);

    // With `limit`, pages follow the same order.
    let first = app
        .get(&org.path("/roles?limit=2"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&first), ["Owner", "Zz staff"]);
    let cursor = first["next_cursor"].as_str().expect("a next cursor");
    let second = app
        .get(
            &org.path(&format!("/roles?limit=3&cursor={}", encode(cursor))),
            &org.owner_token,
        )
        .await
        .expect(200)
        .json();
    assert_eq!(names(&second), ["aardvark", "Alpha", "beta"]);
}
}

on_both_engines! {
async fn role_representation_has_exactly_the_contract_fields() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let created = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({
                "name": "  Auditors  ",
                "description": "Reads the audit log",
                "permissions": ["org:team:read", "org:settings:read", "org:billing:read"],
            }),
        )
        .await
        .expect(201)
        .json();

    let fields: BTreeSet<&str> = created
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = [
        "id",
        "organization_id",
        "name",
        "description",
        "permissions",
        "is_immutable",
        "is_system",
        "member_count",
        "created_at",
        "updated_at",
    ]
    .into_iter()
    .collect();
    assert_eq!(fields, expected);

    let id = created["id"].as_str().expect("id");
    let parsed = uuid_version(id);
    assert_eq!(parsed, Some(7), "role id is not a UUID v7: {id}");
    assert_eq!(created["organization_id"], json!(org.id));
    assert_eq!(created["name"], json!("Auditors"), "name is trimmed");
    assert_eq!(created["description"], json!("Reads the audit log"));
    assert_eq!(
        created["permissions"],
        json!(["org:billing:read", "org:settings:read", "org:team:read"])
    );
    assert_eq!(created["is_immutable"], json!(false));
    assert_eq!(created["is_system"], json!(false));
    assert_eq!(created["member_count"], json!(0));
    assert_timestamp(&created["created_at"]);
    assert_timestamp(&created["updated_at"]);

    // Built-in rows have the same shape and valid timestamps.
    for role in [&org.owner_role, &org.member_role] {
        let body = get_role(&app, &org, role).await.expect(200).json();
        let keys: BTreeSet<&str> = body
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, expected);
        assert!(body["description"].is_string());
        assert_timestamp(&body["created_at"]);
        assert_timestamp(&body["updated_at"]);
    }

    // A PATCH keeps created_at and moves updated_at forward.
    let patched = app
        .patch(
            &org.path(&format!("/roles/{id}")),
            &org.owner_token,
            json!({"permissions": ["org:tasks:read", "org:billing:read"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(patched["created_at"], created["created_at"]);
    assert_timestamp(&patched["updated_at"]);
    assert!(
        patched["updated_at"].as_str() >= created["updated_at"].as_str(),
        "updated_at went backwards"
    );
    assert_eq!(
        patched["permissions"],
        json!(["org:billing:read", "org:tasks:read"])
    );
}
}

/// The version nibble of a hyphenated UUID, when `text` is one.
fn uuid_version(text: &str) -> Option<u32> {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths != [8, 4, 4, 4, 12] || !text.chars().all(|c| c == '-' || c.is_ascii_hexdigit()) {
        return None;
    }
    groups[2].chars().next().and_then(|c| c.to_digit(16))
}

on_both_engines! {
async fn get_role_of_another_org_or_unknown_id_is_404() {
    let app = spawn_app().await;
    let a = app.org("enterprise").await;
    let b = app.org("enterprise").await;
    let custom_b = app.role(&b, "Only in B", &["org:team:read"]).await;

    for foreign in [&b.owner_role, &b.member_role, &custom_b] {
        app.get(&a.path(&format!("/roles/{foreign}")), &a.owner_token)
            .await
            .problem(404, "NOT_FOUND");
        app.get(
            &a.path(&format!("/roles/{foreign}/members")),
            &a.owner_token,
        )
        .await
        .problem(404, "NOT_FOUND");
    }
    // Unknown and malformed ids.
    let unknown = rolecall::ids::new_v7().to_string();
    app.get(&a.path(&format!("/roles/{unknown}")), &a.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    app.get(&a.path("/roles/not-a-uuid"), &a.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    // B's role via B's own path, by A's owner (not a member of B): 404 as well.
    app.get(&b.path(&format!("/roles/{custom_b}")), &a.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    app.get(&b.path("/roles"), &a.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    // B's owner sees it.
    get_role(&app, &b, &custom_b).await.expect(200);
}
}

on_both_engines! {
async fn member_count_follows_memberships() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Crew", &["org:team:read"]).await;
    let count = |id: String| {
        let app = &app;
        let org = &org;
        async move { get_role(app, org, &id).await.expect(200).json()["member_count"].clone() }
    };
    assert_eq!(count(role.clone()).await, json!(0));

    let (u1, _) = app.member(&org, &role).await;
    let (u2, _) = app.member(&org, &role).await;
    let (_u3, _) = app.member(&org, &org.member_role).await;
    assert_eq!(count(role.clone()).await, json!(2));
    assert_eq!(count(org.member_role.clone()).await, json!(1));
    assert_eq!(count(org.owner_role.clone()).await, json!(1));

    // The list carries the same counts.
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    let counts: Vec<Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| r["member_count"].clone())
        .collect();
    assert_eq!(counts, [json!(1), json!(1), json!(2)]);

    // Change one to Member, remove the other.
    app.patch(
        &org.path(&format!("/members/{u1}")),
        &org.owner_token,
        json!({"role_id": org.member_role}),
    )
    .await
    .expect(200);
    assert_eq!(count(role.clone()).await, json!(1));
    assert_eq!(count(org.member_role.clone()).await, json!(2));
    app.delete(&org.path(&format!("/members/{u2}")), &org.owner_token)
        .await
        .expect(204);
    assert_eq!(count(role.clone()).await, json!(0));
    assert_eq!(count(org.member_role.clone()).await, json!(2));
}
}

// ---------------------------------------------------------------------------
// 2. Role rules
// ---------------------------------------------------------------------------

on_both_engines! {
async fn create_role_answers_201_with_etag_and_the_stored_representation() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let reply = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "Reviewer", "description": "Reviews", "permissions": ["org:decisions:read"]}),
        )
        .await
        .expect(201);
    let post_tag = reply.header("etag");
    assert_strong_etag(&post_tag);
    let created = reply.json();
    let id = created["id"].as_str().expect("id");

    let got = get_role(&app, &org, id).await.expect(200);
    let get_tag = got.header("etag");
    assert_strong_etag(&get_tag);
    assert_eq!(got.json(), created, "POST body equals the later GET");
    assert_eq!(get_tag, post_tag, "same version, same ETag");

    // Built-in rows have ETags too.
    for role in [&org.owner_role, &org.member_role] {
        assert_strong_etag(&get_role(&app, &org, role).await.expect(200).header("etag"));
    }
}
}

on_both_engines! {
async fn role_writes_need_the_enterprise_plan() {
    let app = spawn_app().await;
    for plan in ["free", "pro"] {
        // An org that starts on the plan.
        let org = app.org(plan).await;
        let before = app
            .get(&org.path("/roles"), &org.owner_token)
            .await
            .expect(200)
            .json();
        app.post(&org.path("/roles"), &org.owner_token, json!({"name": "X"}))
            .await
            .problem(402, "LICENSE_REQUIRED");
        // Bodies are judged only after the plan.
        app.post(&org.path("/roles"), &org.owner_token, json!({"bogus": 1}))
            .await
            .problem(402, "LICENSE_REQUIRED");
        app.patch(
            &org.path(&format!("/roles/{}", org.member_role)),
            &org.owner_token,
            json!({"name": "Staff"}),
        )
        .await
        .problem(402, "LICENSE_REQUIRED");
        app.delete(
            &org.path(&format!("/roles/{}", org.member_role)),
            &org.owner_token,
        )
        .await
        .problem(402, "LICENSE_REQUIRED");
        app.patch(
            &org.path(&format!("/roles/{}", org.owner_role)),
            &org.owner_token,
            json!({"name": "Boss"}),
        )
        .await
        .problem(402, "LICENSE_REQUIRED");
        let after = app
            .get(&org.path("/roles"), &org.owner_token)
            .await
            .expect(200)
            .json();
        assert_eq!(after, before, "a refused write changed nothing ({plan})");

        // An org downgraded to the plan, with an existing custom role.
        let org = app.org("enterprise").await;
        let custom = app.role(&org, "Custom", &["org:team:read"]).await;
        set_plan(&app, &org, plan).await;
        let path = org.path(&format!("/roles/{custom}"));
        let before = get_role(&app, &org, &custom).await.expect(200).json();
        app.post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "New"}),
        )
        .await
        .problem(402, "LICENSE_REQUIRED");
        app.patch(&path, &org.owner_token, json!({"description": "x"}))
            .await
            .problem(402, "LICENSE_REQUIRED");
        app.delete(&path, &org.owner_token)
            .await
            .problem(402, "LICENSE_REQUIRED");
        let after = get_role(&app, &org, &custom).await.expect(200).json();
        assert_eq!(after, before, "a refused write changed nothing ({plan})");
        app.get(&org.path("/roles"), &org.owner_token)
            .await
            .expect(200);
    }
}
}

on_both_engines! {
async fn role_names_conflict_case_insensitively() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let roles = org.path("/roles");
    let reviewers = app.role(&org, "Reviewers", &[]).await;
    let aerzte = app.role(&org, "ÄRZTE", &[]).await;

    for name in [
        "Reviewers",
        "reviewers",
        "REVIEWERS",
        "  reviewers ",
        "ärzte",
        "Ärzte",
        "owner",
        "OWNER",
        "Owner",
        "MEMBER",
        "member",
        " Member ",
    ] {
        app.post(&roles, &org.owner_token, json!({"name": name}))
            .await
            .problem(409, "NAME_CONFLICT");
    }

    // Renames conflict the same way.
    let path = org.path(&format!("/roles/{reviewers}"));
    for name in ["ärzte", "owner", "MEMBER"] {
        app.patch(&path, &org.owner_token, json!({"name": name}))
            .await
            .problem(409, "NAME_CONFLICT");
    }
    app.patch(
        &org.path(&format!("/roles/{}", org.member_role)),
        &org.owner_token,
        json!({"name": "Owner"}),
    )
    .await
    .problem(409, "NAME_CONFLICT");
    app.patch(
        &org.path(&format!("/roles/{aerzte}")),
        &org.owner_token,
        json!({"name": "reviewers"}),
    )
    .await
    .problem(409, "NAME_CONFLICT");

    // Nothing changed; only the four rows exist.
    let list = app.get(&roles, &org.owner_token).await.expect(200).json();
    let mut listed = names(&list);
    assert_eq!(listed[..2], ["Owner", "Member"]);
    listed.sort();
    assert_eq!(listed, ["Member", "Owner", "Reviewers", "ÄRZTE"]);

    // A role does not conflict with itself (a case-only rename), and the same
    // name is free in another organization.
    let renamed = app
        .patch(&path, &org.owner_token, json!({"name": "REVIEWERS"}))
        .await
        .expect(200)
        .json();
    assert_eq!(renamed["name"], json!("REVIEWERS"));
    let other = app.org("enterprise").await;
    app.role(&other, "reviewers", &[]).await;
    app.role(&other, "ärzte", &[]).await;
}
}

on_both_engines! {
async fn owner_role_is_immutable_and_member_role_is_not_deletable() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let owner_path = org.path(&format!("/roles/{}", org.owner_role));
    let member_path = org.path(&format!("/roles/{}", org.member_role));
    let before = get_role(&app, &org, &org.owner_role).await.expect(200);
    let before_tag = before.header("etag");
    let before = before.json();

    for body in [
        json!({"name": "Boss"}),
        json!({"description": "changed"}),
        json!({"permissions": ["org:team:read"]}),
        json!({"permissions": CATALOG.to_vec()}),
        json!({}),
    ] {
        app.patch(&owner_path, &org.owner_token, body)
            .await
            .problem(403, "ROLE_IMMUTABLE");
    }
    app.delete(&owner_path, &org.owner_token)
        .await
        .problem(403, "ROLE_IMMUTABLE");
    // With the current ETag too.
    with_if_match(
        &app,
        Method::PATCH,
        &owner_path,
        &org.owner_token,
        &before_tag,
        Some(json!({"name": "Boss"})),
    )
    .await
    .problem(403, "ROLE_IMMUTABLE");
    with_if_match(
        &app,
        Method::DELETE,
        &owner_path,
        &org.owner_token,
        "*",
        None,
    )
    .await
    .problem(403, "ROLE_IMMUTABLE");
    // Check order: 412 and 400 come before immutability.
    with_if_match(
        &app,
        Method::PATCH,
        &owner_path,
        &org.owner_token,
        "\"stale\"",
        Some(json!({"name": "Boss"})),
    )
    .await
    .problem(412, "PRECONDITION_FAILED");
    app.patch(&owner_path, &org.owner_token, json!({"nope": true}))
        .await
        .problem(400, "VALIDATION_FAILED");

    let after = get_role(&app, &org, &org.owner_role).await.expect(200);
    assert_eq!(after.header("etag"), before_tag);
    assert_eq!(after.json(), before);

    // Member: editable, not deletable.
    app.delete(&member_path, &org.owner_token)
        .await
        .problem(403, "SYSTEM_ROLE");
    with_if_match(
        &app,
        Method::DELETE,
        &member_path,
        &org.owner_token,
        "*",
        None,
    )
    .await
    .problem(403, "SYSTEM_ROLE");
    let member = get_role(&app, &org, &org.member_role)
        .await
        .expect(200)
        .json();
    assert_eq!(member["name"], json!("Member"));
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&list), ["Owner", "Member"]);
}
}

on_both_engines! {
async fn deleting_a_role_with_members_is_role_in_use() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Temps", &["org:team:read"]).await;
    let path = org.path(&format!("/roles/{role}"));
    let (u1, _) = app.member(&org, &role).await;
    let (u2, _) = app.member(&org, &role).await;

    let body = app
        .delete(&path, &org.owner_token)
        .await
        .problem(422, "ROLE_IN_USE");
    assert_eq!(body["member_count"], json!(2));
    get_role(&app, &org, &role).await.expect(200);

    app.patch(
        &org.path(&format!("/members/{u1}")),
        &org.owner_token,
        json!({"role_id": org.member_role}),
    )
    .await
    .expect(200);
    let body = app
        .delete(&path, &org.owner_token)
        .await
        .problem(422, "ROLE_IN_USE");
    assert_eq!(body["member_count"], json!(1));

    app.delete(&org.path(&format!("/members/{u2}")), &org.owner_token)
        .await
        .expect(204);
    let reply = app.delete(&path, &org.owner_token).await.expect(204);
    assert!(reply.body.is_empty());
    get_role(&app, &org, &role).await.problem(404, "NOT_FOUND");
    app.delete(&path, &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&list), ["Owner", "Member"]);
}
}

on_both_engines! {
async fn role_writes_need_settings_manage() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let custom = app.role(&org, "Custom", &["org:team:read"]).await;
    let (_, member) = app.member(&org, &org.member_role).await;
    let reader = app
        .role(
            &org,
            "Settings reader",
            &["org:settings:read", "org:team:read"],
        )
        .await;
    let (_, reader) = app.member(&org, &reader).await;

    for token in [&member, &reader] {
        let forbidden = |reply: Reply| {
            let body = reply.problem(403, "FORBIDDEN");
            assert_eq!(body["missing_permission"], json!("org:settings:manage"));
        };
        forbidden(
            app.post(&org.path("/roles"), token, json!({"name": "Mine"}))
                .await,
        );
        // Bodies are judged after the permission check.
        forbidden(
            app.post(&org.path("/roles"), token, json!({"bogus": []}))
                .await,
        );
        for role in [&custom, &org.member_role, &org.owner_role] {
            let path = org.path(&format!("/roles/{role}"));
            forbidden(app.patch(&path, token, json!({"name": "Mine"})).await);
            forbidden(app.delete(&path, token).await);
        }
    }
    // Reads stay allowed to any member.
    app.get(&org.path("/roles"), &member).await.expect(200);
    app.get(&org.path(&format!("/roles/{custom}")), &member)
        .await
        .expect(200);

    // 403 FORBIDDEN comes before 402.
    let pro = app.org("pro").await;
    let (_, pro_member) = app.member(&pro, &pro.member_role).await;
    let body = app
        .post(&pro.path("/roles"), &pro_member, json!({"name": "Mine"}))
        .await
        .problem(403, "FORBIDDEN");
    assert_eq!(body["missing_permission"], json!("org:settings:manage"));

    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(
        names(&list),
        ["Owner", "Member", "Custom", "Settings reader"]
    );
}
}

on_both_engines! {
async fn unknown_permission_keys_are_listed() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let body = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "Bad", "permissions": ["org:decisions:read", "org:foo:bar", "org:decisions:fly", "team:read"]}),
        )
        .await
        .problem(400, "UNKNOWN_PERMISSION");
    let unknown: BTreeSet<String> = body["unknown"]
        .as_array()
        .expect("unknown is a list")
        .iter()
        .map(|k| k.as_str().expect("key").to_owned())
        .collect();
    let expected: BTreeSet<String> = ["org:foo:bar", "org:decisions:fly", "team:read"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    assert_eq!(unknown, expected);
    assert_eq!(body["unknown"].as_array().expect("list").len(), 3);

    let path = org.path(&format!("/roles/{}", org.member_role));
    let body = app
        .patch(
            &path,
            &org.owner_token,
            json!({"permissions": ["org:team:read", "org:team:fly"]}),
        )
        .await
        .problem(400, "UNKNOWN_PERMISSION");
    assert_eq!(body["unknown"], json!(["org:team:fly"]));

    // Nothing was written.
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&list), ["Owner", "Member"]);
    assert_eq!(list["items"][1]["permissions"], member_keys());
}
}

on_both_engines! {
async fn an_admin_cannot_grant_keys_they_lack() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let admin_role = app.role(&org, "Admins", &ADMIN_KEYS).await;
    let (_, admin) = app.member(&org, &admin_role).await;

    // Create with a key the admin lacks.
    let body = app
        .post(
            &org.path("/roles"),
            &admin,
            json!({"name": "Billing", "permissions": ["org:billing:manage", "org:team:read"]}),
        )
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(body["missing_permissions"], json!(["org:billing:manage"]));
    // Several missing keys come back sorted.
    let body = app
        .post(
            &org.path("/roles"),
            &admin,
            json!({"name": "Billing", "permissions": ["org:projects:delete", "org:billing:read", "org:billing:manage"]}),
        )
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(
        body["missing_permissions"],
        json!([
            "org:billing:manage",
            "org:billing:read",
            "org:projects:delete"
        ])
    );
    // Copying the Owner role is escalation for every key the admin lacks.
    let body = app
        .post(
            &org.path("/roles"),
            &admin,
            json!({"name": "Owners 2", "copy_permissions_from": org.owner_role}),
        )
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(body["missing_permissions"], lacking(&ADMIN_KEYS));

    // Keys the admin holds are fine.
    let mine = app
        .post(
            &org.path("/roles"),
            &admin,
            json!({"name": "Helpers", "permissions": ["org:team:read", "org:decisions:read"]}),
        )
        .await
        .expect(201)
        .json();
    let mine_path = org.path(&format!("/roles/{}", mine["id"].as_str().expect("id")));

    // Patching in a key the admin lacks.
    let body = app
        .patch(
            &mine_path,
            &admin,
            json!({"permissions": ["org:team:read", "org:billing:manage"]}),
        )
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(body["missing_permissions"], json!(["org:billing:manage"]));
    let body = app
        .patch(
            &org.path(&format!("/roles/{}", org.member_role)),
            &admin,
            json!({"permissions": [ "org:billing:manage", "org:team:read"]}),
        )
        .await
        .problem(403, "PERMISSION_ESCALATION");
    // Member's keys the admin lacks count too: they change as well.
    let before_or_after: Vec<&str> = CATALOG
        .iter()
        .copied()
        .filter(|k| {
            *k == "org:billing:manage" || (!k.ends_with(":delete") && !k.ends_with(":manage"))
        })
        .filter(|k| !ADMIN_KEYS.contains(k))
        .collect();
    assert_eq!(body["missing_permissions"], sorted(&before_or_after));

    // A role holding keys the admin lacks (made by the owner) may be renamed
    // by the admin, even with its keys repeated unchanged, but its keys may
    // not change: not even by adding a key the admin holds, nor by dropping
    // the ones the admin lacks (CONTRACT §11).
    let billing = app
        .role(&org, "Billing", &["org:billing:manage", "org:billing:read"])
        .await;
    let billing_path = org.path(&format!("/roles/{billing}"));
    for permissions in [
        json!(["org:billing:manage", "org:billing:read", "org:team:read"]),
        json!(["org:team:read"]),
        json!([]),
    ] {
        let body = app
            .patch(&billing_path, &admin, json!({"permissions": permissions}))
            .await
            .problem(403, "PERMISSION_ESCALATION");
        assert_eq!(
            body["missing_permissions"],
            json!(["org:billing:manage", "org:billing:read"]),
            "{permissions}"
        );
    }
    let renamed = app
        .patch(
            &billing_path,
            &admin,
            json!({"name": "Finance", "permissions": ["org:billing:read", "org:billing:manage"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(renamed["name"], json!("Finance"));
    assert_eq!(
        renamed["permissions"],
        json!(["org:billing:manage", "org:billing:read"])
    );

    // Nothing was written by the refused requests.
    let got = app.get(&mine_path, &admin).await.expect(200).json();
    assert_eq!(
        got["permissions"],
        json!(["org:decisions:read", "org:team:read"])
    );
    let member = get_role(&app, &org, &org.member_role)
        .await
        .expect(200)
        .json();
    assert_eq!(member["permissions"], member_keys());
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(
        names(&list),
        ["Owner", "Member", "Admins", "Finance", "Helpers"]
    );

    // The owner may grant anything.
    app.patch(
        &mine_path,
        &org.owner_token,
        json!({"permissions": ["org:team:read", "org:billing:manage"]}),
    )
    .await
    .expect(200);
}
}

on_both_engines! {
/// Issue 29, finding 4, as reported: Carol holds settings and team keys but
/// no billing key; Erin holds "Finance". Carol may not remove Erin, and may
/// not get there by first emptying the role Erin holds.
async fn editing_a_role_cannot_demote_the_members_above_you() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let admin_role = app.role(&org, "Admins", &ADMIN_KEYS).await;
    let (_, carol) = app.member(&org, &admin_role).await;
    let finance = app
        .role(
            &org,
            "Finance",
            &["org:billing:manage", "org:billing:read", "org:team:read"],
        )
        .await;
    let (erin, erin_token) = app.member(&org, &finance).await;
    let erin_path = org.path(&format!("/members/{erin}"));
    let finance_path = org.path(&format!("/roles/{finance}"));

    app.delete(&erin_path, &carol)
        .await
        .problem(403, "PERMISSION_ESCALATION");
    let body = app
        .patch(&finance_path, &carol, json!({"permissions": ["org:team:read"]}))
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(
        body["missing_permissions"],
        json!(["org:billing:manage", "org:billing:read"])
    );
    app.delete(&erin_path, &carol)
        .await
        .problem(403, "PERMISSION_ESCALATION");

    // Nothing changed: Erin keeps her role and its keys, and no audit record says otherwise.
    let role = get_role(&app, &org, &finance).await.expect(200).json();
    assert_eq!(
        role["permissions"],
        json!(["org:billing:manage", "org:billing:read", "org:team:read"])
    );
    assert_eq!(role["member_count"], json!(1));
    let mine = app
        .get(&org.path("/permissions/mine"), &erin_token)
        .await
        .expect(200)
        .json();
    assert_eq!(
        mine["permissions"],
        json!(["org:billing:manage", "org:billing:read", "org:team:read"])
    );
    let updates = app
        .audit(&org)
        .await
        .into_iter()
        .filter(|r| r["action"] == json!("role.updated") || r["action"] == json!("member.removed"))
        .count();
    assert_eq!(updates, 0);
    // The owner holds every key, so the owner may edit it.
    app.patch(&finance_path, &org.owner_token, json!({"permissions": ["org:team:read"]}))
        .await
        .expect(200);
}
}

on_both_engines! {
async fn assigning_a_role_with_unheld_keys_is_escalation() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let admin_role = app.role(&org, "Admins", &ADMIN_KEYS).await;
    let (_, admin) = app.member(&org, &admin_role).await;
    let billing = app
        .role(&org, "Billing", &["org:billing:manage", "org:billing:read"])
        .await;
    // The target's current role is within the admin's keys, so only the
    // role being assigned can make the change an escalation.
    let helpers = app
        .role(&org, "Helpers", &["org:team:read", "org:decisions:read"])
        .await;
    let (target, _) = app.member(&org, &helpers).await;
    let (newcomer, _) = app.user("newcomer@example.test").await;

    // Invite with a role holding keys the admin lacks.
    let body = app
        .post(
            &org.path("/members"),
            &admin,
            json!({"user_id": newcomer, "role_id": billing}),
        )
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(
        body["missing_permissions"],
        json!(["org:billing:manage", "org:billing:read"])
    );
    // Change a member's role to it.
    let target_path = org.path(&format!("/members/{target}"));
    let body = app
        .patch(&target_path, &admin, json!({"role_id": billing}))
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(
        body["missing_permissions"],
        json!(["org:billing:manage", "org:billing:read"])
    );
    app.get(&org.path(&format!("/members/{newcomer}")), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    let held = app
        .get(&target_path, &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(held["role_id"], json!(helpers));

    // A role within the admin's keys is assignable by the admin.
    let readers = app.role(&org, "Readers", &["org:team:read"]).await;
    let moved = app
        .patch(&target_path, &admin, json!({"role_id": readers}))
        .await
        .expect(200)
        .json();
    assert_eq!(moved["role_name"], json!("Readers"));

    // The owner can assign Billing both ways.
    let added = app
        .post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": newcomer, "role_id": billing}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(added["role_id"], json!(billing));
    assert_eq!(added["role_name"], json!("Billing"));
    app.patch(&target_path, &org.owner_token, json!({"role_id": billing}))
        .await
        .expect(200);
}
}

on_both_engines! {
async fn only_an_owner_can_make_someone_an_owner() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let admin_role = app.role(&org, "Admins", &ADMIN_KEYS).await;
    let (_, admin) = app.member(&org, &admin_role).await;
    let helpers = app.role(&org, "Helpers", &["org:team:read"]).await;
    let (target, _) = app.member(&org, &helpers).await;
    let (newcomer, _) = app.user("would-be-owner@example.test").await;
    let target_path = org.path(&format!("/members/{target}"));

    let body = app
        .post(
            &org.path("/members"),
            &admin,
            json!({"user_id": newcomer, "role_id": org.owner_role}),
        )
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(body["missing_permissions"], lacking(&ADMIN_KEYS));
    let body = app
        .patch(&target_path, &admin, json!({"role_id": org.owner_role}))
        .await
        .problem(403, "PERMISSION_ESCALATION");
    assert_eq!(body["missing_permissions"], lacking(&ADMIN_KEYS));
    // The admin cannot promote themself either.
    let (admin_id, admin2) = app.member(&org, &admin_role).await;
    app.patch(
        &org.path(&format!("/members/{admin_id}")),
        &admin2,
        json!({"role_id": org.owner_role}),
    )
    .await
    .problem(403, "PERMISSION_ESCALATION");

    let owner_role = get_role(&app, &org, &org.owner_role)
        .await
        .expect(200)
        .json();
    assert_eq!(owner_role["member_count"], json!(1));

    // The owner can.
    let promoted = app
        .patch(
            &target_path,
            &org.owner_token,
            json!({"role_id": org.owner_role}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(promoted["role_id"], json!(org.owner_role));
    assert_eq!(promoted["role_name"], json!("Owner"));
    let added = app
        .post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": newcomer, "role_id": org.owner_role}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(added["role_name"], json!("Owner"));
    let owner_role = get_role(&app, &org, &org.owner_role)
        .await
        .expect(200)
        .json();
    assert_eq!(owner_role["member_count"], json!(3));
}
}

on_both_engines! {
async fn copy_permissions_from_member_gives_its_41_keys() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let copied = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "Like Member", "copy_permissions_from": org.member_role}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(copied["permissions"], member_keys());
    assert_eq!(copied["permissions"].as_array().expect("keys").len(), 41);

    // Copied keys are added to the listed ones.
    let plus = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "Member plus", "permissions": ["org:tasks:delete"], "copy_permissions_from": org.member_role}),
        )
        .await
        .expect(201)
        .json();
    let mut expected: Vec<&str> = CATALOG
        .iter()
        .copied()
        .filter(|k| !k.ends_with(":delete") && !k.ends_with(":manage"))
        .collect();
    expected.push("org:tasks:delete");
    assert_eq!(plus["permissions"], sorted(&expected));

    // Copy follows the current Member set, not the default.
    app.patch(
        &org.path(&format!("/roles/{}", org.member_role)),
        &org.owner_token,
        json!({"permissions": ["org:team:read"]}),
    )
    .await
    .expect(200);
    let now = app
        .post(
            &org.path("/roles"),
            &org.owner_token,
            json!({"name": "Like Member now", "copy_permissions_from": org.member_role}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(now["permissions"], json!(["org:team:read"]));

    // Another org's role is unknown here; a malformed id is a validation error.
    let other = app.org("enterprise").await;
    app.post(
        &org.path("/roles"),
        &org.owner_token,
        json!({"name": "Foreign", "copy_permissions_from": other.member_role}),
    )
    .await
    .problem(422, "UNKNOWN_ROLE");
    app.post(
        &org.path("/roles"),
        &org.owner_token,
        json!({"name": "Malformed", "copy_permissions_from": "not-a-uuid"}),
    )
    .await
    .problem(400, "VALIDATION_FAILED");
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(
        names(&list),
        [
            "Owner",
            "Member",
            "Like Member",
            "Like Member now",
            "Member plus"
        ]
    );
}
}

on_both_engines! {
async fn if_match_guards_role_patch_and_delete() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Guarded", &["org:team:read"]).await;
    let path = org.path(&format!("/roles/{role}"));
    let t0 = get_role(&app, &org, &role).await.expect(200).header("etag");
    assert_strong_etag(&t0);

    // A stale tag: 412, nothing written.
    for stale in ["\"stale\"", "\"\"", "W/\"stale\""] {
        with_if_match(
            &app,
            Method::PATCH,
            &path,
            &org.owner_token,
            stale,
            Some(json!({"name": "Lost update"})),
        )
        .await
        .problem(412, "PRECONDITION_FAILED");
    }
    // A weak form of the current tag never matches.
    with_if_match(
        &app,
        Method::PATCH,
        &path,
        &org.owner_token,
        &format!("W/{t0}"),
        Some(json!({"name": "Lost update"})),
    )
    .await
    .problem(412, "PRECONDITION_FAILED");
    // 412 comes before body validation.
    with_if_match(
        &app,
        Method::PATCH,
        &path,
        &org.owner_token,
        "\"stale\"",
        Some(json!({"bogus": 1})),
    )
    .await
    .problem(412, "PRECONDITION_FAILED");
    let unchanged = get_role(&app, &org, &role).await.expect(200);
    assert_eq!(unchanged.header("etag"), t0);
    assert_eq!(unchanged.json()["name"], json!("Guarded"));

    // The current tag: 200, and the ETag changes.
    let reply = with_if_match(
        &app,
        Method::PATCH,
        &path,
        &org.owner_token,
        &t0,
        Some(json!({"name": "Guarded 2"})),
    )
    .await
    .expect(200);
    let t1 = reply.header("etag");
    assert_strong_etag(&t1);
    assert_ne!(t1, t0, "ETag changes after a PATCH");
    assert_eq!(reply.json()["name"], json!("Guarded 2"));
    let got = get_role(&app, &org, &role).await.expect(200);
    assert_eq!(got.header("etag"), t1);
    assert_eq!(got.json(), reply.json());

    // The old tag is now stale, for PATCH and DELETE.
    with_if_match(
        &app,
        Method::PATCH,
        &path,
        &org.owner_token,
        &t0,
        Some(json!({"name": "Lost update"})),
    )
    .await
    .problem(412, "PRECONDITION_FAILED");
    with_if_match(&app, Method::DELETE, &path, &org.owner_token, &t0, None)
        .await
        .problem(412, "PRECONDITION_FAILED");
    get_role(&app, &org, &role).await.expect(200);

    // `*` matches.
    let reply = with_if_match(
        &app,
        Method::PATCH,
        &path,
        &org.owner_token,
        "*",
        Some(json!({"permissions": ["org:team:read", "org:tasks:read"]})),
    )
    .await
    .expect(200);
    let t2 = reply.header("etag");
    assert_ne!(t2, t1);
    assert_eq!(
        reply.json()["permissions"],
        json!(["org:tasks:read", "org:team:read"])
    );

    // DELETE with the current tag.
    with_if_match(&app, Method::DELETE, &path, &org.owner_token, &t1, None)
        .await
        .problem(412, "PRECONDITION_FAILED");
    with_if_match(&app, Method::DELETE, &path, &org.owner_token, &t2, None)
        .await
        .expect(204);
    get_role(&app, &org, &role).await.problem(404, "NOT_FOUND");

    // DELETE with `*`.
    let other = app.role(&org, "Other", &[]).await;
    let other_path = org.path(&format!("/roles/{other}"));
    with_if_match(
        &app,
        Method::DELETE,
        &other_path,
        &org.owner_token,
        "*",
        None,
    )
    .await
    .expect(204);
    get_role(&app, &org, &other).await.problem(404, "NOT_FOUND");

    // Member's ETag works the same way.
    let member_path = org.path(&format!("/roles/{}", org.member_role));
    let tm = get_role(&app, &org, &org.member_role)
        .await
        .expect(200)
        .header("etag");
    with_if_match(
        &app,
        Method::PATCH,
        &member_path,
        &org.owner_token,
        "\"stale\"",
        Some(json!({"name": "Staff"})),
    )
    .await
    .problem(412, "PRECONDITION_FAILED");
    let reply = with_if_match(
        &app,
        Method::PATCH,
        &member_path,
        &org.owner_token,
        &tm,
        Some(json!({"name": "Staff"})),
    )
    .await
    .expect(200);
    assert_ne!(reply.header("etag"), tm);
}
}

// ---------------------------------------------------------------------------
// 3. Changes take effect on the very next request
// ---------------------------------------------------------------------------

on_both_engines! {
async fn member_role_changes_apply_to_every_holder_on_the_next_request() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let (u1, t1) = app.member(&org, &org.member_role).await;
    let (u2, t2) = app.member(&org, &org.member_role).await;
    let member_path = org.path(&format!("/roles/{}", org.member_role));

    for token in [&t1, &t2] {
        app.get(&org.path("/members"), token).await.expect(200);
    }
    app.patch(
        &member_path,
        &org.owner_token,
        json!({"permissions": member_keys_without("org:team:read")}),
    )
    .await
    .expect(200);
    // No sleep: the very next request of every holder sees the change.
    for token in [&t1, &t2] {
        let body = app
            .get(&org.path("/members"), token)
            .await
            .problem(403, "FORBIDDEN");
        assert_eq!(body["missing_permission"], json!("org:team:read"));
    }
    // Restoring it is immediate as well.
    app.patch(
        &member_path,
        &org.owner_token,
        json!({"permissions": member_keys()}),
    )
    .await
    .expect(200);
    for token in [&t1, &t2] {
        app.get(&org.path("/members"), token).await.expect(200);
    }

    // A rename shows at once in /me and in the memberships.
    app.patch(&member_path, &org.owner_token, json!({"name": "Staff"}))
        .await
        .expect(200);
    for (user, token) in [(&u1, &t1), (&u2, &t2)] {
        let me = app.get("/me", token).await.expect(200).json();
        assert_eq!(
            me["memberships"],
            json!([{"organization_id": org.id, "role_id": org.member_role, "role_name": "Staff"}])
        );
        let membership = app
            .get(&org.path(&format!("/members/{user}")), token)
            .await
            .expect(200)
            .json();
        assert_eq!(membership["role_id"], json!(org.member_role));
        assert_eq!(membership["role_name"], json!("Staff"));
    }
    let list = app
        .get(&org.path("/members"), &org.owner_token)
        .await
        .expect(200)
        .json();
    for item in list["items"].as_array().expect("items") {
        let expected = if item["user_id"] == json!(org.owner_id) {
            "Owner"
        } else {
            "Staff"
        };
        assert_eq!(item["role_name"], json!(expected));
    }

    // A custom role's change applies at once too.
    let custom = app.role(&org, "Readers", &["org:team:read"]).await;
    let (_, t3) = app.member(&org, &custom).await;
    app.get(&org.path("/members"), &t3).await.expect(200);
    app.patch(
        &org.path(&format!("/roles/{custom}")),
        &org.owner_token,
        json!({"permissions": ["org:decisions:read"]}),
    )
    .await
    .expect(200);
    let body = app
        .get(&org.path("/members"), &t3)
        .await
        .problem(403, "FORBIDDEN");
    assert_eq!(body["missing_permission"], json!("org:team:read"));
}
}

on_both_engines! {
async fn a_revoked_token_fails_on_the_very_next_request() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let (user, other_token) = app.member(&org, &org.member_role).await;
    let issued = app
        .post(
            &format!("/admin/users/{user}/tokens"),
            &app.admin,
            json!({"kind": "session", "name": "laptop"}),
        )
        .await
        .expect(201)
        .json();
    let token_id = issued["id"].as_str().expect("token id");
    let token = issued["token"].as_str().expect("token");
    app.get("/me", token).await.expect(200);
    app.get(&org.path("/roles"), token).await.expect(200);

    let reply = app
        .delete(&format!("/admin/tokens/{token_id}"), &app.admin)
        .await
        .expect(204);
    assert!(reply.body.is_empty());
    for path in ["/me".to_owned(), org.path("/roles")] {
        let reply = app.get(&path, token).await;
        reply.problem(401, "UNAUTHENTICATED");
        assert!(
            reply.header("www-authenticate").starts_with("Bearer"),
            "401 without WWW-Authenticate: Bearer"
        );
    }
    // The user's other token still works.
    app.get("/me", &other_token).await.expect(200);
}
}

// ---------------------------------------------------------------------------
// 4. Downgrade and upgrade
// ---------------------------------------------------------------------------

on_both_engines! {
async fn downgrade_keeps_custom_roles_assignable_and_in_force_but_read_only() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let reviewer = app
        .role(&org, "Reviewer", &["org:team:read", "org:decisions:read"])
        .await;
    let spare = app.role(&org, "Spare", &[]).await;
    let (holder, holder_token) = app.member(&org, &reviewer).await;
    let (plain, plain_token) = app.member(&org, &org.member_role).await;

    set_plan(&app, &org, "pro").await;

    // Still listed and readable.
    let list = app
        .get(&org.path("/roles"), &holder_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&list), ["Owner", "Member", "Reviewer", "Spare"]);
    let role = get_role(&app, &org, &reviewer).await.expect(200).json();
    assert_eq!(
        role["permissions"],
        json!(["org:decisions:read", "org:team:read"])
    );
    assert_eq!(role["member_count"], json!(1));

    // Still in force: the holder has team:read but not settings:read (which
    // Member would give).
    app.get(&org.path("/members"), &holder_token)
        .await
        .expect(200);
    let body = app
        .get(&org.path("/audit-log"), &holder_token)
        .await
        .problem(403, "FORBIDDEN");
    assert_eq!(body["missing_permission"], json!("org:settings:read"));
    let me = app.get("/me", &holder_token).await.expect(200).json();
    assert_eq!(me["memberships"][0]["role_name"], json!("Reviewer"));
    app.get(&org.path("/audit-log"), &plain_token)
        .await
        .expect(200);

    // Still assignable: invite and change-role.
    let (newcomer, newcomer_token) = app.user("late@example.test").await;
    let added = app
        .post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": newcomer, "role_id": reviewer}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(added["role_id"], json!(reviewer));
    assert_eq!(added["role_name"], json!("Reviewer"));
    let changed = app
        .patch(
            &org.path(&format!("/members/{plain}")),
            &org.owner_token,
            json!({"role_id": reviewer}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(changed["role_name"], json!("Reviewer"));
    // The changed member now has the custom role's keys.
    app.get(&org.path("/audit-log"), &plain_token)
        .await
        .problem(403, "FORBIDDEN");
    app.get(&org.path("/members"), &newcomer_token)
        .await
        .expect(200);
    let role = get_role(&app, &org, &reviewer).await.expect(200).json();
    assert_eq!(role["member_count"], json!(3));

    // Writes answer 402.
    let reviewer_path = org.path(&format!("/roles/{reviewer}"));
    let spare_path = org.path(&format!("/roles/{spare}"));
    app.post(
        &org.path("/roles"),
        &org.owner_token,
        json!({"name": "New"}),
    )
    .await
    .problem(402, "LICENSE_REQUIRED");
    app.patch(&reviewer_path, &org.owner_token, json!({"name": "Renamed"}))
        .await
        .problem(402, "LICENSE_REQUIRED");
    app.patch(
        &org.path(&format!("/roles/{}", org.member_role)),
        &org.owner_token,
        json!({"name": "Staff"}),
    )
    .await
    .problem(402, "LICENSE_REQUIRED");
    app.delete(&spare_path, &org.owner_token)
        .await
        .problem(402, "LICENSE_REQUIRED");
    with_if_match(
        &app,
        Method::DELETE,
        &spare_path,
        &org.owner_token,
        "*",
        None,
    )
    .await
    .problem(402, "LICENSE_REQUIRED");
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&list), ["Owner", "Member", "Reviewer", "Spare"]);

    // Upgrade: writes work again at once.
    set_plan(&app, &org, "enterprise").await;
    app.post(
        &org.path("/roles"),
        &org.owner_token,
        json!({"name": "New"}),
    )
    .await
    .expect(201);
    let renamed = app
        .patch(&reviewer_path, &org.owner_token, json!({"name": "Renamed"}))
        .await
        .expect(200)
        .json();
    assert_eq!(renamed["name"], json!("Renamed"));
    app.delete(&spare_path, &org.owner_token).await.expect(204);
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(names(&list), ["Owner", "Member", "New", "Renamed"]);
    let membership = app
        .get(&org.path(&format!("/members/{holder}")), &holder_token)
        .await
        .expect(200)
        .json();
    assert_eq!(membership["role_name"], json!("Renamed"));
}
}

// ---------------------------------------------------------------------------
// GET /roles/{id}/members
// ---------------------------------------------------------------------------

on_both_engines! {
async fn role_members_lists_exactly_the_roles_members() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let crew = app.role(&org, "Crew", &["org:team:read"]).await;
    let blind = app.role(&org, "Blind", &["org:decisions:read"]).await;
    let (c1, c1_token) = app.member(&org, &crew).await;
    let (c2, _) = app.member(&org, &crew).await;
    let (m1, m1_token) = app.member(&org, &org.member_role).await;
    let (_, blind_token) = app.member(&org, &blind).await;
    let empty = app.role(&org, "Empty", &[]).await;

    let mut expected = vec![c1.clone(), c2.clone()];
    expected.sort();
    let list = app
        .get(
            &org.path(&format!("/roles/{crew}/members")),
            &org.owner_token,
        )
        .await
        .expect(200)
        .json();
    assert_eq!(user_ids(&list), expected);
    assert_eq!(list["next_cursor"], Value::Null);
    for item in list["items"].as_array().expect("items") {
        let fields: BTreeSet<&str> = item
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            fields,
            [
                "organization_id",
                "user_id",
                "email",
                "role_id",
                "role_name",
                "role_expires_at",
                "joined_at",
                "updated_at"
            ]
            .into_iter()
            .collect::<BTreeSet<&str>>()
        );
        assert_eq!(item["organization_id"], json!(org.id));
        assert_eq!(item["role_id"], json!(crew));
        assert_eq!(item["role_name"], json!("Crew"));
        assert_timestamp(&item["joined_at"]);
        assert_timestamp(&item["updated_at"]);
    }

    // Any holder of org:team:read may ask; others get 403.
    for token in [&c1_token, &m1_token] {
        let list = app
            .get(
                &org.path(&format!("/roles/{}/members", org.member_role)),
                token,
            )
            .await
            .expect(200)
            .json();
        assert_eq!(user_ids(&list), [m1.as_str()]);
    }
    let owners = app
        .get(
            &org.path(&format!("/roles/{}/members", org.owner_role)),
            &c1_token,
        )
        .await
        .expect(200)
        .json();
    assert_eq!(user_ids(&owners), [org.owner_id.as_str()]);
    let none = app
        .get(&org.path(&format!("/roles/{empty}/members")), &c1_token)
        .await
        .expect(200)
        .json();
    assert_eq!(none["items"], json!([]));

    let body = app
        .get(&org.path(&format!("/roles/{crew}/members")), &blind_token)
        .await
        .problem(403, "FORBIDDEN");
    assert_eq!(body["missing_permission"], json!("org:team:read"));
    // Even for their own role.
    let body = app
        .get(&org.path(&format!("/roles/{blind}/members")), &blind_token)
        .await
        .problem(403, "FORBIDDEN");
    assert_eq!(body["missing_permission"], json!("org:team:read"));

    // Unknown role: 404.
    let unknown = rolecall::ids::new_v7().to_string();
    app.get(
        &org.path(&format!("/roles/{unknown}/members")),
        &org.owner_token,
    )
    .await
    .problem(404, "NOT_FOUND");

    // Membership moves are reflected at once.
    app.patch(
        &org.path(&format!("/members/{c1}")),
        &org.owner_token,
        json!({"role_id": org.member_role}),
    )
    .await
    .expect(200);
    let list = app
        .get(
            &org.path(&format!("/roles/{crew}/members")),
            &org.owner_token,
        )
        .await
        .expect(200)
        .json();
    assert_eq!(user_ids(&list), [c2.as_str()]);
    let list = app
        .get(
            &org.path(&format!("/roles/{}/members", org.member_role)),
            &org.owner_token,
        )
        .await
        .expect(200)
        .json();
    let mut expected = vec![c1, m1];
    expected.sort();
    assert_eq!(user_ids(&list), expected);
}
}

on_both_engines! {
async fn the_role_list_shows_every_membership_and_deletion_at_once() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let ops = app.role(&org, "Ops", &["org:team:read"]).await;
    let count_of = |list: &Value, id: &str| {
        list["items"]
            .as_array()
            .and_then(|items| items.iter().find(|r| r["id"] == json!(id)))
            .map(|r| r["member_count"].clone())
    };
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(count_of(&list, &ops), Some(json!(0)));

    let (user, _) = app.member(&org, &ops).await;
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(count_of(&list, &ops), Some(json!(1)));

    app.delete(&org.path(&format!("/members/{user}")), &org.owner_token)
        .await
        .expect(204);
    app.delete(&org.path(&format!("/roles/{ops}")), &org.owner_token)
        .await
        .expect(204);
    let list = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(count_of(&list, &ops), None);
    assert_eq!(names(&list), ["Owner", "Member"]);
}
}
