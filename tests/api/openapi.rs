//! `GET /openapi.json` documents exactly the routes that exist, and
//! `GET /permissions` serves the catalog.

use std::collections::BTreeSet;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Req};

/// Every (method, path template) of CONTRACT §0–6, and `/metrics`.
const CONTRACT_ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("POST", "/admin/users"),
    ("POST", "/admin/users/{user_id}/tokens"),
    ("DELETE", "/admin/tokens/{token_id}"),
    ("POST", "/admin/organizations"),
    ("PATCH", "/admin/organizations/{org_id}"),
    ("GET", "/me"),
    ("GET", "/permissions"),
    ("GET", "/event-types"),
    ("GET", "/organizations/{org_id}"),
    ("PATCH", "/organizations/{org_id}"),
    (
        "GET",
        "/organizations/{org_id}/members/{user_id}/permissions",
    ),
    ("GET", "/organizations/{org_id}/permissions/mine"),
    ("POST", "/organizations/{org_id}/permissions/check"),
    ("GET", "/organizations/{org_id}/roles"),
    ("POST", "/organizations/{org_id}/roles"),
    ("GET", "/organizations/{org_id}/roles/{role_id}"),
    ("PATCH", "/organizations/{org_id}/roles/{role_id}"),
    ("DELETE", "/organizations/{org_id}/roles/{role_id}"),
    ("GET", "/organizations/{org_id}/roles/{role_id}/members"),
    ("GET", "/organizations/{org_id}/members"),
    ("POST", "/organizations/{org_id}/members"),
    ("GET", "/organizations/{org_id}/members/{user_id}"),
    ("PATCH", "/organizations/{org_id}/members/{user_id}"),
    ("DELETE", "/organizations/{org_id}/members/{user_id}"),
    ("GET", "/organizations/{org_id}/audit-log"),
    ("GET", "/organizations/{org_id}/webhook"),
    ("PUT", "/organizations/{org_id}/webhook"),
    ("DELETE", "/organizations/{org_id}/webhook"),
    ("POST", "/organizations/{org_id}/webhook/test"),
    ("POST", "/organizations/{org_id}/webhook/rotate"),
    ("GET", "/organizations/{org_id}/webhook/deliveries"),
    (
        "POST",
        "/organizations/{org_id}/webhook/deliveries/{delivery_id}/redeliver",
    ),
    ("POST", "/organizations/{org_id}/webhook/recover"),
];

/// Routes answered without a token (`/metrics` unless `metrics.token` is set).
const PUBLIC: &[&str] = &["/healthz", "/readyz", "/metrics", "/openapi.json"];

const HTTP_METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The seed's catalog (section 2.3), in its order.
const SEED_CATALOG: &[(&str, &[&str])] = &[
    (
        "decisions",
        &[
            "create",
            "read",
            "update",
            "delete",
            "accept",
            "reject",
            "deprecate",
        ],
    ),
    ("memories", &["create", "read", "update", "delete"]),
    ("capsules", &["create", "read", "freeze", "supersede"]),
    ("tasks", &["create", "read", "update", "delete"]),
    ("comments", &["create", "read"]),
    ("sharing", &["create", "read", "revoke"]),
    ("tags", &["create", "read", "delete", "attach"]),
    ("chat", &["create", "read", "update", "delete"]),
    ("conflicts", &["read", "resolve"]),
    ("imports", &["start", "read", "cancel"]),
    ("graph", &["read", "manage"]),
    ("notifications", &["read", "manage"]),
    ("team", &["read", "invite", "manage"]),
    ("settings", &["read", "manage"]),
    ("billing", &["read", "manage"]),
    ("projects", &["create", "read", "update", "delete"]),
];

async fn document(app: &crate::helpers::TestApp) -> Value {
    let reply = app
        .call(Method::GET, "/openapi.json", None, None)
        .await
        .expect(200);
    assert!(
        reply.header("content-type").starts_with("application/json"),
        "content-type {}",
        reply.header("content-type")
    );
    let doc = reply.json();
    assert!(doc.is_object(), "the document is a JSON object");
    doc
}

/// Every documented (METHOD, path) pair.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let paths = doc["paths"].as_object().expect("paths is an object");
    let mut out = Vec::new();
    for (path, item) in paths {
        let item = item.as_object().expect("path item is an object");
        for (method, operation) in item {
            if HTTP_METHODS.contains(&method.as_str()) {
                out.push((method.to_uppercase(), path.clone(), operation.clone()));
            }
        }
    }
    out
}

