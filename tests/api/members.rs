//! Members (CONTRACT §5): reading, the `?permission=` filter, invitations,
//! role changes, removal, the last-Owner rule, and concurrency.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Org, Reply, TestApp};

/// A fresh UUID v7 that names nothing.
fn unknown_id() -> String {
    rolecall::ids::new_v7().to_string()
}

/// RFC 3339 UTC with milliseconds and `Z`: `2026-11-22T10:00:00.123Z`.
#[track_caller]
fn assert_timestamp(value: &Value) {
    let text = value.as_str().expect("timestamp is a string");
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

/// Asserts the exact membership representation.
#[track_caller]
fn assert_membership(
    value: &Value,
    org: &Org,
    user_id: &str,
    email: &str,
    role_id: &str,
    role_name: &str,
) {
    let keys: Vec<&str> = value
        .as_object()
        .expect("membership is an object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "email",
            "joined_at",
            "organization_id",
            "role_expires_at",
            "role_id",
            "role_name",
            "updated_at",
            "user_id"
        ],
        "membership fields: {value}"
    );
    assert_eq!(value["organization_id"], json!(org.id));
    assert_eq!(value["user_id"], json!(user_id));
    assert_eq!(value["email"], json!(email));
    assert_eq!(value["role_id"], json!(role_id));
    assert_eq!(value["role_name"], json!(role_name));
    assert_timestamp(&value["joined_at"]);
    assert_timestamp(&value["updated_at"]);
}

/// The org's members as its owner sees them.
async fn members(app: &TestApp, org: &Org) -> Vec<Value> {
    let list = app
        .get(&org.path("/members?limit=200"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(list["next_cursor"], Value::Null);
    list["items"].as_array().expect("items").clone()
}

/// User ids of a member list, in order.
fn user_ids(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|m| m["user_id"].as_str().expect("user_id").to_owned())
        .collect()
}

/// A sorted copy.
fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// The caller's membership as the owner sees it.
async fn membership(app: &TestApp, org: &Org, user_id: &str) -> Value {
    app.get(&org.path(&format!("/members/{user_id}")), &org.owner_token)
        .await
        .expect(200)
        .json()
}

/// A fresh user with a unique email: (id, token, email as the user record holds it).
async fn fresh_user(app: &TestApp, prefix: &str) -> (String, String, String) {
    let email = format!("{prefix}-{}@example.test", rolecall::ids::new_v7().simple());
    let user = app.create_user(&email).await;
    let id = user["id"].as_str().expect("id").to_owned();
    let stored = user["email"].as_str().expect("email").to_owned();
    let token = app.create_token(&id).await;
    (id, token, stored)
}

/// The forbidden problem with its `missing_permission` member.
#[track_caller]
fn assert_forbidden(reply: &Reply, key: &str) {
    let body = reply.problem(403, "FORBIDDEN");
    assert_eq!(body["missing_permission"], json!(key), "body: {body}");
}

on_both_engines! {
async fn member_list_needs_team_read_and_is_ordered_by_user_id() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let blind = app.role(&org, "Blind", &["org:decisions:read"]).await;
    let (blind_id, blind_token) = app.member(&org, &blind).await;
    let (plain_id, plain_token) = app.member(&org, &org.member_role).await;

    let refused = app.get(&org.path("/members"), &blind_token).await;
    assert_forbidden(&refused, "org:team:read");

    // Member's default set holds org:team:read.
    let list = app
        .get(&org.path("/members"), &plain_token)
        .await
        .expect(200)
        .json();
    assert_eq!(list["next_cursor"], Value::Null);
    let items = list["items"].as_array().expect("items").clone();
    assert_eq!(items.len(), 3);
    let ids = user_ids(&items);
    assert_eq!(
        ids,
        sorted(vec![
            org.owner_id.clone(),
            blind_id.clone(),
            plain_id.clone()
        ]),
        "members are ordered by user id"
    );
    for item in &items {
        let user = item["user_id"].as_str().expect("user_id");
        let (role_id, role_name) = if user == org.owner_id {
            (org.owner_role.as_str(), "Owner")
        } else if user == blind_id {
            (blind.as_str(), "Blind")
        } else {
            (org.member_role.as_str(), "Member")
        };
        let email = item["email"].as_str().expect("email").to_owned();
        assert_membership(item, &org, user, &email, role_id, role_name);
    }
    // The owner sees the same list.
    assert_eq!(members(&app, &org).await, items);
}
}

