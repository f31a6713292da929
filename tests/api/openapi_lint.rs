//! The served `/openapi.json` is one that validators accept and client
//! generators turn into clean SDKs: unique operation ids named after verb and
//! resource, `servers`, `security` on every operation, pages that refer to
//! their records' schema, `Problem` with its extension members, the errors
//! every operation may answer. The document also passes
//! `openapi-spec-validator` and Redocly's recommended rules
//! (`.ci/redocly.yaml`); that test skips, with the reason printed, where
//! the tools `.ci/install.sh` installs are absent, unless
//! `ROLECALL_REQUIRE_OPENAPI_TOOLS` is set (CI sets it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};

const METHODS: [&str; 5] = ["get", "put", "post", "patch", "delete"];

async fn served(app: &TestApp) -> Value {
    app.get("/openapi.json", &app.admin)
        .await
        .expect(200)
        .json()
}

/// (method, path, operation) of every path operation.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                out.push((method.to_owned(), path.clone(), operation.clone()));
            }
        }
    }
    out
}

fn statuses(operation: &Value) -> BTreeSet<String> {
    operation["responses"]
        .as_object()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default()
}

#[actix_web::test]
async fn operation_ids_are_unique_and_name_a_verb_and_a_resource() {
    let app = spawn_app().await;
    let doc = served(&app).await;
    let mut ids = BTreeSet::new();
    let mut all = operations(&doc);
    for (event, item) in doc["webhooks"].as_object().expect("webhooks") {
        all.push(("post".into(), event.clone(), item["post"].clone()));
    }
    for (method, path, operation) in &all {
        let id = operation["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} {path} has an operationId"));
        let words: Vec<&str> = id.split('_').collect();
        assert!(
            words.len() >= 2
                && words
                    .iter()
                    .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())),
            "{method} {path}: {id} is snake_case words, a verb and a resource"
        );
        assert!(ids.insert(id.to_owned()), "{id} is used once");
        assert!(
            operation["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{method} {path} ({id}) has a summary"
        );
    }
    let expected = [
        ("get", "/organizations/{org_id}/tasks", "list_tasks"),
        ("post", "/organizations/{org_id}/tasks", "create_task"),
        ("get", "/organizations/{org_id}/roles/{role_id}", "get_role"),
        (
            "patch",
            "/organizations/{org_id}/members/{user_id}",
            "update_member",
        ),
        (
            "patch",
            "/admin/organizations/{org_id}",
            "admin_update_organization",
        ),
        ("patch", "/organizations/{org_id}", "update_organization"),
        (
            "delete",
            "/organizations/{org_id}/decisions/{id}",
            "delete_decision",
        ),
    ];
    for (method, path, id) in expected {
        assert_eq!(
            doc["paths"][path][method]["operationId"],
            json!(id),
            "{method} {path}"
        );
    }
}

#[actix_web::test]
async fn every_operation_says_how_it_is_called_and_what_errors_it_may_answer() {
    let app = spawn_app().await;
    let doc = served(&app).await;
    assert_eq!(doc["servers"], json!([{"url": "/"}]));
    let public = ["/healthz", "/readyz", "/openapi.json"];
    for (method, path, operation) in operations(&doc) {
        let status = statuses(&operation);
        if public.contains(&path.as_str()) {
            assert_eq!(
                operation["security"],
                json!([]),
                "{method} {path} is public"
            );
            continue;
        }
        // The metrics token is optional: set by the operator, or none.
        let security = if path == "/metrics" {
            json!([{}, {"bearer": []}])
        } else {
            json!([{"bearer": []}])
        };
        assert_eq!(
            operation["security"], security,
            "{method} {path} takes a bearer token"
        );
        for code in ["401", "429", "503"] {
            assert!(status.contains(code), "{method} {path} declares {code}");
        }
        if path.starts_with("/organizations/{org_id}") {
            for code in ["403", "404"] {
                assert!(status.contains(code), "{method} {path} declares {code}");
            }
        }
        for (code, response) in operation["responses"].as_object().expect("responses") {
            if code.starts_with('4') || code.starts_with('5') {
                assert_eq!(
                    response["content"]["application/problem+json"]["schema"]["$ref"],
                    json!("#/components/schemas/Problem"),
                    "{method} {path} {code} is a problem"
                );
            }
        }
    }
    for (event, item) in doc["webhooks"].as_object().expect("webhooks") {
        assert_eq!(
            item["post"]["security"],
            json!([]),
            "{event} is signed, not called with a token"
        );
    }
}

