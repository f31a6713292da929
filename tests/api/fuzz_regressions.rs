//! Regressions of what the API fuzzer (`.ci/schemathesis.sh`) found: either
//! the server answered differently from the contract, or `/openapi.json`
//! described requests or responses differently from what the server does.
//! Document mismatches are tested on the document itself and, where the
//! document now states a rule, on the server's behavior at that rule's edges.

use std::collections::BTreeSet;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Req, TestApp};

const VF: &str = "VALIDATION_FAILED";
const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

async fn document(app: &TestApp) -> Value {
    app.call(Method::GET, "/openapi.json", None, None)
        .await
        .expect(200)
        .json()
}

/// Every (METHOD path, operation) of the document.
fn operations(doc: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if let Some(op) = item.get(*method) {
                out.push((format!("{} {path}", method.to_uppercase()), op.clone()));
            }
        }
    }
    out
}

/// The operation `METHOD path`.
fn operation(doc: &Value, method: &str, path: &str) -> Value {
    doc["paths"][path][method.to_lowercase()].clone()
}

/// A component schema by name.
fn component<'a>(doc: &'a Value, name: &str) -> &'a Value {
    &doc["components"]["schemas"][name]
}

/// `schema` with a top-level `$ref` followed.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => component(
            doc,
            reference
                .strip_prefix("#/components/schemas/")
                .expect("local ref"),
        ),
        None => schema,
    }
}

/// Every schema reachable from `schema` (refs followed once each), itself included.
fn reachable(doc: &Value, schema: &Value, seen: &mut BTreeSet<String>, out: &mut Vec<Value>) {
    if let Some(reference) = schema["$ref"].as_str() {
        if seen.insert(reference.to_owned()) {
            reachable(doc, resolve(doc, schema), seen, out);
        }
        return;
    }
    out.push(schema.clone());
    if let Some(properties) = schema["properties"].as_object() {
        for inner in properties.values() {
            reachable(doc, inner, seen, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if schema[key].is_object() {
            reachable(doc, &schema[key], seen, out);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for inner in schema[key].as_array().into_iter().flatten() {
            reachable(doc, inner, seen, out);
        }
    }
}

/// Every schema reachable from any request body, with its operation's name.
fn request_schemas(doc: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, op) in operations(doc) {
        if let Some(schema) = op["requestBody"]["content"]["application/json"].get("schema") {
            let mut found = Vec::new();
            reachable(doc, schema, &mut BTreeSet::new(), &mut found);
            out.extend(found.into_iter().map(|s| (name.clone(), s)));
        }
    }
    out
}

/// The schema of the query parameter `name` of `op`.
fn query_param(op: &Value, name: &str) -> Value {
    op["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == json!(name) && p["in"] == json!("query"))
        .unwrap_or_else(|| panic!("no query parameter {name}"))["schema"]
        .clone()
}

/// Finding: every error answer was documented as `application/json`, but the
/// server sends `application/problem+json` (RFC 9457), so each one violated
/// the document (schemathesis ST105 on every operation).
#[actix_web::test]
async fn error_responses_are_documented_as_problem_json() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let problem = json!({"$ref": "#/components/schemas/Problem"});
    let mut errors = 0;
    for (name, op) in operations(&doc) {
        for (status, response) in op["responses"].as_object().expect("responses") {
            let content = response["content"].as_object().cloned().unwrap_or_default();
            assert!(
                content.get("application/json").map(|c| &c["schema"]) != Some(&problem),
                "{name} {status}: a problem documented as application/json"
            );
            if status.starts_with('4') {
                errors += 1;
                assert_eq!(
                    content
                        .get("application/problem+json")
                        .map(|c| &c["schema"]),
                    Some(&problem),
                    "{name} {status}"
                );
            }
        }
    }
    assert!(errors > 100, "{errors} error responses");
    // What the server really sends (Reply::problem checks the content type).
    app.get("/me", "not-a-token")
        .await
        .problem(401, "UNAUTHENTICATED");
}

/// Finding: a body sent without `Content-Type: application/json` got 415
/// (and an oversized one 413) from operations that did not document either
/// (ST103 on 17 operations).
#[actix_web::test]
async fn operations_with_a_body_document_413_and_415() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let mut bodies = 0;
    for (name, op) in operations(&doc) {
        if op.get("requestBody").is_some() {
            bodies += 1;
            for status in ["413", "415"] {
                assert!(
                    op["responses"][status].is_object(),
                    "{name} does not document {status}"
                );
            }
        }
    }
    assert!(bodies >= 25, "{bodies} operations take a body");

    let org = app.org("enterprise").await;
    let no_type = app
        .raw(Req {
            method: Method::POST,
            path: org.path("/decisions"),
            token: Some(&org.owner_token),
            body: None,
            content_type: None,
            headers: Vec::new(),
        })
        .await;
    no_type.problem(415, "UNSUPPORTED_MEDIA_TYPE");
    let mut big = b"{\"title\":\"".to_vec();
    big.extend(std::iter::repeat_n(b'a', 2 * 1024 * 1024));
    big.extend_from_slice(b"\"}");
    let too_large = app
        .raw(Req {
            method: Method::POST,
            path: org.path("/decisions"),
            token: Some(&org.owner_token),
            body: Some(big),
            content_type: Some("application/json"),
            headers: Vec::new(),
        })
        .await;
    too_large.problem(413, "PAYLOAD_TOO_LARGE");
    let list = app
        .get(&org.path("/decisions"), &org.owner_token)
        .await
        .expect(200);
    assert_eq!(list.json()["items"], json!([]), "nothing was created");
}

/// Finding: `?limit=0` was valid for the document (an unbounded integer)
/// but the server answers 400 outside 1..=200 (ST202 on every list).
#[actix_web::test]
async fn list_limits_are_documented_as_the_server_enforces_them() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let mut lists = 0;
    for (name, op) in operations(&doc) {
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        if params.iter().any(|p| p["name"] == json!("limit")) {
            lists += 1;
            let limit = query_param(&op, "limit");
            assert_eq!(
                (&limit["minimum"], &limit["maximum"]),
                (&json!(1), &json!(200)),
                "{name}"
            );
        }
    }
    assert!(lists >= 12, "{lists} lists");

    let org = app.org("enterprise").await;
    let t = &org.owner_token;
    for list in ["/decisions", "/members", "/audit-log"] {
        for bad in ["0", "201", "-1", "ten"] {
            let body = app
                .get(&org.path(&format!("{list}?limit={bad}")), t)
                .await
                .problem(400, VF);
            assert_eq!(body["field"], json!("limit"), "{list}?limit={bad}");
        }
        for good in ["1", "200"] {
            app.get(&org.path(&format!("{list}?limit={good}")), t)
                .await
                .expect(200);
        }
    }
}