on_both_engines! {
async fn member_reads_own_membership_but_not_others_without_team_read() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let blind = app.role(&org, "Blind", &["org:decisions:read"]).await;
    let (blind_id, blind_token, blind_email) = fresh_user(&app, "Blind.User").await;
    let invited = app
        .post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": blind_id, "role_id": blind}),
        )
        .await
        .expect(201)
        .json();
    assert_membership(&invited, &org, &blind_id, &blind_email, &blind, "Blind");

    // Their own: always readable, and identical to what the invite answered.
    let own = app
        .get(&org.path(&format!("/members/{blind_id}")), &blind_token)
        .await
        .expect(200)
        .json();
    assert_eq!(own, invited);
    assert_membership(&own, &org, &blind_id, &blind_email, &blind, "Blind");

    // Someone else's: 403 without org:team:read.
    let other = app
        .get(
            &org.path(&format!("/members/{}", org.owner_id)),
            &blind_token,
        )
        .await;
    assert_forbidden(&other, "org:team:read");

    // Unknown user: 404 (the resource check comes before the permission check).
    for token in [&blind_token, &org.owner_token] {
        app.get(&org.path(&format!("/members/{}", unknown_id())), token)
            .await
            .problem(404, "NOT_FOUND");
        app.get(&org.path("/members/not-a-uuid"), token)
            .await
            .problem(404, "NOT_FOUND");
    }
    // An existing user who is not a member: 404.
    let (outsider, _) = app.user("outsider@example.test").await;
    app.get(&org.path(&format!("/members/{outsider}")), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");

    // The owner reads anyone's, including the invited one's.
    assert_eq!(membership(&app, &org, &blind_id).await, invited);
    let owner = membership(&app, &org, &org.owner_id).await;
    let owner_email = owner["email"].as_str().expect("email").to_owned();
    assert_membership(
        &owner,
        &org,
        &org.owner_id,
        &owner_email,
        &org.owner_role,
        "Owner",
    );
}
}

