//! Effective permissions and the batch check (issue 18): what a member may
//! do, answered from the snapshot that enforcement uses, so that every
//! `true` of a check is allowed on the real route and every `false` is 403.

use rolecall::domain::permissions::Permission;
use rolecall::http::route_table::{RouteSpec, ORGANIZATION_ROUTES, WORKSPACE_ROUTES};
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Org, Reply, TestApp};

/// Every key of the catalog, sorted.
fn all_keys() -> Vec<&'static str> {
    let mut keys: Vec<&str> = Permission::ALL.iter().map(|p| p.key()).collect();
    keys.sort_unstable();
    keys
}

fn keys_of(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[actix_web::test]
async fn effective_permissions_of_the_built_in_roles_and_a_custom_one() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let custom = app
        .role(&org, "Auditor", &["org:team:read", "org:settings:read"])
        .await;
    let (member_id, member_token) = app.member(&org, &org.member_role).await;
    let (auditor_id, auditor_token) = app.member(&org, &custom).await;

    let member_keys = app
        .get(
            &org.path(&format!("/roles/{}", org.member_role)),
            &org.owner_token,
        )
        .await
        .expect(200)
        .json()["permissions"]
        .clone();
    assert_eq!(keys_of(&member_keys).len(), 41);
    let cases = [
        (
            &org.owner_id,
            &org.owner_token,
            &org.owner_role,
            "Owner",
            json!(all_keys()),
        ),
        (
            &member_id,
            &member_token,
            &org.member_role,
            "Member",
            member_keys,
        ),
        (
            &auditor_id,
            &auditor_token,
            &custom,
            "Auditor",
            json!(["org:settings:read", "org:team:read"]),
        ),
    ];
    for (user, token, role, name, keys) in &cases {
        let expected = json!({
            "user_id": user, "role_id": role, "role_name": name,
            "permissions": keys, "role_expires_at": null,
        });
        // The owner reads anyone's; everyone reads their own, twice over.
        let by_owner = app
            .get(
                &org.path(&format!("/members/{user}/permissions")),
                &org.owner_token,
            )
            .await
            .expect(200)
            .json();
        assert_eq!(by_owner, expected, "{name} as read by the owner");
        let own = app
            .get(&org.path(&format!("/members/{user}/permissions")), token)
            .await
            .expect(200)
            .json();
        assert_eq!(own, expected, "{name} reading their own");
        let mine = app
            .get(&org.path("/permissions/mine"), token)
            .await
            .expect(200)
            .json();
        assert_eq!(mine, expected, "{name}: /permissions/mine");
    }
    assert_eq!(keys_of(&cases[0].4).len(), 52);

    // Another member's needs org:team:read: the Member role has it, an empty role not.
    let empty = app.role(&org, "Nobody", &[]).await;
    let (_, nobody_token) = app.member(&org, &empty).await;
    let reply = app
        .get(
            &org.path(&format!("/members/{member_id}/permissions")),
            &nobody_token,
        )
        .await;
    let problem = reply.problem(403, "FORBIDDEN");
    assert_eq!(problem["missing_permission"], json!("org:team:read"));
    let mine = app
        .get(&org.path("/permissions/mine"), &nobody_token)
        .await
        .expect(200)
        .json();
    assert_eq!(mine["permissions"], json!([]));
    app.get(
        &org.path(&format!("/members/{member_id}/permissions")),
        &auditor_token,
    )
    .await
    .expect(200);

    // Unknown members and foreign organizations are 404s.
    let (stranger_id, stranger_token) = app.user("stranger@example.test").await;
    app.get(
        &org.path(&format!("/members/{stranger_id}/permissions")),
        &org.owner_token,
    )
    .await
    .problem(404, "NOT_FOUND");
    app.get(
        &org.path("/members/not-a-uuid/permissions"),
        &org.owner_token,
    )
    .await
    .problem(404, "NOT_FOUND");
    app.get(&org.path("/permissions/mine"), &stranger_token)
        .await
        .problem(404, "NOT_FOUND");
    app.get(&org.path("/permissions/mine"), "not-a-token")
        .await
        .problem(401, "UNAUTHENTICATED");

    // A role change shows on the very next read.
    app.patch(
        &org.path(&format!("/members/{member_id}")),
        &org.owner_token,
        json!({"role_id": custom}),
    )
    .await
    .expect(200);
    let mine = app
        .get(&org.path("/permissions/mine"), &member_token)
        .await
        .expect(200)
        .json();
    assert_eq!(mine["role_name"], json!("Auditor"));
    assert_eq!(
        mine["permissions"],
        json!(["org:settings:read", "org:team:read"])
    );
}