#[actix_web::test]
async fn pages_refer_to_their_records_and_problem_carries_its_extension_members() {
    let app = spawn_app().await;
    let doc = served(&app).await;
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let mut pages = 0;
    for (name, schema) in schemas {
        let Some(item) = name.strip_prefix("Page_") else {
            continue;
        };
        pages += 1;
        assert_eq!(
            schema["properties"]["items"]["items"],
            json!({"$ref": format!("#/components/schemas/{item}")}),
            "{name} refers to {item}"
        );
    }
    assert_eq!(pages, 13);
    let problem = &doc["components"]["schemas"]["Problem"]["properties"];
    for member in [
        "field",
        "unknown",
        "missing_permission",
        "missing_permissions",
        "from",
        "to",
        "member_count",
    ] {
        assert!(problem[member].is_object(), "Problem documents {member}");
    }
    let action = doc["paths"]["/organizations/{org_id}/audit-log"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == "action")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        action["schema"]["$ref"],
        json!("#/components/schemas/AuditAction"),
        "the audit log's action filter is the enum: {action}"
    );
}

#[actix_web::test]
async fn operations_that_create_or_change_take_an_idempotency_key() {
    let app = spawn_app().await;
    let doc = served(&app).await;
    let takes_key = |method: &str, path: &str| {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .is_some_and(|p| {
                p.iter()
                    .any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header")
            })
    };
    for (method, path) in [
        ("post", "/organizations/{org_id}/tasks"),
        ("post", "/organizations/{org_id}/roles"),
        ("post", "/organizations/{org_id}/members"),
        ("put", "/organizations/{org_id}/webhook"),
        ("post", "/organizations/{org_id}/webhook/rotate"),
        ("post", "/organizations/{org_id}/webhook/recover"),
        ("post", "/admin/users"),
    ] {
        assert!(
            takes_key(method, path),
            "{method} {path} takes an Idempotency-Key"
        );
        let responses = &doc["paths"][path][method]["responses"];
        for status in ["409", "422"] {
            assert!(
                responses[status].is_object(),
                "{method} {path} declares {status}"
            );
        }
    }
    for (method, path) in [
        ("post", "/organizations/{org_id}/permissions/check"),
        ("get", "/organizations/{org_id}/tasks"),
        ("patch", "/organizations/{org_id}/roles/{role_id}"),
    ] {
        assert!(!takes_key(method, path), "{method} {path} takes no key");
    }
}

/// Every `pattern` anywhere in `value`.
fn patterns<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("pattern", Value::String(pattern)) => out.push(pattern),
                    _ => patterns(inner, out),
                }
            }
        }
        Value::Array(list) => list.iter().for_each(|v| patterns(v, out)),
        _ => {}
    }
}

#[actix_web::test]
async fn patterns_use_no_escapes_that_generators_turn_into_raw_characters() {
    let app = spawn_app().await;
    let doc = served(&app).await;
    let mut found = Vec::new();
    patterns(&doc, &mut found);
    assert!(found.len() >= 10, "the document has patterns: {found:?}");
    for pattern in found {
        // A zod generator decodes `\u2028` into U+2028 inside a regular-
        // expression literal: a syntax error. RE2 (Go) knows no `\u` at all.
        assert!(!pattern.contains("\\u"), "no \\u escape in {pattern}");
        assert!(
            !pattern
                .chars()
                .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}'),
            "no raw control character or line separator in {pattern:?}"
        );
    }
}

/// The validator and Redocly's CLI, as `.ci/install.sh` installs them (or
/// as `ROLECALL_TEST_OPENAPI_VALIDATOR` and `ROLECALL_TEST_REDOCLY` name).
fn tools() -> Option<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let validator = std::env::var_os("ROLECALL_TEST_OPENAPI_VALIDATOR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/openapi-tools/venv/bin/openapi-spec-validator"));
    let redocly = std::env::var_os("ROLECALL_TEST_REDOCLY")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/openapi-tools/redocly/node_modules/.bin/redocly"));
    let runs = |tool: &Path| {
        Command::new(tool)
            .arg("--help")
            .output()
            .is_ok_and(|out| out.status.success())
    };
    if runs(&validator) && runs(&redocly) {
        return Some((validator, redocly));
    }
    let why = "no openapi-spec-validator or Redocly CLI (bash .ci/install.sh installs both under \
               target/openapi-tools)";
    assert!(
        std::env::var_os("ROLECALL_REQUIRE_OPENAPI_TOOLS").is_none(),
        "ROLECALL_REQUIRE_OPENAPI_TOOLS is set but there is {why}"
    );
    println!("skipped: {why}");
    None
}

