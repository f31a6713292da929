//! Workspace resources (CONTRACT §7): who may call which route.
//!
//! The permission matrix is generated from the server's own route table
//! (`rolecall::http::route_table::WORKSPACE_ROUTES`): every route gets a
//! request builder here, and a route the builders do not know fails the
//! test, so a new route cannot be forgotten. Also: the table matches the
//! OpenAPI document, the decided order of checks, and organization
//! isolation (another org's ids, references and non-members all get 404/422).

use std::collections::{BTreeMap, BTreeSet};

use actix_web::http::Method;
use rolecall::domain::permissions::Permission;
use rolecall::domain::resources::decisions::DECISION_MOVES;
use rolecall::http::route_table::{
    RouteSpec, DECISIONS_STATUS, ORGANIZATION_ROUTES, WORKSPACE_ROUTES as ROUTES,
};
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Org, Reply, TestApp};

/// The prefix every workspace route has.
const ORG_PREFIX: &str = "/organizations/{org_id}";

/// Top-level segments under an organization that belong to CONTRACT §0–6
/// (roles, members, permissions, audit log, webhook), not to the workspace
/// resources.
const NON_RESOURCE_SEGMENTS: &[&str] = &["roles", "members", "permissions", "audit-log", "webhook"];

const HTTP_METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The five decision statuses.
const DECISION_STATUSES: &[&str] = &["DRAFT", "PENDING", "ACCEPTED", "REJECTED", "DEPRECATED"];

/// What a route's `{id}` must name (created beforehand by the owner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Needs {
    Nothing,
    Decision,
    Task,
    Memory,
    Capsule,
    Project,
    Import,
    Analysis,
}

/// How to call one route successfully.
pub(crate) struct Recipe {
    pub(crate) needs: Needs,
    pub(crate) body: Option<Value>,
    /// The success status.
    pub(crate) status: u16,
}

/// The request builder of a route of the table, keyed by (method, path);
/// `None` for a route this test does not know.
fn recipe(route: &RouteSpec) -> Option<Recipe> {
    use Needs::*;
    let r = |needs, body: Option<Value>, status| {
        Some(Recipe {
            needs,
            body,
            status,
        })
    };
    let suffix = route.path.strip_prefix(ORG_PREFIX)?;
    match (route.method, suffix) {
        ("POST", "/decisions") => r(Nothing, Some(json!({"title": "Matrix decision"})), 201),
        ("GET", "/decisions") => r(Nothing, None, 200),
        ("GET", "/decisions/{id}") => r(Decision, None, 200),
        ("PATCH", "/decisions/{id}") => r(Decision, Some(json!({"title": "Renamed"})), 200),
        ("DELETE", "/decisions/{id}") => r(Decision, None, 204),
        // The fixture decision is DRAFT: DRAFT → PENDING.
        ("POST", "/decisions/{id}/status") => r(Decision, Some(json!({"status": "PENDING"})), 200),
        ("POST", "/tasks") => r(Nothing, Some(json!({"title": "Matrix task"})), 201),
        ("GET", "/tasks") => r(Nothing, None, 200),
        ("GET", "/tasks/{id}") => r(Task, None, 200),
        ("PATCH", "/tasks/{id}") => r(Task, Some(json!({"status": "in-progress"})), 200),
        ("DELETE", "/tasks/{id}") => r(Task, None, 204),
        ("POST", "/memories") => r(Nothing, Some(json!({"content": "remember this"})), 201),
        ("GET", "/memories") => r(Nothing, None, 200),
        ("GET", "/memories/{id}") => r(Memory, None, 200),
        ("PATCH", "/memories/{id}") => r(Memory, Some(json!({"content": "changed"})), 200),
        ("DELETE", "/memories/{id}") => r(Memory, None, 204),
        ("POST", "/capsules") => r(Nothing, Some(json!({"title": "Matrix capsule"})), 201),
        ("GET", "/capsules") => r(Nothing, None, 200),
        ("GET", "/capsules/{id}") => r(Capsule, None, 200),
        ("PATCH", "/capsules/{id}") => r(Capsule, Some(json!({"body": "new body"})), 200),
        ("POST", "/capsules/{id}/freeze") => r(Capsule, None, 200),
        ("POST", "/capsules/{id}/supersede") => {
            r(Capsule, Some(json!({"body": "the successor"})), 201)
        }
        ("DELETE", "/capsules/{id}") => r(Capsule, None, 204),
        ("POST", "/projects") => r(Nothing, Some(json!({"name": "Matrix project"})), 201),
        ("GET", "/projects") => r(Nothing, None, 200),
        ("GET", "/projects/{id}") => r(Project, None, 200),
        ("PATCH", "/projects/{id}") => r(Project, Some(json!({"name": "Renamed"})), 200),
        ("DELETE", "/projects/{id}") => r(Project, None, 204),
        ("POST", "/projects/{id}/imports") => r(
            Project,
            Some(json!({"source": "https://example.test/repo.git"})),
            202,
        ),
        ("GET", "/projects/{id}/imports") => r(Project, None, 200),
        ("GET", "/imports/{id}") => r(Import, None, 200),
        ("POST", "/imports/{id}/cancel") => r(Import, None, 200),
        ("POST", "/imports/{id}/result") => r(Import, Some(json!({"status": "completed"})), 200),
        ("POST", "/pull-requests/analyses") => r(
            Nothing,
            Some(json!({"repository": "acme/app", "number": 1, "findings": []})),
            201,
        ),
        ("GET", "/pull-requests/analyses") => r(Nothing, None, 200),
        ("GET", "/pull-requests/analyses/{id}") => r(Analysis, None, 200),
        ("POST", "/pull-requests/analyses/{id}/accept") => r(Analysis, None, 200),
        _ => None,
    }
}