/// Whether a check's answer `held` for `key` is what the real route did:
/// `true` must be the route's success status, `false` its 403 naming `key`.
/// Answers whether the call was allowed.
fn agrees(
    who: &str,
    route: &str,
    key: &str,
    held: Option<bool>,
    reply: &Reply,
    success: u16,
) -> bool {
    match held {
        Some(true) => {
            assert_eq!(
                reply.status,
                success,
                "{who} holds {key}: {route}: {}",
                String::from_utf8_lossy(&reply.body)
            );
            true
        }
        Some(false) => {
            let problem = reply.problem(403, "FORBIDDEN");
            assert_eq!(
                problem["missing_permission"],
                json!(key),
                "{who} on {route}"
            );
            false
        }
        None => panic!("{who}: no result for {key}"),
    }
}

/// A route of the table that one key guards and that can be called without
/// fixtures: its path names only the organization (and not the webhook,
/// which answers 404 before 403 while there is none).
struct Probe {
    route: RouteSpec,
    key: Permission,
    body: Option<Value>,
}

fn probes() -> Vec<Probe> {
    let body = |path: &str| -> Option<Option<Value>> {
        match path {
            "/organizations/{org_id}/decisions" => Some(Some(json!({"title": "Checked"}))),
            "/organizations/{org_id}/tasks" => Some(Some(json!({"title": "Checked"}))),
            "/organizations/{org_id}/memories" => Some(Some(json!({"content": "checked"}))),
            "/organizations/{org_id}/capsules" => Some(Some(json!({"title": "Checked"}))),
            "/organizations/{org_id}/projects" => Some(Some(json!({"name": "Checked"}))),
            _ => None,
        }
    };
    ORGANIZATION_ROUTES
        .iter()
        .chain(WORKSPACE_ROUTES)
        .filter(|r| r.requires.len() == 1 && !r.or_self)
        .filter(|r| !r.path["/organizations/{org_id}".len()..].contains('{'))
        .filter(|r| !r.path.ends_with("/webhook"))
        .filter_map(|r| {
            let body = match r.method {
                "GET" => None,
                "POST" => body(r.path)?,
                _ => return None,
            };
            Some(Probe {
                route: *r,
                key: r.requires[0],
                body,
            })
        })
        .collect()
}

/// POST …/permissions/check with `body` as `token`: the 200's body.
async fn checked(app: &TestApp, org: &Org, token: &str, body: Value) -> Value {
    app.post(&org.path("/permissions/check"), token, body)
        .await
        .expect(200)
        .json()
}

async fn call(app: &TestApp, org: &Org, probe: &Probe, token: &str) -> crate::helpers::Reply {
    let path = probe.route.path.replace("{org_id}", &org.id);
    match &probe.body {
        Some(body) => app.post(&path, token, body.clone()).await,
        None => app.get(&path, token).await,
    }
}

#[actix_web::test]
async fn a_batch_check_agrees_with_enforcement_on_the_real_routes() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let probes = probes();
    assert!(probes.len() >= 12, "{} probes", probes.len());
    let keys: Vec<&str> = probes.iter().map(|p| p.key.key()).collect();

    let reader = app
        .role(
            &org,
            "Reader",
            &[
                "org:decisions:read",
                "org:tasks:read",
                "org:team:read",
                "org:memories:create",
            ],
        )
        .await;
    let empty = app.role(&org, "Nobody", &[]).await;
    let mut users = vec![(
        "Owner".to_owned(),
        org.owner_id.clone(),
        org.owner_token.clone(),
    )];
    for (name, role) in [
        ("Member", &org.member_role),
        ("Reader", &reader),
        ("Nobody", &empty),
    ] {
        let (id, token) = app.member(&org, role).await;
        users.push((name.to_owned(), id, token));
    }

    let mut allowed = 0;
    let mut refused = 0;
    for (name, user_id, token) in &users {
        // Checked by the user themself, and by the owner on their behalf: the same answer.
        let own = checked(&app, &org, token, json!({"permissions": keys})).await;
        let by_owner = checked(
            &app,
            &org,
            &org.owner_token,
            json!({"user_id": user_id, "permissions": keys}),
        )
        .await;
        assert_eq!(own, by_owner, "{name}");
        for probe in &probes {
            let key = probe.key.key();
            let held = own["results"][key].as_bool();
            let reply = call(&app, &org, probe, token).await;
            let route = format!("{} {}", probe.route.method, probe.route.path);
            let success = if probe.body.is_some() { 201 } else { 200 };
            if agrees(name, &route, key, held, &reply, success) {
                allowed += 1;
            } else {
                refused += 1;
            }
        }
    }
    assert!(
        allowed > 0 && refused > 0,
        "{allowed} allowed, {refused} refused"
    );
}