/// Finding: `?cursor=` (empty) was valid for the document (any string) but
/// is not a cursor the server can read (400; ST202 on every list). The
/// document now states the cursor's form (unpadded base64url of a 16-byte
/// id, or of 1..=512 key bytes for roles and members), and every string of
/// that form is accepted.
#[actix_web::test]
async fn list_cursors_are_documented_as_the_server_reads_them() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let id_cursor = json!("^[A-Za-z0-9_-]{21}[AQgw]$");
    for path in [
        "/organizations/{org_id}/decisions",
        "/organizations/{org_id}/audit-log",
        "/organizations/{org_id}/webhook/deliveries",
        "/organizations/{org_id}/projects/{id}/imports",
    ] {
        let cursor = query_param(&operation(&doc, "GET", path), "cursor");
        assert_eq!(cursor["pattern"], id_cursor, "{path}");
    }
    for path in [
        "/organizations/{org_id}/roles",
        "/organizations/{org_id}/members",
        "/organizations/{org_id}/roles/{role_id}/members",
    ] {
        let cursor = query_param(&operation(&doc, "GET", path), "cursor");
        assert!(cursor["pattern"].is_string(), "{path}");
        assert_eq!(
            (&cursor["minLength"], &cursor["maxLength"]),
            (&json!(2), &json!(683)),
            "{path}"
        );
    }

    let org = app.org("enterprise").await;
    let t = &org.owner_token;
    // Matches the id pattern: 16 zero bytes, before every id.
    let zero = "AAAAAAAAAAAAAAAAAAAAAA";
    for list in ["/decisions", "/audit-log", "/webhook/deliveries"] {
        app.get(&org.path(&format!("{list}?cursor={zero}")), t)
            .await
            .expect(200);
        // Empty, non-canonical trailing bits, or not 16 bytes: not the pattern, and 400.
        for bad in ["", "AAAAAAAAAAAAAAAAAAAAAB", "AAAA", "!!"] {
            let body = app
                .get(&org.path(&format!("{list}?cursor={bad}")), t)
                .await
                .problem(400, VF);
            assert_eq!(body["field"], json!("cursor"), "{list}?cursor={bad}");
        }
    }
    for list in ["/roles", "/members"] {
        for good in ["AA", "AAA", "AAAA", "zz8"] {
            app.get(&org.path(&format!("{list}?cursor={good}")), t)
                .await
                .expect(200);
        }
        for bad in ["", "A", "AB", "A=="] {
            app.get(&org.path(&format!("{list}?cursor={bad}")), t)
                .await
                .problem(400, VF);
        }
    }
}