/// `METHOD path` of a route, for messages.
fn name(route: &RouteSpec) -> String {
    format!("{} {}", route.method, route.path)
}

pub(crate) fn method(route: &RouteSpec) -> Method {
    Method::from_bytes(route.method.as_bytes()).expect("a valid method")
}

/// Every route's builder, or a failure naming the routes nobody knows.
pub(crate) fn recipes() -> Vec<(RouteSpec, Recipe)> {
    let unknown: Vec<String> = ROUTES
        .iter()
        .filter(|route| recipe(route).is_none())
        .map(name)
        .collect();
    assert!(
        unknown.is_empty(),
        "routes of the table without a request builder in this test: {unknown:?}"
    );
    ROUTES
        .iter()
        .map(|route| (*route, recipe(route).expect("checked above")))
        .collect()
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

/// A decision in `status`, created (and moved) by the owner.
async fn decision_in(app: &TestApp, org: &Org, status: &str) -> String {
    let initial = if status == "DRAFT" {
        "DRAFT"
    } else {
        "PENDING"
    };
    let id = create(
        app,
        org,
        "/decisions",
        json!({"title": format!("A {status} decision"), "status": initial}),
        201,
    )
    .await;
    if !matches!(status, "DRAFT" | "PENDING") {
        let moved = app
            .post(
                &org.path(&format!("/decisions/{id}/status")),
                &org.owner_token,
                json!({"status": status}),
            )
            .await
            .expect(200);
        assert_eq!(moved.json()["status"], json!(status));
    }
    id
}

/// Creates what `needs` names in `org`: (the id for `{id}`, the GET path of
/// the resource, relative to the org).
pub(crate) async fn fixture(app: &TestApp, org: &Org, needs: Needs) -> Option<(String, String)> {
    let (id, get) = match needs {
        Needs::Nothing => return None,
        Needs::Decision => {
            let id = decision_in(app, org, "DRAFT").await;
            (id.clone(), format!("/decisions/{id}"))
        }
        Needs::Task => {
            let id = create(app, org, "/tasks", json!({"title": "Fixture task"}), 201).await;
            (id.clone(), format!("/tasks/{id}"))
        }
        Needs::Memory => {
            let body = json!({"content": "fixture memory", "metadata": {"k": 1}});
            let id = create(app, org, "/memories", body, 201).await;
            (id.clone(), format!("/memories/{id}"))
        }
        Needs::Capsule => {
            let body = json!({"title": "Fixture capsule", "body": "text", "scope": "all"});
            let id = create(app, org, "/capsules", body, 201).await;
            (id.clone(), format!("/capsules/{id}"))
        }
        Needs::Project => {
            let body = json!({"name": "Fixture project"});
            let id = create(app, org, "/projects", body, 201).await;
            (id.clone(), format!("/projects/{id}"))
        }
        Needs::Import => {
            let project = create(app, org, "/projects", json!({"name": "Imported"}), 201).await;
            let body = json!({"source": "https://example.test/fixture.git"});
            let id = create(app, org, &format!("/projects/{project}/imports"), body, 202).await;
            (id.clone(), format!("/imports/{id}"))
        }
        Needs::Analysis => {
            let body = json!({"repository": "acme/app", "number": 42, "findings": []});
            let id = create(app, org, "/pull-requests/analyses", body, 201).await;
            (id.clone(), format!("/pull-requests/analyses/{id}"))
        }
    };
    Some((id, get))
}

/// The route's path in `org_id` with `{id}` = `id`.
pub(crate) fn concrete(route: &RouteSpec, org_id: &str, id: Option<&str>) -> String {
    let path = route.path.replace("{org_id}", org_id);
    match id {
        Some(id) => path.replace("{id}", id),
        None => path,
    }
}

/// The key the DRAFT → PENDING move needs.
fn draft_to_pending_key() -> &'static str {
    DECISION_MOVES
        .iter()
        .find(|(from, to, _)| (*from, *to) == ("DRAFT", "PENDING"))
        .map(|(_, _, key)| key.key())
        .expect("DRAFT → PENDING is a move")
}