/// Collects every `$ref` value anywhere in `value`.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "$ref" {
                    out.push(inner.as_str().expect("$ref is a string").to_owned());
                } else {
                    refs(inner, out);
                }
            }
        }
        Value::Array(list) => list.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[actix_web::test]
async fn openapi_documents_exactly_the_contract_routes() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let version = doc["openapi"].as_str().expect("openapi is a string");
    assert!(version.starts_with("3.1"), "openapi version {version}");

    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(method, path, _)| (method, path))
        .collect();
    let as_set = |routes: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        routes
            .iter()
            .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
            .collect()
    };
    let mut expected = as_set(CONTRACT_ROUTES);
    assert_eq!(expected.len(), CONTRACT_ROUTES.len());
    // CONTRACT §7: the workspace routes, from the table the server checks permissions with.
    let resources: Vec<(&str, &str)> = rolecall::http::route_table::WORKSPACE_ROUTES
        .iter()
        .map(|r| (r.method, r.path))
        .collect();
    expected.extend(as_set(&resources));
    assert_eq!(expected.len(), CONTRACT_ROUTES.len() + resources.len());
    // Every contract route is documented ...
    let missing: Vec<_> = expected.difference(&documented).collect();
    assert!(missing.is_empty(), "undocumented routes: {missing:?}");
    // ... and nothing else is.
    let extra: Vec<_> = documented.difference(&expected).collect();
    assert!(extra.is_empty(), "routes outside the contract: {extra:?}");

    for (method, path, operation) in operations(&doc) {
        let responses = operation["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {path} has no responses object"));
        assert!(
            !responses.is_empty(),
            "{method} {path} documents no response"
        );
    }

    let schemas = doc["components"]["schemas"]
        .as_object()
        .expect("components.schemas");
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(
        all.len() >= CONTRACT_ROUTES.len(),
        "the document uses schema references ({} found)",
        all.len()
    );
    for reference in all {
        let name = reference
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("$ref {reference} does not point into components.schemas"));
        assert!(
            schemas.contains_key(name),
            "$ref {reference} does not resolve"
        );
    }
}

#[actix_web::test]
async fn every_documented_operation_is_registered() {
    let app = spawn_app().await;
    let doc = document(&app).await;

    // The two answers that betray a missing route, for comparison.
    let unknown = app
        .call(Method::GET, "/no-such-route/at-all", None, None)
        .await;
    let body = unknown.problem(404, "NOT_FOUND");
    assert_eq!(body["detail"], json!("route not found"));
    let wrong_method = app.call(Method::DELETE, "/healthz", None, None).await;
    wrong_method.problem(405, "METHOD_NOT_ALLOWED");

    let ops = operations(&doc);
    assert!(
        ops.len() >= CONTRACT_ROUTES.len(),
        "{} operations",
        ops.len()
    );
    for (method, template, _) in ops {
        let path: String = template
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') && segment.ends_with('}') {
                    rolecall::ids::new_v7().to_string()
                } else {
                    segment.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let has_body = matches!(method.as_str(), "POST" | "PATCH" | "PUT");
        let reply = app
            .raw(Req {
                method: Method::from_bytes(method.as_bytes()).expect("method"),
                path: path.clone(),
                token: None,
                body: has_body.then(|| b"{}".to_vec()),
                content_type: has_body.then_some("application/json"),
                headers: Vec::new(),
            })
            .await;
        let answer = reply.json();
        assert!(
            !(reply.status == 404 && answer["detail"] == json!("route not found")),
            "{method} {template} is documented but not registered"
        );
        assert_ne!(
            reply.status, 405,
            "{method} {template} is documented but not registered for that method"
        );
        if PUBLIC.contains(&template.as_str()) {
            assert_eq!(reply.status, 200, "{method} {path}");
        } else {
            reply.problem(401, "UNAUTHENTICATED");
            assert_eq!(
                reply.header("www-authenticate"),
                "Bearer",
                "{method} {path}"
            );
        }
    }
}