on_both_engines! {
async fn permission_filter_lists_only_holders_and_always_the_owner() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let deleter = app
        .role(&org, "Deleter", &["org:decisions:delete", "org:team:read"])
        .await;
    let reader = app.role(&org, "Reader", &["org:decisions:read"]).await;
    let (deleter_id, deleter_token) = app.member(&org, &deleter).await;
    let (reader_id, _) = app.member(&org, &reader).await;
    let (plain_id, _) = app.member(&org, &org.member_role).await;
    let all = members(&app, &org).await;
    let by_user: BTreeMap<String, Value> = all
        .iter()
        .map(|m| (m["user_id"].as_str().expect("id").to_owned(), m.clone()))
        .collect();

    let filtered = |key: &'static str| {
        let app = &app;
        let org = &org;
        async move {
            let list = app
                .get(
                    &org.path(&format!("/members?limit=200&permission={key}")),
                    &org.owner_token,
                )
                .await
                .expect(200)
                .json();
            assert_eq!(list["next_cursor"], Value::Null);
            list["items"].as_array().expect("items").clone()
        }
    };

    // Hand-computed expectations.
    let got = filtered("org:decisions:delete").await;
    assert_eq!(
        user_ids(&got),
        sorted(vec![org.owner_id.clone(), deleter_id.clone()])
    );
    // Filtered items are the full membership representations.
    for item in &got {
        assert_eq!(item, &by_user[item["user_id"].as_str().expect("id")]);
    }
    assert_eq!(
        user_ids(&filtered("org:decisions:read").await),
        sorted(vec![
            org.owner_id.clone(),
            reader_id.clone(),
            plain_id.clone()
        ])
    );
    assert_eq!(
        user_ids(&filtered("org:team:manage").await),
        vec![org.owner_id.clone()]
    );
    assert_eq!(
        user_ids(&filtered("org:team:read").await),
        sorted(vec![
            org.owner_id.clone(),
            deleter_id.clone(),
            plain_id.clone()
        ])
    );
    assert_eq!(
        user_ids(&filtered("org:billing:manage").await),
        vec![org.owner_id.clone()]
    );

    // Every catalog key: exactly the members whose role holds it, Owner always.
    let catalog = app
        .get("/permissions", &org.owner_token)
        .await
        .expect(200)
        .json();
    let keys: Vec<String> = catalog["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| p["key"].as_str().expect("key").to_owned())
        .collect();
    assert_eq!(keys.len(), 52);
    let roles = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    let role_keys: BTreeMap<String, Vec<String>> = roles["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| {
            let keys = r["permissions"]
                .as_array()
                .expect("permissions")
                .iter()
                .map(|k| k.as_str().expect("key").to_owned())
                .collect();
            (r["id"].as_str().expect("id").to_owned(), keys)
        })
        .collect();
    for key in &keys {
        let list = app
            .get(
                &org.path(&format!("/members?limit=200&permission={key}")),
                &deleter_token,
            )
            .await
            .expect(200)
            .json();
        let got = user_ids(list["items"].as_array().expect("items"));
        let expected: Vec<String> = all
            .iter()
            .filter(|m| role_keys[m["role_id"].as_str().expect("role_id")].contains(key))
            .map(|m| m["user_id"].as_str().expect("id").to_owned())
            .collect();
        assert_eq!(got, expected, "holders of {key}");
        assert!(got.contains(&org.owner_id), "Owner holds {key}");
    }

    // Unknown keys: 400 UNKNOWN_PERMISSION naming them.
    for bad in ["org:nope:read", "org:decisions", "decisions:read"] {
        let reply = app
            .get(
                &org.path(&format!("/members?permission={bad}")),
                &org.owner_token,
            )
            .await;
        let body = reply.problem(400, "UNKNOWN_PERMISSION");
        assert_eq!(body["unknown"], json!([bad]));
    }
    // The filter does not bypass org:team:read.
    let (_, blind_token) = app.member(&org, &reader).await;
    let refused = app
        .get(
            &org.path("/members?permission=org:decisions:read"),
            &blind_token,
        )
        .await;
    assert_forbidden(&refused, "org:team:read");
}
}

on_both_engines! {
async fn invite_by_user_id_and_by_email_case_insensitively() {
    let app = spawn_app().await;
    let org = app.org("pro").await;
    let (first_id, first_token, first_email) = fresh_user(&app, "first").await;
    let (second_id, second_token, second_email) = fresh_user(&app, "second.person").await;

    let by_id = app
        .post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": first_id, "role_id": org.member_role}),
        )
        .await
        .expect(201)
        .json();
    assert_membership(
        &by_id,
        &org,
        &first_id,
        &first_email,
        &org.member_role,
        "Member",
    );
    assert_eq!(by_id["joined_at"], by_id["updated_at"]);

    let shouted = second_email.to_uppercase();
    assert_ne!(shouted, second_email);
    let by_email = app
        .post(
            &org.path("/members"),
            &org.owner_token,
            json!({"email": shouted, "role_id": org.member_role}),
        )
        .await
        .expect(201)
        .json();
    // The user's stored email, not the spelling used to invite.
    assert_membership(
        &by_email,
        &org,
        &second_id,
        &second_email,
        &org.member_role,
        "Member",
    );

    // Both are members now: the list, GET, and their own /me agree.
    let ids = user_ids(&members(&app, &org).await);
    assert_eq!(
        ids,
        sorted(vec![
            org.owner_id.clone(),
            first_id.clone(),
            second_id.clone()
        ])
    );
    assert_eq!(membership(&app, &org, &first_id).await, by_id);
    assert_eq!(membership(&app, &org, &second_id).await, by_email);
    for token in [&first_token, &second_token] {
        let me = app.get("/me", token).await.expect(200).json();
        assert_eq!(
            me["memberships"],
            json!([{"organization_id": org.id, "role_id": org.member_role, "role_name": "Member"}])
        );
    }

    // Each invitation wrote one member.added record.
    let audit = app.audit(&org).await;
    let added: Vec<&Value> = audit
        .iter()
        .filter(|r| r["action"] == json!("member.added"))
        .collect();
    assert_eq!(added.len(), 2, "audit: {audit:?}");
    assert_eq!(added[0]["target_id"], json!(second_id));
    assert_eq!(added[0]["after"], by_email);
    assert_eq!(added[1]["target_id"], json!(first_id));
    assert_eq!(added[1]["actor_user_id"], json!(org.owner_id));
}
}

