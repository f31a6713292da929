//! Cross-organization isolation: an organization the caller is not a member
//! of answers 404 on every route (existence is never leaked), and ids of one
//! organization mean nothing in another.

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Org, TestApp};

/// A fresh UUID v7 that names nothing.
fn unknown_id() -> String {
    rolecall::ids::new_v7().to_string()
}

/// Organization B, with a custom role nobody holds and a member.
struct Target {
    org: Org,
    /// A custom role of B with no members (so a leaked DELETE would succeed).
    role: String,
    /// A member of B holding the Member role.
    member: String,
    /// A user who exists but belongs to no organization (for invitations).
    stranger: String,
}

async fn target(app: &TestApp) -> Target {
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Secret Role", &["org:decisions:read"]).await;
    let (member, _) = app.member(&org, &org.member_role).await;
    let (stranger, _) = app
        .user(&format!(
            "stranger-{}@example.test",
            rolecall::ids::new_v7().simple()
        ))
        .await;
    Target {
        org,
        role,
        member,
        stranger,
    }
}

/// Every org-scoped route, with a body that would succeed for B's owner.
fn routes(org_id: &str, t: &Target) -> Vec<(Method, String, Option<Value>)> {
    let base = format!("/organizations/{org_id}");
    let role = format!("{base}/roles/{}", t.role);
    let member = format!("{base}/members/{}", t.member);
    // Ordered so that, for B's own owner, each request succeeds in turn.
    vec![
        (Method::GET, base.clone(), None),
        (
            Method::PATCH,
            base.clone(),
            Some(json!({"name": "Hijacked"})),
        ),
        (Method::GET, format!("{base}/roles"), None),
        (
            Method::POST,
            format!("{base}/roles"),
            Some(json!({"name": "Intruder", "permissions": ["org:decisions:read"]})),
        ),
        (Method::GET, role.clone(), None),
        (
            Method::PATCH,
            role.clone(),
            Some(json!({"name": "Hijacked role"})),
        ),
        (Method::GET, format!("{role}/members"), None),
        (Method::GET, format!("{base}/members"), None),
        (
            Method::GET,
            format!("{base}/members?permission=org:team:manage"),
            None,
        ),
        (
            Method::POST,
            format!("{base}/members"),
            Some(json!({"user_id": t.stranger, "role_id": t.org.member_role})),
        ),
        (Method::GET, member.clone(), None),
        (
            Method::PATCH,
            member.clone(),
            Some(json!({"role_id": t.role})),
        ),
        (Method::DELETE, member.clone(), None),
        (Method::DELETE, role.clone(), None),
        (Method::GET, format!("{base}/audit-log"), None),
    ]
}

/// What B looks like to its owner.
async fn snapshot(app: &TestApp, org: &Org) -> (Value, Value, Value, Vec<Value>) {
    let get =
        |path: String| async move { app.get(&path, &org.owner_token).await.expect(200).json() };
    let organization = get(org.path("")).await;
    let roles = get(org.path("/roles")).await;
    let members = get(org.path("/members?limit=200")).await;
    let audit = app.audit(org).await;
    (organization, roles, members, audit)
}