/// Finding: optional body members were documented as nullable
/// (`["string","null"]`), but an explicit `null` is 400 (README: "`null` is
/// not absent"; ST202 on every create and edit). The one exception is
/// `role_expires_at`, whose `null` means "no expiry" (issue 18).
#[actix_web::test]
async fn request_bodies_never_document_null() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let schemas = request_schemas(&doc);
    assert!(schemas.len() > 50, "{} request schemas", schemas.len());
    let nullable = rolecall::http::schema::fields::role_expires_at();
    let nullable = serde_json::to_value(nullable).expect("a schema");
    let mut exceptions = 0;
    for (name, schema) in &schemas {
        if *schema == nullable {
            exceptions += 1;
            continue;
        }
        let types = match &schema["type"] {
            Value::Array(list) => list.clone(),
            other => vec![other.clone()],
        };
        assert!(!types.contains(&json!("null")), "{name}: nullable {schema}");
        for inner in schema["oneOf"].as_array().into_iter().flatten() {
            assert_ne!(inner["type"], json!("null"), "{name}: nullable {schema}");
        }
    }

    let org = app.org("enterprise").await;
    for (suffix, body, field) in [
        (
            "/tasks",
            json!({"title": "t", "description": null}),
            "description",
        ),
        ("/capsules", json!({"title": "t", "scope": null}), "scope"),
        (
            "/memories",
            json!({"content": "c", "metadata": null}),
            "metadata",
        ),
        (
            "/roles",
            json!({"name": "R", "permissions": null}),
            "permissions",
        ),
    ] {
        let reply = app.post(&org.path(suffix), &org.owner_token, body).await;
        assert_eq!(reply.problem(400, VF)["field"], json!(field), "{suffix}");
        let list = app
            .get(&org.path(suffix), &org.owner_token)
            .await
            .expect(200);
        let created = list.json()["items"]
            .as_array()
            .map(|items| items.len())
            .unwrap_or(0);
        let system_roles = if suffix == "/roles" { 2 } else { 0 };
        assert_eq!(created, system_roles, "{suffix}: nothing was created");
    }
    // PATCH …/members/{user_id} and the two shapes of POST …/members.
    assert_eq!(exceptions, 3, "role_expires_at is the only nullable member");
}

/// Finding: `POST /admin/organizations` documented an open object, but the
/// server refuses unknown members (ST202). Every request object now says
/// `additionalProperties: false`, as every body is parsed strictly.
#[actix_web::test]
async fn request_objects_are_documented_closed() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    for (name, schema) in request_schemas(&doc) {
        if schema["type"] == json!("object") && schema["properties"].is_object() {
            assert_eq!(
                schema["additionalProperties"],
                json!(false),
                "{name}: open object {schema}"
            );
        }
    }

    let (owner, token) = app.user("closed@example.test").await;
    let reply = app
        .post(
            "/admin/organizations",
            &app.admin,
            json!({"name": "Acme", "plan": "pro", "owner_user_id": owner, "region": "eu"}),
        )
        .await;
    assert_eq!(reply.problem(400, VF)["field"], json!("region"));
    let me = app.get("/me", &token).await.expect(200).json();
    assert_eq!(me["memberships"], json!([]), "no organization was created");
}