on_both_engines! {
async fn invite_validates_body_then_user_then_role() {
    let app = spawn_app().await;
    let org = app.org("pro").await;
    let (user_id, _, email) = fresh_user(&app, "candidate").await;
    let before = members(&app, &org).await;
    let audit_before = app.audit(&org).await.len();
    let path = org.path("/members");

    // Exactly one of user_id and email.
    for body in [
        json!({"user_id": user_id, "email": email, "role_id": org.member_role}),
        json!({"role_id": org.member_role}),
    ] {
        app.post(&path, &org.owner_token, body)
            .await
            .problem(400, "VALIDATION_FAILED");
    }
    // role_id is required; malformed role ids are validation failures.
    app.post(&path, &org.owner_token, json!({"user_id": user_id}))
        .await
        .problem(400, "VALIDATION_FAILED");
    let malformed = app
        .post(
            &path,
            &org.owner_token,
            json!({"user_id": user_id, "role_id": "not-a-uuid"}),
        )
        .await;
    assert_eq!(
        malformed.problem(400, "VALIDATION_FAILED")["field"],
        json!("role_id")
    );

    // Unknown user: 404, by id and by email, even with an unknown role.
    for body in [
        json!({"user_id": unknown_id(), "role_id": org.member_role}),
        json!({"email": "nobody-here@example.test", "role_id": org.member_role}),
        json!({"user_id": unknown_id(), "role_id": unknown_id()}),
    ] {
        app.post(&path, &org.owner_token, body)
            .await
            .problem(404, "NOT_FOUND");
    }
    // Known user, unknown role: 422.
    app.post(
        &path,
        &org.owner_token,
        json!({"user_id": user_id, "role_id": unknown_id()}),
    )
    .await
    .problem(422, "UNKNOWN_ROLE");

    // Nothing changed.
    assert_eq!(members(&app, &org).await, before);
    assert_eq!(app.audit(&org).await.len(), audit_before);
}
}

on_both_engines! {
async fn invite_needs_team_invite_before_the_user_is_looked_up() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let reader = app.role(&org, "Reader", &["org:team:read"]).await;
    let (_, reader_token) = app.member(&org, &reader).await;
    let (candidate, _, _) = fresh_user(&app, "candidate").await;
    let before = members(&app, &org).await;
    let path = org.path("/members");

    for body in [
        json!({"user_id": unknown_id(), "role_id": org.member_role}),
        json!({"email": "nobody-here@example.test", "role_id": org.member_role}),
        json!({"user_id": candidate, "role_id": reader}),
    ] {
        let reply = app.post(&path, &reader_token, body).await;
        assert_forbidden(&reply, "org:team:invite");
    }
    assert_eq!(members(&app, &org).await, before);

    // Member's default set holds org:team:invite: a plain member may invite.
    let (_, plain_token) = app.member(&org, &org.member_role).await;
    app.post(
        &path,
        &plain_token,
        json!({"user_id": candidate, "role_id": org.member_role}),
    )
    .await
    .expect(201);
    // But unknown users are then 404 for them too.
    app.post(
        &path,
        &plain_token,
        json!({"user_id": unknown_id(), "role_id": org.member_role}),
    )
    .await
    .problem(404, "NOT_FOUND");
}
}

on_both_engines! {
async fn inviting_an_existing_member_conflicts() {
    let app = spawn_app().await;
    let org = app.org("pro").await;
    let (member_id, _, member_email) = fresh_user(&app, "Existing").await;
    app.post(
        &org.path("/members"),
        &org.owner_token,
        json!({"email": member_email, "role_id": org.member_role}),
    )
    .await
    .expect(201);
    let before = members(&app, &org).await;
    let audit_before = app.audit(&org).await.len();

    for body in [
        json!({"user_id": member_id, "role_id": org.member_role}),
        json!({"user_id": member_id, "role_id": org.owner_role}),
        json!({"email": member_email.to_uppercase(), "role_id": org.member_role}),
        json!({"user_id": org.owner_id, "role_id": org.member_role}),
    ] {
        app.post(&org.path("/members"), &org.owner_token, body)
            .await
            .problem(409, "ALREADY_MEMBER");
    }
    assert_eq!(members(&app, &org).await, before);
    assert_eq!(app.audit(&org).await.len(), audit_before);
}
}