/// Every key a route of the table or a decision move needs.
fn needed_keys() -> BTreeSet<&'static str> {
    ROUTES
        .iter()
        .flat_map(|route| route.requires.iter().map(|p| p.key()))
        .chain(DECISION_MOVES.iter().map(|(_, _, p)| p.key()))
        .collect()
}

/// Members of one organization with precisely chosen custom roles.
struct Cast {
    org: Org,
    /// Holds all 52 keys.
    full: String,
    /// Holds no key at all.
    empty: String,
    /// For each needed key: a member holding every key but that one.
    without: BTreeMap<&'static str, String>,
}

impl Cast {
    fn without(&self, key: &str) -> &str {
        self.without
            .get(key)
            .unwrap_or_else(|| panic!("no member lacking {key}"))
    }
}

/// An Enterprise org's Owner creates the custom roles (custom roles need
/// Enterprise) and adds one member per role; then the org is downgraded to
/// free, so every call below runs on a free organization.
async fn cast(app: &TestApp) -> Cast {
    let org = app.org("enterprise").await;
    let all: Vec<&str> = Permission::ALL.iter().map(|p| p.key()).collect();
    assert_eq!(all.len(), 52, "the catalog has 52 keys");
    let full_role = app.role(&org, "All keys", &all).await;
    let (_, full) = app.member(&org, &full_role).await;
    let empty_role = app.role(&org, "No keys", &[]).await;
    let (_, empty) = app.member(&org, &empty_role).await;
    let mut without = BTreeMap::new();
    for key in needed_keys() {
        let keys: Vec<&str> = all.iter().copied().filter(|k| *k != key).collect();
        assert_eq!(keys.len(), 51, "{key} is in the catalog");
        let role = app.role(&org, &format!("Without {key}"), &keys).await;
        let (_, token) = app.member(&org, &role).await;
        without.insert(key, token);
    }
    app.patch(
        &format!("/admin/organizations/{}", org.id),
        &app.admin,
        json!({"plan": "free"}),
    )
    .await
    .expect(200);
    let now = app.get(&org.path(""), &org.owner_token).await.expect(200);
    assert_eq!(now.json()["plan"], json!("free"), "the org was downgraded");
    Cast {
        org,
        full,
        empty,
        without,
    }
}

/// Asserts a problem+json `status` `code`, naming `what` on failure; its body.
#[track_caller]
fn problem(reply: &Reply, status: u16, code: &str, what: &str) -> Value {
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (status, json!(code)),
        "{what}: expected {status} {code}; body: {}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.problem(status, code)
}

/// Asserts a 403 FORBIDDEN naming `key`.
#[track_caller]
fn assert_forbidden(reply: &Reply, key: &str, what: &str) {
    assert_eq!(
        (reply.status, reply.json()["code"].clone()),
        (403, json!("FORBIDDEN")),
        "{what}: expected 403 FORBIDDEN; body: {}",
        String::from_utf8_lossy(&reply.body)
    );
    let body = reply.problem(403, "FORBIDDEN");
    assert_eq!(
        body["missing_permission"],
        json!(key),
        "{what}: missing_permission"
    );
}

/// Asserts the success status (and a JSON body unless 204).
#[track_caller]
fn assert_success(reply: &Reply, status: u16, what: &str) {
    assert_eq!(
        reply.status,
        status,
        "{what}: expected {status}; body: {}",
        String::from_utf8_lossy(&reply.body)
    );
    if status == 204 {
        assert!(reply.body.is_empty(), "{what}: 204 with a body");
    } else {
        assert!(
            reply.header("content-type").starts_with("application/json"),
            "{what}: content type {}",
            reply.header("content-type")
        );
        assert!(reply.json().is_object(), "{what}: body is not an object");
    }
}