/// Finding: text members were documented as any string, but the server
/// trims them and wants 1..=N characters without control characters (an
/// empty `name`, `title`, `repository` or `source`: ST202), and some ids,
/// enums and combinations were looser in the document than in the server.
/// The document now states each rule; the server's edges are checked here.
#[actix_web::test]
async fn body_rules_are_documented_and_hold_at_their_edges() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let decision = component(&doc, "CreateDecision");
    assert!(decision["properties"]["title"]["pattern"].is_string());
    assert_eq!(
        decision["properties"]["status"]["enum"],
        json!(["DRAFT", "PENDING"])
    );
    assert_eq!(decision["properties"]["tags"]["maxItems"], json!(20));
    assert_eq!(
        component(&doc, "SaveWebhook")["properties"]["test_id"]["format"],
        json!("uuid")
    );
    assert_eq!(
        component(&doc, "CreateRole")["properties"]["copy_permissions_from"]["format"],
        json!("uuid")
    );
    let events = &component(&doc, "TestWebhook")["properties"]["events"]["items"]["enum"];
    assert_eq!(events.as_array().map(Vec::len), Some(22));
    assert!(!events
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e == "test.preflight"));
    let permissions = &component(&doc, "CreateRole")["properties"]["permissions"]["items"]["enum"];
    assert_eq!(permissions.as_array().map(Vec::len), Some(52));
    assert_eq!(
        component(&doc, "ImportResult")["oneOf"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        component(&doc, "AddMember")["oneOf"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        component(&doc, "ReportAnalysis")["properties"]["number"]["minimum"],
        json!(1)
    );

    let org = app.org("enterprise").await;
    let t = &org.owner_token;
    let decisions = org.path("/decisions");
    for (title, ok) in [
        ("", false),
        ("   ", false),
        ("a\u{7}b", false),
        ("\u{85}x", true),
        ("  padded  ", true),
    ] {
        let reply = app.post(&decisions, t, json!({"title": title})).await;
        if ok {
            let created = reply.expect(201).json();
            assert_eq!(created["title"], json!(title.trim()));
        } else {
            assert_eq!(reply.problem(400, VF)["field"], json!("title"), "{title:?}");
        }
    }
    app.post(&decisions, t, json!({"title": "x".repeat(200)}))
        .await
        .expect(201);
    app.post(&decisions, t, json!({"title": "x".repeat(201)}))
        .await
        .problem(400, VF);
    let accepted = app
        .post(
            &decisions,
            t,
            json!({"title": "Born accepted", "status": "ACCEPTED"}),
        )
        .await;
    assert_eq!(accepted.problem(400, VF)["field"], json!("status"));

    let project = app
        .post(&org.path("/projects"), t, json!({"name": "p"}))
        .await
        .expect(201)
        .json();
    let import = app
        .post(
            &org.path(&format!(
                "/projects/{}/imports",
                project["id"].as_str().unwrap_or("")
            )),
            t,
            json!({"source": "github"}),
        )
        .await
        .expect(202)
        .json();
    let result = org.path(&format!(
        "/imports/{}/result",
        import["id"].as_str().unwrap_or("")
    ));
    let both = app
        .post(
            &result,
            t,
            json!({"status": "completed", "failure_reason": "x"}),
        )
        .await;
    assert_eq!(both.problem(400, VF)["field"], json!("failure_reason"));
    let failed = app
        .post(&result, t, json!({"status": "failed"}))
        .await
        .expect(200)
        .json();
    assert_eq!(failed["failure_reason"], json!("unknown error"));
}

/// Finding: `email` was documented with `maxLength: 254`, which counts the
/// surrounding blanks the server trims away, so a longer padded address was
/// "invalid" yet created (ST201). The length bound now lives in the pattern,
/// on the trimmed address.
#[actix_web::test]
async fn email_length_is_documented_on_the_trimmed_address() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let email = &component(&doc, "CreateUser")["properties"]["email"];
    assert!(email.get("maxLength").is_none(), "{email}");
    assert!(
        email["pattern"].as_str().unwrap_or("").contains("{3,254}"),
        "{email}"
    );

    let address = format!("{}@example.test", "a".repeat(241));
    assert_eq!(address.len(), 254);
    let created = app
        .post(
            "/admin/users",
            &app.admin,
            json!({"email": format!("  \t{address}  ")}),
        )
        .await
        .expect(201)
        .json();
    assert_eq!(created["email"], json!(address));
    let longer = format!("a{address}");
    app.post("/admin/users", &app.admin, json!({"email": longer}))
        .await
        .problem(400, VF);
}

/// Finding: a pull-request `number` above 2^63-1 was created (201) although
/// the document says `int64` (ST201). The server now refuses it, as the
/// document says.
#[actix_web::test]
async fn pull_request_numbers_beyond_int64_are_refused() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let path = org.path("/pull-requests/analyses");
    let report = |number: &str| {
        format!("{{\"repository\":\"acme/app\",\"number\":{number},\"findings\":[]}}").into_bytes()
    };
    for number in [
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "1e19",
    ] {
        let reply = app
            .raw(Req {
                method: Method::POST,
                path: path.clone(),
                token: Some(&org.owner_token),
                body: Some(report(number)),
                content_type: Some("application/json"),
                headers: Vec::new(),
            })
            .await;
        assert_eq!(reply.problem(400, VF)["field"], json!("number"), "{number}");
    }
    let list = app.get(&path, &org.owner_token).await.expect(200);
    assert_eq!(list.json()["items"], json!([]), "nothing was created");

    let largest = app
        .raw(Req {
            method: Method::POST,
            path: path.clone(),
            token: Some(&org.owner_token),
            body: Some(report("9223372036854775807")),
            content_type: Some("application/json"),
            headers: Vec::new(),
        })
        .await
        .expect(201);
    assert_eq!(
        largest.json()["number"],
        json!(9_223_372_036_854_775_807_u64)
    );
}