/// Sends every route of `routes` with `token` and asserts 404 NOT_FOUND.
async fn assert_all_not_found(
    app: &TestApp,
    token: &str,
    routes: Vec<(Method, String, Option<Value>)>,
    who: &str,
) {
    for (method, path, body) in routes {
        let reply = app
            .call(method.clone(), &path, Some(token), body.clone())
            .await;
        assert_eq!(
            reply.status,
            404,
            "{who}: {method} {path} answered {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        reply.problem(404, "NOT_FOUND");
    }
}

#[actix_web::test]
async fn every_route_of_another_org_is_not_found_even_for_an_owner() {
    let app = spawn_app().await;
    let a = app.org("enterprise").await;
    let (_, a_member_token) = app.member(&a, &a.member_role).await;
    let b = target(&app).await;
    let before = snapshot(&app, &b.org).await;
    assert_eq!(before.3.len(), 3, "B's audit: role created, member added");

    let table = routes(&b.org.id, &b);
    assert_eq!(table.len(), 15);
    assert_all_not_found(&app, &a.owner_token, table.clone(), "owner of A").await;
    assert_all_not_found(&app, &a_member_token, table, "member of A").await;

    // B is unchanged: organization, roles, members and audit log.
    let after = snapshot(&app, &b.org).await;
    assert_eq!(after.0, before.0, "organization");
    assert_eq!(after.1, before.1, "roles");
    assert_eq!(after.2, before.2, "members");
    assert_eq!(after.3.len(), before.3.len(), "audit log count");
    assert_eq!(after.3, before.3, "audit log");
    // And the same table works for B's owner (so the 404s are not an artefact).
    let own = app
        .get(
            &b.org.path(&format!("/roles/{}", b.role)),
            &b.org.owner_token,
        )
        .await
        .expect(200)
        .json();
    assert_eq!(own["name"], json!("Secret Role"));
    // A's view of itself is untouched too.
    let me = app.get("/me", &a.owner_token).await.expect(200).json();
    assert_eq!(
        me["memberships"],
        json!([{"organization_id": a.id, "role_id": a.owner_role, "role_name": "Owner"}])
    );
}

#[actix_web::test]
async fn the_table_succeeds_for_the_org_s_own_owner() {
    // Proves the requests of the isolation table are valid: B's own owner gets
    // the success statuses, so a leak would show as a success, not a 4xx.
    let app = spawn_app().await;
    let b = target(&app).await;
    let expected = [
        200, 200, 200, 201, 200, 200, 200, 200, 200, 201, 200, 200, 204, 204, 200,
    ];
    let table = routes(&b.org.id, &b);
    assert_eq!(table.len(), expected.len());
    for ((method, path, body), status) in table.into_iter().zip(expected) {
        let reply = app
            .call(method.clone(), &path, Some(&b.org.owner_token), body)
            .await;
        assert_eq!(
            reply.status,
            status,
            "{method} {path}: {}",
            String::from_utf8_lossy(&reply.body)
        );
    }
}

#[actix_web::test]
async fn a_user_with_no_membership_and_an_unknown_org_get_not_found() {
    let app = spawn_app().await;
    let a = app.org("enterprise").await;
    let b = target(&app).await;
    let before = snapshot(&app, &b.org).await;
    let (_, nobody_token) = app.user("nobody@example.test").await;
    let me = app.get("/me", &nobody_token).await.expect(200).json();
    assert_eq!(me["memberships"], json!([]));

    assert_all_not_found(&app, &nobody_token, routes(&b.org.id, &b), "non-member").await;

    // An organization id that names nothing, for members of other orgs and
    // for users with no membership at all.
    let ghost = unknown_id();
    for (token, who) in [
        (&a.owner_token, "owner of A"),
        (&b.org.owner_token, "owner of B"),
        (&nobody_token, "non-member"),
    ] {
        assert_all_not_found(&app, token, routes(&ghost, &b), who).await;
    }
    let after = snapshot(&app, &b.org).await;
    assert_eq!(after, before, "B unchanged");
}

#[actix_web::test]
async fn ids_of_one_org_are_not_found_under_another() {
    let app = spawn_app().await;
    let a = app.org("enterprise").await;
    let a_role = app.role(&a, "Only In A", &["org:decisions:read"]).await;
    let (a_member, _) = app.member(&a, &a_role).await;
    let b = app.org("enterprise").await;
    let a_before = snapshot(&app, &a).await;
    let b_before = snapshot(&app, &b).await;

    // A's roles (custom, Owner, Member) under B's path, as B's owner.
    for role in [&a_role, &a.owner_role, &a.member_role] {
        let path = b.path(&format!("/roles/{role}"));
        let requests: Vec<(Method, String, Option<Value>)> = vec![
            (Method::GET, path.clone(), None),
            (
                Method::PATCH,
                path.clone(),
                Some(json!({"name": "Renamed from B"})),
            ),
            (Method::DELETE, path.clone(), None),
            (Method::GET, format!("{path}/members"), None),
        ];
        assert_all_not_found(&app, &b.owner_token, requests, "owner of B, A's role").await;
    }
    // A's member (and A's owner) under B's members path.
    for user in [&a_member, &a.owner_id] {
        let path = b.path(&format!("/members/{user}"));
        let requests = vec![
            (Method::GET, path.clone(), None),
            (
                Method::PATCH,
                path.clone(),
                Some(json!({"role_id": b.member_role})),
            ),
            (Method::DELETE, path.clone(), None),
        ];
        assert_all_not_found(&app, &b.owner_token, requests, "owner of B, A's member").await;
    }

    assert_eq!(snapshot(&app, &a).await, a_before, "A unchanged");
    assert_eq!(snapshot(&app, &b).await, b_before, "B unchanged");
}

#[actix_web::test]
async fn roles_of_one_org_cannot_be_used_in_another() {
    let app = spawn_app().await;
    let a = app.org("enterprise").await;
    let a_role = app.role(&a, "Only In A", &["org:decisions:read"]).await;
    let b = app.org("enterprise").await;
    let (b_member, _) = app.member(&b, &b.member_role).await;
    let (candidate, _) = app.user("candidate@example.test").await;
    let a_before = snapshot(&app, &a).await;
    let b_before = snapshot(&app, &b).await;

    for role in [&a_role, &a.owner_role, &a.member_role] {
        // Invite into B with A's role.
        app.post(
            &b.path("/members"),
            &b.owner_token,
            json!({"user_id": candidate, "role_id": role}),
        )
        .await
        .problem(422, "UNKNOWN_ROLE");
        app.post(
            &b.path("/members"),
            &b.owner_token,
            json!({"email": "candidate@example.test", "role_id": role}),
        )
        .await
        .problem(422, "UNKNOWN_ROLE");
        // Change a B member's role to A's role.
        app.patch(
            &b.path(&format!("/members/{b_member}")),
            &b.owner_token,
            json!({"role_id": role}),
        )
        .await
        .problem(422, "UNKNOWN_ROLE");
        // Create a role in B copying A's role.
        app.post(
            &b.path("/roles"),
            &b.owner_token,
            json!({"name": "Copycat", "copy_permissions_from": role}),
        )
        .await
        .problem(422, "UNKNOWN_ROLE");
    }

    assert_eq!(snapshot(&app, &a).await, a_before, "A unchanged");
    assert_eq!(snapshot(&app, &b).await, b_before, "B unchanged");

    // The same requests with B's own roles succeed (the bodies are valid).
    app.post(
        &b.path("/members"),
        &b.owner_token,
        json!({"user_id": candidate, "role_id": b.member_role}),
    )
    .await
    .expect(201);
    let copy = app
        .post(
            &b.path("/roles"),
            &b.owner_token,
            json!({"name": "Copycat", "copy_permissions_from": b.member_role}),
        )
        .await
        .expect(201)
        .json();
    let copy_id = copy["id"].as_str().expect("id").to_owned();
    app.patch(
        &b.path(&format!("/members/{b_member}")),
        &b.owner_token,
        json!({"role_id": copy_id}),
    )
    .await
    .expect(200);
}