#[actix_web::test]
async fn permissions_lists_the_catalog_in_seed_order() {
    let app = spawn_app().await;
    let no_token = app.call(Method::GET, "/permissions", None, None).await;
    no_token.problem(401, "UNAUTHENTICATED");
    assert_eq!(no_token.header("www-authenticate"), "Bearer");
    app.get("/permissions", &app.admin)
        .await
        .problem(401, "UNAUTHENTICATED");
    app.get("/permissions", "not-a-token")
        .await
        .problem(401, "UNAUTHENTICATED");

    // Any authenticated user, member of nothing, may read it.
    let (_, token) = app.user("catalog@example.test").await;
    let body = app.get("/permissions", &token).await.expect(200).json();
    assert_eq!(body["next_cursor"], Value::Null);
    assert!(
        body.as_object()
            .expect("object")
            .contains_key("next_cursor"),
        "next_cursor is present, as null"
    );
    let items = body["items"].as_array().expect("items");
    assert_eq!(items.len(), 52);

    let expected: Vec<Value> = SEED_CATALOG
        .iter()
        .flat_map(|(domain, verbs)| {
            verbs.iter().map(move |verb| {
                let sensitive = *verb == "delete"
                    || *verb == "manage"
                    || (*domain == "team" && *verb == "invite")
                    || (*domain == "sharing" && *verb == "revoke");
                json!({
                    "key": format!("org:{domain}:{verb}"),
                    "domain": domain,
                    "verb": verb,
                    "sensitive": sensitive,
                })
            })
        })
        .collect();
    assert_eq!(expected.len(), 52);
    assert_eq!(items, &expected);
    assert_eq!(items[0]["key"], json!("org:decisions:create"));
    assert_eq!(items[51]["key"], json!("org:projects:delete"));

    let sensitive: Vec<&str> = items
        .iter()
        .filter(|i| i["sensitive"] == json!(true))
        .map(|i| i["key"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        sensitive,
        [
            "org:decisions:delete",
            "org:memories:delete",
            "org:tasks:delete",
            "org:sharing:revoke",
            "org:tags:delete",
            "org:chat:delete",
            "org:graph:manage",
            "org:notifications:manage",
            "org:team:invite",
            "org:team:manage",
            "org:settings:manage",
            "org:billing:manage",
            "org:projects:delete",
        ]
    );
}

/// `GET /permissions` validates `limit` and `cursor` like every other list,
/// and pages the catalog when asked to.
#[actix_web::test]
async fn permissions_validates_and_honours_paging() {
    let app = spawn_app().await;
    let (_, token) = app.user("paging@example.test").await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=-1", "limit"),
        ("limit=ten", "limit"),
        ("cursor=%21%21", "cursor"),
        ("cursor=", "cursor"),
    ] {
        let body = app
            .get(&format!("/permissions?{query}"), &token)
            .await
            .problem(400, "VALIDATION_FAILED");
        assert_eq!(body["field"], json!(field), "{query}");
    }
    let mut keys = Vec::new();
    let mut path = "/permissions?limit=20".to_owned();
    for expected_len in [20, 20, 12] {
        let page = app.get(&path, &token).await.expect(200).json();
        let items = page["items"].as_array().expect("items");
        assert_eq!(items.len(), expected_len, "{path}");
        keys.extend(
            items
                .iter()
                .map(|i| i["key"].as_str().unwrap_or("").to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/permissions?limit=20&cursor={cursor}"),
            None => assert_eq!(expected_len, 12, "the last page ends the list"),
        }
    }
    let whole = app.get("/permissions", &token).await.expect(200).json();
    let all: Vec<String> = whole["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["key"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(keys, all);
}

/// The audit actions are one published list (the dashboard's filter reads it
/// from here), and an audit record's `action` refers to it.
#[actix_web::test]
async fn openapi_publishes_every_audit_action() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["AuditAction"]["enum"],
        json!([
            "organization.created",
            "organization.renamed",
            "organization.plan_changed",
            "role.created",
            "role.updated",
            "role.deleted",
            "member.added",
            "member.role_changed",
            "member.removed",
            "member.role_expired",
            "webhook.saved",
            "webhook.rotated",
            "webhook.deleted",
            "webhook.recovered",
            "webhook.disabled",
            "webhook.enabled",
        ])
    );
    assert_eq!(
        schemas["AuditView"]["properties"]["action"]["$ref"],
        json!("#/components/schemas/AuditAction")
    );
}