/// Finding: `"number": 168904.0` is an integer for JSON Schema (and so for
/// the document), but the server refused it (400; ST202).
#[actix_web::test]
async fn pull_request_numbers_written_as_integral_floats_are_integers() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let path = org.path("/pull-requests/analyses");
    let report =
        |number: Value| json!({"repository": "acme/app", "number": number, "findings": []});
    let created = app
        .post(&path, &org.owner_token, report(json!(7.0)))
        .await
        .expect(201)
        .json();
    assert_eq!(created["number"], json!(7));
    for bad in [json!(7.5), json!(0.0), json!(-3.0), json!(0)] {
        let reply = app.post(&path, &org.owner_token, report(bad.clone())).await;
        assert_eq!(reply.problem(400, VF)["field"], json!("number"), "{bad}");
    }
    let list = app.get(&path, &org.owner_token).await.expect(200);
    assert_eq!(list.json()["items"].as_array().map(Vec::len), Some(1));
}

/// Finding: `https://0.A*` (not the document's URL form) was tested (200,
/// and a DNS look-up of a name that cannot exist) instead of refused (ST201).
/// A host that is neither a DNS name nor an address is now 400 INVALID_URL.
#[actix_web::test]
async fn webhook_hosts_must_be_names_or_addresses() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let doc = document(&app).await;
    let url = &component(&doc, "TestWebhook")["properties"]["url"];
    assert!(url["pattern"]
        .as_str()
        .unwrap_or("")
        .starts_with("^https://"));
    assert_eq!(url["maxLength"], json!(2048));

    for bad in [
        "https://0.A*",
        "https://exa_mple.com/hook",
        "https://-bad.example/",
        "https://a..example/",
        "https://a%41.example/",
    ] {
        let reply = app
            .post(
                &org.path("/webhook/test"),
                &org.owner_token,
                json!({"url": bad, "events": ["member.added"]}),
            )
            .await;
        reply.problem(400, "INVALID_URL");
    }
    assert!(
        app.deliveries(&org, "").await.is_empty(),
        "nothing was sent"
    );
}

/// Finding: `PATCH …/roles/{id}` with an `If-Match` that matches nothing and
/// no body answered 412, which schemathesis expected to be a 400 (ST201).
/// The server is right: the contract checks If-Match before the body.
#[actix_web::test]
async fn if_match_is_judged_before_the_body() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Reviewer", &["org:team:read"]).await;
    let path = org.path(&format!("/roles/{role}"));
    let before = app.get(&path, &org.owner_token).await.expect(200).json();
    for if_match in ["", "\"nope\""] {
        let reply = app
            .raw(Req {
                method: Method::PATCH,
                path: path.clone(),
                token: Some(&org.owner_token),
                body: None,
                content_type: None,
                headers: vec![("If-Match", if_match.to_owned())],
            })
            .await;
        reply.problem(412, "PRECONDITION_FAILED");
    }
    let after = app.get(&path, &org.owner_token).await.expect(200).json();
    assert_eq!(before, after);
}

/// Found with the fuzzer's help: query filters the server checks against a
/// list (`?permission=`, `?event=`, `?outcome=`) were documented as any
/// string. They are now enums, and anything else is refused.
#[actix_web::test]
async fn query_filters_are_documented_as_enums() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    let members = operation(&doc, "GET", "/organizations/{org_id}/members");
    assert_eq!(
        query_param(&members, "permission")["enum"]
            .as_array()
            .map(Vec::len),
        Some(52)
    );
    let deliveries = operation(&doc, "GET", "/organizations/{org_id}/webhook/deliveries");
    assert_eq!(
        query_param(&deliveries, "event")["enum"]
            .as_array()
            .map(Vec::len),
        Some(23)
    );
    let outcome = resolve(&doc, &query_param(&deliveries, "outcome")).clone();
    assert_eq!(outcome["enum"], json!(["succeeded", "failed", "skipped"]));

    let org = app.org("enterprise").await;
    let t = &org.owner_token;
    app.get(&org.path("/members?permission=org:nope:read"), t)
        .await
        .problem(400, "UNKNOWN_PERMISSION");
    app.get(&org.path("/webhook/deliveries?event=nope"), t)
        .await
        .problem(400, "UNKNOWN_EVENT");
    app.get(&org.path("/webhook/deliveries?outcome=nope"), t)
        .await
        .problem(400, VF);
    app.get(
        &org.path("/webhook/deliveries?event=test.preflight&outcome=failed"),
        t,
    )
    .await
    .expect(200);
}