/// Every workspace route one key guards (deletes, manages and moves
/// included), each called on a fresh resource of its own: a user's check
/// says `true` exactly where the route lets them through.
#[actix_web::test]
async fn a_batch_check_agrees_with_enforcement_on_every_workspace_route() {
    use crate::resources_access::{concrete, fixture, method, recipes};
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let routes: Vec<_> = recipes()
        .into_iter()
        .filter(|(route, _)| route.requires.len() == 1)
        .collect();
    assert!(routes.len() >= 30, "{} routes", routes.len());
    let keys: Vec<&str> = routes.iter().map(|(r, _)| r.requires[0].key()).collect();
    let deleter = app
        .role(
            &org,
            "Deleter",
            &[
                "org:projects:delete",
                "org:tasks:delete",
                "org:decisions:read",
                "org:capsules:freeze",
            ],
        )
        .await;
    let mut users = Vec::new();
    for (name, role) in [("Member", &org.member_role), ("Deleter", &deleter)] {
        let (_, token) = app.member(&org, role).await;
        users.push((name, token));
    }
    let (mut allowed, mut refused) = (0, 0);
    for (name, token) in &users {
        let verdicts = checked(&app, &org, token, json!({"permissions": keys})).await;
        for (route, recipe) in &routes {
            let key = route.requires[0].key();
            let id = fixture(&app, &org, recipe.needs).await.map(|(id, _)| id);
            let path = concrete(route, &org.id, id.as_deref());
            let reply = app
                .raw(crate::helpers::Req::json(
                    method(route),
                    &path,
                    Some(token),
                    recipe.body.clone(),
                ))
                .await;
            let route = format!("{} {}", route.method, route.path);
            let held = verdicts["results"][key].as_bool();
            if agrees(name, &route, key, held, &reply, recipe.status) {
                allowed += 1;
            } else {
                refused += 1;
            }
        }
    }
    assert!(
        allowed >= 30 && refused >= 30,
        "{allowed} allowed, {refused} refused"
    );
}

#[actix_web::test]
async fn a_batch_check_validates_and_guards_other_members() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let empty = app.role(&org, "Nobody", &[]).await;
    let (nobody_id, nobody_token) = app.member(&org, &empty).await;
    let (member_id, member_token) = app.member(&org, &org.member_role).await;
    let check = org.path("/permissions/check");

    // Yourself: membership is enough, even with no keys at all.
    let own = app
        .post(
            &check,
            &nobody_token,
            json!({"permissions": ["org:team:read", "org:team:read"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(own, json!({"results": {"org:team:read": false}}));
    let own = app
        .post(
            &check,
            &nobody_token,
            json!({"user_id": nobody_id, "permissions": ["org:projects:read"]}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(own, json!({"results": {"org:projects:read": false}}));

    // Someone else: org:team:read, checked before whether they are a member.
    let (stranger_id, _) = app.user("stranger@example.test").await;
    for target in [&member_id, &stranger_id] {
        let problem = app
            .post(
                &check,
                &nobody_token,
                json!({"user_id": target, "permissions": ["org:team:read"]}),
            )
            .await
            .problem(403, "FORBIDDEN");
        assert_eq!(problem["missing_permission"], json!("org:team:read"));
    }
    let other = app
        .post(&check, &member_token, json!({"user_id": org.owner_id, "permissions": ["org:billing:manage", "org:tasks:read"]}))
        .await
        .expect(200)
        .json();
    assert_eq!(
        other,
        json!({"results": {"org:billing:manage": true, "org:tasks:read": true}})
    );
    app.post(
        &check,
        &member_token,
        json!({"user_id": stranger_id, "permissions": ["org:team:read"]}),
    )
    .await
    .problem(404, "NOT_FOUND");

    // Bad input: 400 and the field, or the unknown keys.
    let unknown = app
        .post(
            &check,
            &member_token,
            json!({"permissions": ["org:team:read", "org:moon:land"]}),
        )
        .await
        .problem(400, "UNKNOWN_PERMISSION");
    assert_eq!(unknown["unknown"], json!(["org:moon:land"]));
    let too_many: Vec<&str> = std::iter::repeat_n("org:team:read", 101).collect();
    for (body, field) in [
        (json!({"permissions": []}), "permissions"),
        (json!({"permissions": too_many}), "permissions"),
        (json!({}), "permissions"),
        (json!({"permissions": "org:team:read"}), "permissions"),
        (
            json!({"user_id": "nope", "permissions": ["org:team:read"]}),
            "user_id",
        ),
        (
            json!({"user_id": null, "permissions": ["org:team:read"]}),
            "user_id",
        ),
        (
            json!({"permissions": ["org:team:read"], "extra": 1}),
            "extra",
        ),
    ] {
        let problem = app
            .post(&check, &member_token, body.clone())
            .await
            .problem(400, "VALIDATION_FAILED");
        assert_eq!(problem["field"], json!(field), "{body}");
    }
    let at_limit: Vec<&str> = std::iter::repeat_n("org:team:read", 100).collect();
    app.post(&check, &member_token, json!({"permissions": at_limit}))
        .await
        .expect(200);
}