on_both_engines! {
async fn changing_a_role_needs_team_manage() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let editor = app
        .role(&org, "Editor", &["org:decisions:read", "org:team:read"])
        .await;
    let (plain_id, plain_token) = app.member(&org, &org.member_role).await;
    let (target_id, _) = app.member(&org, &org.member_role).await;
    let before = members(&app, &org).await;
    let audit_before = app.audit(&org).await.len();

    // A plain Member (no org:team:manage) can change nobody's role, not even their own.
    for who in [&target_id, &plain_id, &org.owner_id] {
        let reply = app
            .patch(
                &org.path(&format!("/members/{who}")),
                &plain_token,
                json!({"role_id": editor}),
            )
            .await;
        assert_forbidden(&reply, "org:team:manage");
    }
    assert_eq!(members(&app, &org).await, before);
    assert_eq!(app.audit(&org).await.len(), audit_before);

    // The owner may.
    let old = membership(&app, &org, &target_id).await;
    let changed = app
        .patch(
            &org.path(&format!("/members/{target_id}")),
            &org.owner_token,
            json!({"role_id": editor}),
        )
        .await
        .expect(200)
        .json();
    let email = old["email"].as_str().expect("email").to_owned();
    assert_membership(&changed, &org, &target_id, &email, &editor, "Editor");
    assert_eq!(changed["joined_at"], old["joined_at"]);
    assert!(
        changed["updated_at"].as_str() >= old["updated_at"].as_str(),
        "updated_at moves forward"
    );
    assert_eq!(membership(&app, &org, &target_id).await, changed);
    let audit = app.audit(&org).await;
    assert_eq!(audit.len(), audit_before + 1);
    assert_eq!(audit[0]["action"], json!("member.role_changed"));
    assert_eq!(audit[0]["target_id"], json!(target_id));
    assert_eq!(audit[0]["before"], old);
    assert_eq!(audit[0]["after"], changed);

    // A no-op change answers 200 and writes nothing.
    let same = app
        .patch(
            &org.path(&format!("/members/{target_id}")),
            &org.owner_token,
            json!({"role_id": editor}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(same, changed);
    assert_eq!(app.audit(&org).await.len(), audit_before + 1);

    // Unknown member: 404; malformed body role: 400; unknown role: 422.
    app.patch(
        &org.path(&format!("/members/{}", unknown_id())),
        &org.owner_token,
        json!({"role_id": editor}),
    )
    .await
    .problem(404, "NOT_FOUND");
    let bad = app
        .patch(
            &org.path(&format!("/members/{target_id}")),
            &org.owner_token,
            json!({"role_id": 7}),
        )
        .await;
    bad.problem(400, "VALIDATION_FAILED");
    app.patch(
        &org.path(&format!("/members/{target_id}")),
        &org.owner_token,
        json!({"role_id": unknown_id()}),
    )
    .await
    .problem(422, "UNKNOWN_ROLE");
    assert_eq!(membership(&app, &org, &target_id).await, changed);
}
}

on_both_engines! {
async fn a_non_owner_manager_cannot_promote_to_or_act_above_themself() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let manager = app
        .role(
            &org,
            "Manager",
            &["org:team:read", "org:team:invite", "org:team:manage"],
        )
        .await;
    let lesser = app.role(&org, "Lesser", &["org:team:read"]).await;
    let (manager_id, manager_token) = app.member(&org, &manager).await;
    let (lesser_id, _) = app.member(&org, &lesser).await;
    let (plain_id, _) = app.member(&org, &org.member_role).await;
    let before = members(&app, &org).await;
    let audit_before = app.audit(&org).await.len();

    // Assigning Owner (keys the manager lacks): escalation.
    let reply = app
        .patch(
            &org.path(&format!("/members/{lesser_id}")),
            &manager_token,
            json!({"role_id": org.owner_role}),
        )
        .await;
    let body = reply.problem(403, "PERMISSION_ESCALATION");
    assert!(
        body["missing_permissions"]
            .as_array()
            .is_some_and(|m| m.contains(&json!("org:billing:manage"))),
        "body: {body}"
    );
    // Demoting or removing the Owner, or a Member (whose roles hold keys the
    // manager lacks): escalation.
    for target in [&org.owner_id, &plain_id] {
        let path = org.path(&format!("/members/{target}"));
        app.patch(&path, &manager_token, json!({"role_id": lesser}))
            .await
            .problem(403, "PERMISSION_ESCALATION");
        app.delete(&path, &manager_token)
            .await
            .problem(403, "PERMISSION_ESCALATION");
    }
    assert_eq!(members(&app, &org).await, before);
    assert_eq!(app.audit(&org).await.len(), audit_before);

    // A member within reach may be changed and removed, and the manager may leave.
    let changed = app
        .patch(
            &org.path(&format!("/members/{lesser_id}")),
            &manager_token,
            json!({"role_id": manager}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(changed["role_name"], json!("Manager"));
    app.delete(&org.path(&format!("/members/{lesser_id}")), &manager_token)
        .await
        .expect(204);
    app.delete(&org.path(&format!("/members/{manager_id}")), &manager_token)
        .await
        .expect(204);
    assert_eq!(
        user_ids(&members(&app, &org).await),
        sorted(vec![org.owner_id.clone(), plain_id.clone()])
    );
}
}

on_both_engines! {
async fn members_may_leave_but_removing_others_needs_team_manage() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let reader = app.role(&org, "Reader", &["org:decisions:read"]).await;
    let (leaver_id, leaver_token) = app.member(&org, &reader).await;
    let (plain_id, plain_token) = app.member(&org, &org.member_role).await;
    let (other_id, _) = app.member(&org, &org.member_role).await;
    let before = members(&app, &org).await;

    // Removing someone else without org:team:manage: 403, nothing changes.
    for target in [&other_id, &org.owner_id, &leaver_id] {
        let reply = app
            .delete(&org.path(&format!("/members/{target}")), &plain_token)
            .await;
        assert_forbidden(&reply, "org:team:manage");
    }
    assert_eq!(members(&app, &org).await, before);

    // Leaving: allowed without org:team:manage.
    let leaving = membership(&app, &org, &leaver_id).await;
    let reply = app
        .delete(&org.path(&format!("/members/{leaver_id}")), &leaver_token)
        .await
        .expect(204);
    assert!(reply.body.is_empty());
    let after = user_ids(&members(&app, &org).await);
    assert_eq!(
        after,
        sorted(vec![
            org.owner_id.clone(),
            plain_id.clone(),
            other_id.clone()
        ])
    );
    // The former member no longer sees the organization at all.
    app.get(&org.path(""), &leaver_token)
        .await
        .problem(404, "NOT_FOUND");
    app.get(&org.path(&format!("/members/{leaver_id}")), &leaver_token)
        .await
        .problem(404, "NOT_FOUND");
    app.get(
        &org.path(&format!("/members/{leaver_id}")),
        &org.owner_token,
    )
    .await
    .problem(404, "NOT_FOUND");
    let audit = app.audit(&org).await;
    assert_eq!(audit[0]["action"], json!("member.removed"));
    assert_eq!(audit[0]["actor_user_id"], json!(leaver_id));
    assert_eq!(audit[0]["target_id"], json!(leaver_id));
    assert_eq!(audit[0]["before"], leaving);
    assert_eq!(audit[0]["after"], Value::Null);

    // The owner removes someone else; removing again is 404.
    app.delete(&org.path(&format!("/members/{other_id}")), &org.owner_token)
        .await
        .expect(204);
    app.delete(&org.path(&format!("/members/{other_id}")), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    assert_eq!(
        user_ids(&members(&app, &org).await),
        sorted(vec![org.owner_id.clone(), plain_id.clone()])
    );
}
}

on_both_engines! {
async fn the_only_owner_cannot_be_demoted_or_removed() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let (_, plain_token) = app.member(&org, &org.member_role).await;
    let before = members(&app, &org).await;
    let owner_before = membership(&app, &org, &org.owner_id).await;
    let audit_before = app.audit(&org).await.len();
    let owner_path = org.path(&format!("/members/{}", org.owner_id));

    app.patch(
        &owner_path,
        &org.owner_token,
        json!({"role_id": org.member_role}),
    )
    .await
    .problem(400, "MUST_HAVE_OWNER");
    app.delete(&owner_path, &org.owner_token)
        .await
        .problem(400, "MUST_HAVE_OWNER");

    // Still the Owner, still listed, nothing written.
    let owner_after = membership(&app, &org, &org.owner_id).await;
    assert_eq!(owner_after, owner_before);
    assert_eq!(owner_after["role_id"], json!(org.owner_role));
    assert_eq!(owner_after["role_name"], json!("Owner"));
    assert_eq!(members(&app, &org).await, before);
    assert_eq!(app.audit(&org).await.len(), audit_before);
    // The owner still holds their powers.
    app.get(&org.path("/members"), &org.owner_token)
        .await
        .expect(200);
    // The other member was not promoted by anything above.
    let me = app.get("/me", &plain_token).await.expect(200).json();
    assert_eq!(me["memberships"][0]["role_name"], json!("Member"));
}
}

on_both_engines! {
async fn with_two_owners_one_may_go_but_not_the_last() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let (second_id, second_token) = app.member(&org, &org.owner_role).await;
    let second_path = org.path(&format!("/members/{second_id}"));
    let first_path = org.path(&format!("/members/{}", org.owner_id));

    // Two owners: the first demotes themself.
    let demoted = app
        .patch(
            &first_path,
            &org.owner_token,
            json!({"role_id": org.member_role}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(demoted["role_id"], json!(org.member_role));
    assert_eq!(demoted["role_name"], json!("Member"));

    // The remaining owner can neither be demoted nor removed.
    let before = members(&app, &org).await;
    app.patch(
        &second_path,
        &second_token,
        json!({"role_id": org.member_role}),
    )
    .await
    .problem(400, "MUST_HAVE_OWNER");
    app.delete(&second_path, &second_token)
        .await
        .problem(400, "MUST_HAVE_OWNER");
    assert_eq!(members(&app, &org).await, before);
    let remaining = app
        .get(&second_path, &second_token)
        .await
        .expect(200)
        .json();
    assert_eq!(remaining["role_id"], json!(org.owner_role));

    // The demoted one lost org:team:manage.
    let reply = app
        .patch(
            &second_path,
            &org.owner_token,
            json!({"role_id": org.member_role}),
        )
        .await;
    assert_forbidden(&reply, "org:team:manage");

    // Promote again, then one owner may be removed, and then not the last.
    app.patch(
        &first_path,
        &second_token,
        json!({"role_id": org.owner_role}),
    )
    .await
    .expect(200);
    app.delete(&second_path, &org.owner_token).await.expect(204);
    app.delete(&first_path, &org.owner_token)
        .await
        .problem(400, "MUST_HAVE_OWNER");
    let left = members(&app, &org).await;
    assert_eq!(user_ids(&left), vec![org.owner_id.clone()]);
    assert_eq!(left[0]["role_id"], json!(org.owner_role));
}
}

/// Every distinct ASCII-case spelling of `word`, up to `n`.
fn case_variants(word: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let mut out = vec![word.to_owned(), word.to_uppercase(), {
        let mut c = word.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    }];
    for mask in 0u32..(1 << chars.len()) {
        let variant: String = chars
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if mask & (1 << i) != 0 {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect();
        if !out.contains(&variant) {
            out.push(variant);
        }
        if out.len() >= n {
            break;
        }
    }
    out.truncate(n);
    out
}

on_both_engines! {
async fn concurrent_creates_of_one_role_name_make_exactly_one_role() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let names = case_variants("auditor", 50);
    assert_eq!(names.len(), 50);
    assert!(names.contains(&"Auditor".to_owned()) && names.contains(&"AUDITOR".to_owned()));
    let path = org.path("/roles");

    let replies = join_all(names.iter().map(|name| {
        app.post(
            &path,
            &org.owner_token,
            json!({"name": name, "permissions": ["org:decisions:read"]}),
        )
    }))
    .await;

    let created: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        created.len(),
        1,
        "statuses: {:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for reply in replies.iter().filter(|r| r.status != 201) {
        reply.problem(409, "NAME_CONFLICT");
    }
    let role = created[0].json();
    let name = role["name"].as_str().expect("name").to_owned();
    assert!(names.contains(&name), "created name {name}");

    let list = app.get(&path, &org.owner_token).await.expect(200).json();
    let items = list["items"].as_array().expect("items");
    let auditors: Vec<&Value> = items
        .iter()
        .filter(|r| {
            r["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case("auditor"))
        })
        .collect();
    assert_eq!(auditors.len(), 1, "roles: {list}");
    assert_eq!(auditors[0]["id"], role["id"]);
    assert_eq!(items.len(), 3, "Owner, Member and the one Auditor");
    let audit = app.audit(&org).await;
    let created_records = audit
        .iter()
        .filter(|r| r["action"] == json!("role.created"))
        .count();
    assert_eq!(created_records, 1);
}
}

on_both_engines! {
async fn concurrent_demotions_never_leave_an_org_without_an_owner() {
    // Accepted answers: 200 (a demotion, or a no-op of an already-demoted
    // owner), 400 MUST_HAVE_OWNER (the other owner is already gone), and
    // 403 FORBIDDEN missing org:team:manage (the caller was demoted to
    // Member, which lacks every *:manage key; 403 precedes the 400 in the
    // check order). Never 404: nobody is removed and the org exists.
    let app = spawn_app().await;
    for _round in 0..3 {
        let org = app.org("enterprise").await;
        let (b_id, b_token) = app.member(&org, &org.owner_role).await;
        let a = (org.owner_id.clone(), org.owner_token.clone());
        let b = (b_id.clone(), b_token.clone());
        let audit_before = app.audit(&org).await.len();

        let plan: Vec<(String, String)> = (0..20)
            .map(|i| {
                let caller = if i % 2 == 0 { &a } else { &b };
                let target = if (i / 2) % 2 == 0 { &a } else { &b };
                (
                    org.path(&format!("/members/{}", target.0)),
                    caller.1.clone(),
                )
            })
            .collect();
        let replies = join_all(
            plan.iter()
                .map(|(path, token)| app.patch(path, token, json!({"role_id": org.member_role}))),
        )
        .await;

        let mut ok = 0;
        for reply in &replies {
            match reply.status {
                200 => {
                    ok += 1;
                    assert_eq!(reply.json()["role_id"], json!(org.member_role));
                }
                400 => {
                    reply.problem(400, "MUST_HAVE_OWNER");
                }
                403 => assert_forbidden(reply, "org:team:manage"),
                other => panic!(
                    "unexpected status {other}: {}",
                    String::from_utf8_lossy(&reply.body)
                ),
            }
        }
        assert!(ok >= 1, "at least one demotion succeeds");

        let after = members(&app, &org).await;
        let owners: Vec<&Value> = after
            .iter()
            .filter(|m| m["role_id"] == json!(org.owner_role))
            .collect();
        assert_eq!(owners.len(), 1, "exactly one owner remains: {after:?}");
        // Exactly one real demotion happened and was recorded.
        let audit = app.audit(&org).await;
        let changes: Vec<&Value> = audit[..audit.len() - audit_before]
            .iter()
            .filter(|r| r["action"] == json!("member.role_changed"))
            .collect();
        assert_eq!(changes.len(), 1, "audit: {audit:?}");
        assert_eq!(audit.len(), audit_before + 1);
        let demoted = changes[0]["target_id"].as_str().expect("target");
        assert_ne!(json!(demoted), owners[0]["user_id"]);
        // The remaining owner still acts as one.
        let owner_token = if owners[0]["user_id"] == json!(a.0) {
            &a.1
        } else {
            &b.1
        };
        app.get(&org.path("/audit-log"), owner_token)
            .await
            .expect(200);
    }
}
}