#[actix_web::test]
async fn the_served_document_passes_openapi_spec_validator_and_redocly_lint() {
    let Some((validator, redocly)) = tools() else {
        return;
    };
    let app = spawn_app().await;
    let doc = served(&app).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, doc.to_string()).expect("the document written");

    let validated = Command::new(&validator)
        .arg(&file)
        .output()
        .expect("the validator runs");
    assert!(
        validated.status.success(),
        "openapi-spec-validator: {}{}",
        String::from_utf8_lossy(&validated.stdout),
        String::from_utf8_lossy(&validated.stderr)
    );

    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/redocly.yaml");
    let linted = Command::new(&redocly)
        .arg("lint")
        .arg(&file)
        .arg("--config")
        .arg(&config)
        .arg("--format=summary")
        .env("REDOCLY_TELEMETRY", "off")
        .env("REDOCLY_SUPPRESS_UPDATE_NOTICE", "true")
        .output()
        .expect("redocly runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&linted.stdout),
        String::from_utf8_lossy(&linted.stderr)
    );
    assert!(linted.status.success(), "redocly lint: {report}");
    assert!(
        !report.lines().any(|l| l.trim_start().starts_with("error")),
        "redocly lint reports no error: {report}"
    );
}

/// The five workspace resources share one generic set of handlers; their
/// entries are built from what each declares, and must read as the
/// annotated routes around them do: one id per verb, the record's schema,
/// the create and update bodies, and the errors of their own.
#[actix_web::test]
async fn the_generic_resource_routes_are_documented_per_resource() {
    let app = spawn_app().await;
    let doc = served(&app).await;
    let schema_ref = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    let body_of = |operation: &Value, status: &str| {
        operation["responses"][status]["content"]["application/json"]["schema"].clone()
    };
    for (one, many, record, tag) in [
        ("decision", "decisions", "Decision", "decisions"),
        ("task", "tasks", "Task", "tasks"),
        ("memory", "memories", "Memory", "memories"),
        ("capsule", "capsules", "Capsule", "capsules"),
        ("project", "projects", "Project", "projects"),
    ] {
        let list = format!("/organizations/{{org_id}}/{many}");
        let item = format!("{list}/{{id}}");
        let op = |path: &str, method: &str| doc["paths"][path][method].clone();
        for (path, method, id, outcome, schema) in [
            (
                &list,
                "post",
                format!("create_{one}"),
                "201",
                record.to_owned(),
            ),
            (
                &list,
                "get",
                format!("list_{many}"),
                "200",
                format!("Page_{record}"),
            ),
            (&item, "get", format!("get_{one}"), "200", record.to_owned()),
            (
                &item,
                "patch",
                format!("update_{one}"),
                "200",
                record.to_owned(),
            ),
        ] {
            let operation = op(path, method);
            assert_eq!(operation["operationId"], json!(id), "{method} {path}");
            assert_eq!(operation["tags"], json!([tag]), "{id}");
            assert_eq!(operation["security"], json!([{"bearer": []}]), "{id}");
            assert_eq!(body_of(&operation, outcome), schema_ref(&schema), "{id}");
            let summary = operation["summary"].as_str().unwrap_or_default();
            assert!(summary.ends_with('.'), "{id} has a summary: {summary:?}");
        }
        let create = op(&list, "post");
        let update = op(&item, "patch");
        let delete = op(&item, "delete");
        assert_eq!(
            create["requestBody"]["content"]["application/json"]["schema"],
            schema_ref(&format!("Create{record}"))
        );
        assert_eq!(
            update["requestBody"]["content"]["application/json"]["schema"],
            schema_ref(&format!("Update{record}"))
        );
        assert_eq!(delete["operationId"], json!(format!("delete_{one}")));
        assert_eq!(
            delete["responses"]["204"],
            json!({"description": "Deleted"})
        );
        let listing = op(&list, "get");
        let names: Vec<&str> = listing["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(names, ["org_id", "limit", "cursor"], "list_{many}");
        // A refused transition is this resource's own 409; an unknown
        // project is a task's own 422 (besides the Idempotency-Key's).
        let own_conflict = matches!(one, "task" | "capsule");
        assert_eq!(
            statuses(&update).contains("409"),
            own_conflict,
            "update_{one}: {:?}",
            statuses(&update)
        );
    }
    let analyses = &doc["paths"]["/organizations/{org_id}/pull-requests/analyses/{id}"]["get"];
    assert_eq!(analyses["operationId"], json!("get_analysis"));
    assert_eq!(analyses["tags"], json!(["pull-requests"]));
}