#[actix_web::test]
async fn every_route_of_the_table_has_a_request_builder_and_a_key() {
    let all = recipes();
    assert!(!all.is_empty(), "the route table is empty");
    let mut seen = BTreeSet::new();
    for (route, _) in &all {
        assert!(
            seen.insert((route.method, route.path)),
            "{} is twice in the table",
            name(route)
        );
        // Only the decision status route leaves its key to the request.
        if route.requires.is_empty() {
            assert_eq!(
                (route.method, route.path),
                (DECISIONS_STATUS.method, DECISIONS_STATUS.path),
                "{} requires no key",
                name(route)
            );
        }
    }
    assert!(!DECISION_MOVES.is_empty(), "no decision moves");
}

#[actix_web::test]
async fn the_route_table_is_every_documented_resource_route() {
    let app = spawn_app().await;
    let doc = app
        .call(Method::GET, "/openapi.json", None, None)
        .await
        .expect(200)
        .json();
    let paths = doc["paths"].as_object().expect("paths");
    let mut documented = BTreeSet::new();
    for (path, item) in paths {
        let Some(rest) = path.strip_prefix("/organizations/{org_id}/") else {
            continue;
        };
        let first = rest.split('/').next().unwrap_or("");
        if NON_RESOURCE_SEGMENTS.contains(&first) {
            continue;
        }
        for method in HTTP_METHODS {
            if item.get(*method).is_some() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let table: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.method.to_owned(), r.path.to_owned()))
        .collect();
    assert_eq!(table.len(), ROUTES.len(), "the table has duplicates");
    let undocumented: Vec<_> = table.difference(&documented).collect();
    let missing: Vec<_> = documented.difference(&table).collect();
    assert!(
        undocumented.is_empty() && missing.is_empty(),
        "table routes not in /openapi.json: {undocumented:?}; documented resource routes not in the table: {missing:?}"
    );
}

/// Every documented route under `/organizations/{org_id}` is in one part of
/// the route table, the one place that says what each needs, and the table
/// names no route that is not served.
#[actix_web::test]
async fn every_organization_route_is_in_the_route_table() {
    let app = spawn_app().await;
    let doc = app
        .call(Method::GET, "/openapi.json", None, None)
        .await
        .expect(200)
        .json();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        if !path.starts_with("/organizations/{org_id}") {
            continue;
        }
        for method in HTTP_METHODS {
            if item.get(*method).is_some() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let table: BTreeSet<(String, String)> = ORGANIZATION_ROUTES
        .iter()
        .chain(ROUTES)
        .map(|r| (r.method.to_owned(), r.path.to_owned()))
        .collect();
    assert_eq!(
        table.len(),
        ORGANIZATION_ROUTES.len() + ROUTES.len(),
        "the table has duplicates"
    );
    assert_eq!(table, documented);
    // The keys the contract names for the non-resource routes (CONTRACT §2–6).
    let keys = |method: &str, path: &str| {
        let route = ORGANIZATION_ROUTES
            .iter()
            .find(|r| r.method == method && r.path == format!("/organizations/{{org_id}}{path}"))
            .unwrap_or_else(|| panic!("{method} {path} is not in the table"));
        (
            route.requires.iter().map(|p| p.key()).collect::<Vec<_>>(),
            route.or_self,
        )
    };
    assert_eq!(keys("POST", "/roles"), (vec!["org:settings:manage"], false));
    assert_eq!(keys("GET", "/roles"), (vec![], false));
    assert_eq!(
        keys("GET", "/members/{user_id}"),
        (vec!["org:team:read"], true)
    );
    assert_eq!(
        keys("DELETE", "/members/{user_id}"),
        (vec!["org:team:manage"], true)
    );
    assert_eq!(
        keys("PATCH", "/members/{user_id}"),
        (vec!["org:team:manage"], false)
    );
    assert_eq!(keys("POST", "/members"), (vec!["org:team:invite"], false));
    assert_eq!(
        keys("GET", "/audit-log"),
        (vec!["org:settings:read"], false)
    );
    assert_eq!(keys("GET", "/webhook"), (vec!["org:settings:read"], false));
    assert_eq!(
        keys("POST", "/webhook/rotate"),
        (vec!["org:settings:manage"], false)
    );
}

#[actix_web::test]
async fn permission_matrix_from_the_route_table() {
    let all = recipes();
    let app = spawn_app().await;
    let cast = cast(&app).await;
    let org = &cast.org;
    let free = app.org("free").await;
    for (route, recipe) in &all {
        if route.requires.is_empty() {
            // The decision status route: see DECISION_MOVES below.
            continue;
        }
        let what = name(route);
        // Denied for a member lacking exactly one required key, each in turn,
        // then allowed for a member holding every key: same fixture, since a
        // refused request changes nothing.
        let id = fixture(&app, org, recipe.needs).await.map(|(id, _)| id);
        let path = concrete(route, &org.id, id.as_deref());
        for key in route.requires.iter().map(|p| p.key()) {
            let reply = app
                .call(
                    method(route),
                    &path,
                    Some(cast.without(key)),
                    recipe.body.clone(),
                )
                .await;
            assert_forbidden(&reply, key, &format!("{what} without {key}"));
        }
        let reply = app
            .call(method(route), &path, Some(&cast.full), recipe.body.clone())
            .await;
        assert_success(&reply, recipe.status, &format!("{what} with all keys"));

        // Resources are not Enterprise-gated: a free org's Owner succeeds too.
        let id = fixture(&app, &free, recipe.needs).await.map(|(id, _)| id);
        let path = concrete(route, &free.id, id.as_deref());
        let reply = app
            .call(
                method(route),
                &path,
                Some(&free.owner_token),
                recipe.body.clone(),
            )
            .await;
        assert_success(&reply, recipe.status, &format!("{what} as a free Owner"));
    }

    // The status route's key depends on the move.
    for (from, to, key) in DECISION_MOVES {
        let key = key.key();
        let what = format!("decision status {from} → {to}");
        let id = decision_in(&app, org, from).await;
        let path = org.path(&format!("/decisions/{id}/status"));
        let body = json!({"status": to});
        let reply = app
            .call(
                Method::POST,
                &path,
                Some(cast.without(key)),
                Some(body.clone()),
            )
            .await;
        assert_forbidden(&reply, key, &format!("{what} without {key}"));
        let now = app
            .get(&org.path(&format!("/decisions/{id}")), &org.owner_token)
            .await;
        assert_eq!(
            now.expect(200).json()["status"],
            json!(from),
            "{what}: a refused move changed the status"
        );
        let reply = app
            .call(Method::POST, &path, Some(&cast.full), Some(body.clone()))
            .await;
        assert_success(&reply, 200, &format!("{what} with all keys"));
        assert_eq!(reply.json()["status"], json!(to), "{what}: new status");

        let id = decision_in(&app, &free, from).await;
        let path = free.path(&format!("/decisions/{id}/status"));
        let reply = app
            .call(Method::POST, &path, Some(&free.owner_token), Some(body))
            .await;
        assert_success(&reply, 200, &format!("{what} as a free Owner"));
        assert_eq!(reply.json()["status"], json!(to), "{what}: new status");
    }
}

/// An impossible move is 409 for a caller holding the key of a move to its
/// target (any move key for DRAFT, which no move reaches); a caller without
/// it gets 403 before the decision is read (CONTRACT §11), learning nothing
/// of its status.
#[actix_web::test]
async fn an_impossible_decision_move_is_409_for_a_caller_holding_the_moves_key() {
    let app = spawn_app().await;
    let cast = cast(&app).await;
    let org = &cast.org;
    let mut ids = BTreeMap::new();
    for status in DECISION_STATUSES {
        ids.insert(*status, decision_in(&app, org, status).await);
    }
    let allowed: BTreeSet<(&str, &str)> = DECISION_MOVES.iter().map(|(f, t, _)| (*f, *t)).collect();
    assert_eq!(allowed.len(), 5, "CONTRACT §7 lists five moves");
    for from in DECISION_STATUSES {
        for to in DECISION_STATUSES {
            if allowed.contains(&(*from, *to)) {
                continue;
            }
            let id = &ids[from];
            let path = org.path(&format!("/decisions/{id}/status"));
            let target_key = DECISION_MOVES
                .iter()
                .find(|(_, t, _)| t == to)
                .map_or("org:decisions:update", |(_, _, key)| key.key());
            let refused = app
                .call(
                    Method::POST,
                    &path,
                    Some(&cast.empty),
                    Some(json!({"status": to})),
                )
                .await;
            assert_forbidden(&refused, target_key, &format!("{from} → {to} without keys"));
            for (who, token) in [
                ("the move's key", cast.without("org:decisions:read")),
                ("all keys", cast.full.as_str()),
            ] {
                let reply = app
                    .call(
                        Method::POST,
                        &path,
                        Some(token),
                        Some(json!({"status": to})),
                    )
                    .await;
                assert_eq!(
                    (reply.status, reply.json()["code"].clone()),
                    (409, json!("INVALID_TRANSITION")),
                    "{from} → {to} by a member with {who}: {}",
                    String::from_utf8_lossy(&reply.body)
                );
                let body = reply.problem(409, "INVALID_TRANSITION");
                assert_eq!(
                    (body["from"].clone(), body["to"].clone()),
                    (json!(from), json!(to)),
                    "{from} → {to}: from/to members"
                );
            }
            let now = app
                .get(&org.path(&format!("/decisions/{id}")), &org.owner_token)
                .await
                .expect(200);
            assert_eq!(now.json()["status"], json!(from), "{from} → {to} moved it");
        }
    }
    // The body is parsed before the key is known: a malformed status is 400
    // even for a member holding no key at all.
    let path = org.path(&format!("/decisions/{}/status", ids["DRAFT"]));
    let reply = app
        .call(
            Method::POST,
            &path,
            Some(&cast.empty),
            Some(json!({"status": "FINISHED"})),
        )
        .await;
    let body = problem(
        &reply,
        400,
        "VALIDATION_FAILED",
        "status route, malformed status, no keys",
    );
    assert_eq!(body["field"], json!("status"), "status route: field");
}

/// (what, method, path in the org, token, body, status, code, field).
type OrderCase<'a> = (
    &'a str,
    Method,
    String,
    &'a str,
    Value,
    u16,
    &'a str,
    Option<&'a str>,
);

#[actix_web::test]
async fn check_order_on_every_route_401_404_403_404_400() {
    let all = recipes();
    let app = spawn_app().await;
    let cast = cast(&app).await;
    let org = &cast.org;
    let unknown_org = rolecall::ids::new_v7().to_string();
    for (route, recipe) in &all {
        let what = name(route);
        let id = fixture(&app, org, recipe.needs).await.map(|(id, _)| id);
        let path = concrete(route, &org.id, id.as_deref());
        let has_body = recipe.body.is_some();
        // A body that is never valid: an array.
        let bad_body = has_body.then(|| json!(["not", "an", "object"]));
        // The key a denied caller lacks (the status route: the DRAFT → PENDING key).
        let key = route
            .requires
            .first()
            .map(|p| p.key())
            .unwrap_or_else(|| draft_to_pending_key());

        // 401 before anything.
        let reply = app.call(method(route), &path, None, bad_body.clone()).await;
        problem(&reply, 401, "UNAUTHENTICATED", &what);
        assert_eq!(
            reply.header("www-authenticate"),
            "Bearer",
            "{what}: 401 header"
        );

        // 404 for an unknown organization, before the resource and the key.
        let elsewhere = concrete(route, &unknown_org, id.as_deref());
        let reply = app
            .call(
                method(route),
                &elsewhere,
                Some(cast.without(key)),
                bad_body.clone(),
            )
            .await;
        assert_eq!(reply.status, 404, "{what}: unknown org");
        problem(&reply, 404, "NOT_FOUND", &what);

        // An unknown resource: the route's key is checked before the store
        // is read (CONTRACT §11), so a member lacking it gets 403 whether
        // or not the id exists; one holding it gets 404, before 400. The
        // status route reads its body first (the move's key depends on it):
        // its bad body is 400 for all, and with a good one the same holds.
        if id.is_some() {
            let missing = rolecall::ids::new_v7().to_string();
            let gone = concrete(route, &org.id, Some(&missing));
            let status_route = route.requires.is_empty();
            let good_move = json!({"status": "PENDING"});
            for token in [cast.without(key), cast.empty.as_str(), cast.full.as_str()] {
                if status_route {
                    let reply = app
                        .call(method(route), &gone, Some(token), bad_body.clone())
                        .await;
                    problem(&reply, 400, "VALIDATION_FAILED", &what);
                }
                let body = if status_route {
                    Some(good_move.clone())
                } else {
                    bad_body.clone()
                };
                let reply = app.call(method(route), &gone, Some(token), body).await;
                let lacks_key = token != cast.full;
                let expected = if lacks_key { 403 } else { 404 };
                assert_eq!(
                    reply.status,
                    expected,
                    "{what}: unknown id; body: {}",
                    String::from_utf8_lossy(&reply.body)
                );
                if lacks_key {
                    problem(&reply, 403, "FORBIDDEN", &what);
                } else {
                    problem(&reply, 404, "NOT_FOUND", &what);
                }
            }
        }

        if route.requires.is_empty() {
            // Status route: the body comes first (the key depends on it).
            let reply = app
                .call(method(route), &path, Some(&cast.empty), bad_body.clone())
                .await;
            assert_eq!(reply.status, 400, "{what}: bad body without keys");
            problem(&reply, 400, "VALIDATION_FAILED", &what);
            continue;
        }

        // 403 before 400: a bad body from a member lacking the key.
        if has_body {
            let reply = app
                .call(
                    method(route),
                    &path,
                    Some(cast.without(key)),
                    bad_body.clone(),
                )
                .await;
            assert_forbidden(
                &reply,
                key,
                &format!("{what} with a bad body without {key}"),
            );
            let reply = app
                .call(method(route), &path, Some(&cast.full), bad_body.clone())
                .await;
            assert_eq!(reply.status, 400, "{what}: bad body with all keys");
            problem(&reply, 400, "VALIDATION_FAILED", &what);
        }
    }

    // 403 before 400 before 409/422, on bodies that are wrong in several ways.
    let other = app.org("free").await;
    let foreign = create(&app, &other, "/projects", json!({"name": "Theirs"}), 201).await;
    let unknown = rolecall::ids::new_v7().to_string();
    let task = create(&app, org, "/tasks", json!({"title": "Open"}), 201).await;
    let frozen = create(&app, org, "/capsules", json!({"title": "Frozen"}), 201).await;
    app.post(
        &org.path(&format!("/capsules/{frozen}/freeze")),
        &org.owner_token,
        json!({}),
    )
    .await
    .expect(200);
    let old = create(&app, org, "/capsules", json!({"title": "Old"}), 201).await;
    app.post(
        &org.path(&format!("/capsules/{old}/supersede")),
        &org.owner_token,
        json!({"body": "new"}),
    )
    .await
    .expect(201);
    let project = create(&app, org, "/projects", json!({"name": "P"}), 201).await;
    let source = json!({"source": "https://example.test/r.git"});
    let done = create(
        &app,
        org,
        &format!("/projects/{project}/imports"),
        source,
        202,
    )
    .await;
    app.post(
        &org.path(&format!("/imports/{done}/cancel")),
        &org.owner_token,
        json!({}),
    )
    .await
    .expect(200);
    let long_title = "x".repeat(201);
    let tasks_create = cast.without("org:tasks:create");
    let tasks_update = cast.without("org:tasks:update");
    let full = cast.full.as_str();
    #[rustfmt::skip]
    let cases: Vec<OrderCase> = vec![
        ("task: bad title and another org's project", Method::POST, "/tasks".into(), full,
            json!({"title": long_title, "project_id": foreign}), 400, "VALIDATION_FAILED", Some("title")),
        ("task: bad title and an unknown project", Method::POST, "/tasks".into(), full,
            json!({"title": "", "project_id": unknown}), 400, "VALIDATION_FAILED", Some("title")),
        ("task: another org's project without tasks:create", Method::POST, "/tasks".into(), tasks_create,
            json!({"title": "t", "project_id": foreign}), 403, "FORBIDDEN", None),
        ("task: bad title and a skipped move", Method::PATCH, format!("/tasks/{task}"), full,
            json!({"title": "", "status": "done"}), 400, "VALIDATION_FAILED", Some("title")),
        ("task: a skipped move without tasks:update", Method::PATCH, format!("/tasks/{task}"), tasks_update,
            json!({"status": "done"}), 403, "FORBIDDEN", None),
        ("capsule: bad title on a frozen capsule", Method::PATCH, format!("/capsules/{frozen}"), full,
            json!({"title": ""}), 400, "VALIDATION_FAILED", Some("title")),
        ("capsule: body over 64 KiB for a superseded capsule", Method::POST, format!("/capsules/{old}/supersede"), full,
            json!({"title": "t", "body": "x".repeat(64 * 1024 + 1)}), 400, "VALIDATION_FAILED", Some("body")),
        ("import: bad result for a finished import", Method::POST, format!("/imports/{done}/result"), full,
            json!({"status": "completed", "failure_reason": "r"}), 400, "VALIDATION_FAILED", Some("failure_reason")),
        ("analysis: number 0 and an unknown decision", Method::POST, "/pull-requests/analyses".into(), full,
            json!({"repository": "r", "number": 0, "findings": [{"decision_id": unknown, "summary": "s"}]}),
            400, "VALIDATION_FAILED", Some("number")),
    ];
    let mut failures = Vec::new();
    for (what, verb, suffix, token, body, status, code, field) in cases {
        let reply = app
            .call(verb, &org.path(&suffix), Some(token), Some(body))
            .await;
        let got = reply.json();
        let ok = reply.status == status
            && got["code"] == json!(code)
            && field.is_none_or(|f| got["field"] == json!(f));
        if !ok {
            failures.push(format!(
                "{what}: expected {status} {code} (field {field:?}); got {} {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "check order violated:\n{}",
        failures.join("\n")
    );
}

/// The org's collections, as the owner sees them (to prove nothing changed).
async fn collections(app: &TestApp, org: &Org) -> Vec<Value> {
    let mut all = Vec::new();
    for suffix in [
        "/decisions",
        "/tasks",
        "/memories",
        "/capsules",
        "/projects",
        "/pull-requests/analyses",
    ] {
        let reply = app
            .get(&org.path(&format!("{suffix}?limit=200")), &org.owner_token)
            .await
            .expect(200);
        all.push(reply.json());
    }
    all
}

#[actix_web::test]
async fn another_orgs_ids_and_non_members_get_404_on_every_route() {
    let all = recipes();
    let app = spawn_app().await;
    let a = app.org("free").await;
    let b = app.org("enterprise").await;
    let (_, stranger) = app.user("stranger@example.test").await;
    let mut probes = Vec::new();
    for (route, recipe) in &all {
        let made = fixture(&app, &a, recipe.needs).await;
        probes.push((route, recipe, made));
    }
    let before = collections(&app, &a).await;
    for (route, recipe, made) in &probes {
        let what = name(route);
        let id = made.as_ref().map(|(id, _)| id.as_str());
        let snapshot = match made {
            Some((_, get)) => Some(
                app.get(&a.path(get), &a.owner_token)
                    .await
                    .expect(200)
                    .json(),
            ),
            None => None,
        };
        // A's id under B, even for B's Owner.
        if let Some(id) = id {
            let path = concrete(route, &b.id, Some(id));
            let reply = app
                .call(
                    method(route),
                    &path,
                    Some(&b.owner_token),
                    recipe.body.clone(),
                )
                .await;
            assert_eq!(
                reply.status,
                404,
                "{what}: A's id under B as B's Owner; body: {}",
                String::from_utf8_lossy(&reply.body)
            );
            problem(&reply, 404, "NOT_FOUND", &what);
        }
        // A's routes for callers who are not members of A.
        let path = concrete(route, &a.id, id);
        for (who, token) in [("B's Owner", &b.owner_token), ("a stranger", &stranger)] {
            let reply = app
                .call(method(route), &path, Some(token), recipe.body.clone())
                .await;
            assert_eq!(
                reply.status,
                404,
                "{what}: non-member ({who}); body: {}",
                String::from_utf8_lossy(&reply.body)
            );
            problem(&reply, 404, "NOT_FOUND", &what);
        }
        if let (Some((_, get)), Some(snapshot)) = (made, snapshot) {
            let now = app.get(&a.path(get), &a.owner_token).await;
            assert_eq!(
                now.expect(200).json(),
                snapshot,
                "{what}: A's resource changed"
            );
        }
    }
    assert_eq!(
        collections(&app, &a).await,
        before,
        "A's collections changed"
    );
    let b_before = collections(&app, &b).await;

    // References in a body to another org's resources.
    let a_decision = decision_in(&app, &a, "ACCEPTED").await;
    let a_project = create(&app, &a, "/projects", json!({"name": "A's"}), 201).await;
    let unknown = rolecall::ids::new_v7().to_string();
    for (case, decision_id) in [("A's decision", &a_decision), ("an unknown id", &unknown)] {
        let reply = app
            .post(
                &b.path("/pull-requests/analyses"),
                &b.owner_token,
                json!({"repository": "acme/app", "number": 3,
                       "findings": [{"decision_id": decision_id, "summary": "breaks it"}]}),
            )
            .await;
        assert_eq!(reply.status, 422, "analysis naming {case}");
        let body = problem(
            &reply,
            422,
            "UNKNOWN_DECISION",
            &format!("analysis naming {case}"),
        );
        assert_eq!(
            body["field"],
            json!("findings.decision_id"),
            "analysis naming {case}: field"
        );
    }
    for (case, project_id) in [("A's project", &a_project), ("an unknown id", &unknown)] {
        let reply = app
            .post(
                &b.path("/tasks"),
                &b.owner_token,
                json!({"title": "Mine", "project_id": project_id}),
            )
            .await;
        assert_eq!(reply.status, 422, "task in {case}");
        let body = problem(&reply, 422, "UNKNOWN_PROJECT", &format!("task in {case}"));
        assert_eq!(body["field"], json!("project_id"), "task in {case}: field");
    }
    assert_eq!(
        collections(&app, &b).await,
        b_before,
        "refused references stored something in B"
    );
}
