//! Malformed and hostile requests (CONTRACT §1): every one is answered with
//! a 4xx problem+json carrying the right code, never a 5xx, and changes
//! nothing (the org's roles, members, settings and audit log stay the same).

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, Org, Req, TestApp};

/// One refused request and what it must get.
struct Case {
    name: &'static str,
    method: Method,
    path: String,
    token: Option<String>,
    headers: Vec<(&'static str, String)>,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
    status: u16,
    code: &'static str,
    /// Extra problem members that must be present with these values.
    members: Vec<(&'static str, Value)>,
    /// For 405: the methods `Allow` must list.
    allow: Option<&'static [&'static str]>,
}

/// A case with no token, no body and no expectation yet.
fn case(name: &'static str, method: Method, path: impl Into<String>) -> Case {
    Case {
        name,
        method,
        path: path.into(),
        token: None,
        headers: Vec::new(),
        content_type: None,
        body: None,
        status: 0,
        code: "",
        members: Vec::new(),
        allow: None,
    }
}

impl Case {
    fn token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    /// A raw body sent as `application/json`.
    fn json_bytes(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self.content_type = Some("application/json");
        self
    }

    /// A JSON value sent as `application/json`.
    fn json(self, body: Value) -> Self {
        self.json_bytes(body.to_string())
    }

    /// A raw body with the given content type (or none).
    fn body_as(mut self, content_type: Option<&'static str>, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self.content_type = content_type;
        self
    }

    fn expect(mut self, status: u16, code: &'static str) -> Self {
        self.status = status;
        self.code = code;
        self
    }

    fn member(mut self, name: &'static str, value: Value) -> Self {
        self.members.push((name, value));
        self
    }

    fn allow(mut self, methods: &'static [&'static str]) -> Self {
        self.allow = Some(methods);
        self
    }
}

/// Everything a refused request must not change.
async fn snapshot(app: &TestApp, org: &Org) -> Value {
    let t = org.owner_token.as_str();
    let mut parts = serde_json::Map::new();
    for (key, path) in [
        ("organization", org.path("")),
        ("roles", org.path("/roles")),
        ("members", org.path("/members?limit=200")),
        ("audit", org.path("/audit-log?limit=200")),
    ] {
        let reply = app.get(&path, t).await.expect(200);
        parts.insert(key.to_owned(), reply.json());
    }
    Value::Object(parts)
}

/// Which parts of two snapshots differ, briefly (for failure messages).
fn changes(before: &Value, after: &Value) -> String {
    let mut parts = Vec::new();
    for key in ["organization", "roles", "members", "audit"] {
        if before[key] != after[key] {
            let mut text = after[key].to_string();
            if text.len() > 400 {
                text.truncate(400);
                text.push('…');
            }
            parts.push(format!("{key} is now {text}"));
        }
    }
    parts.join("; ")
}

#[actix_web::test]
async fn malformed_requests_get_4xx_problems_and_change_nothing() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let role = app.role(&org, "Reviewer", &["org:team:read"]).await;
    let (member, member_token) = app.member(&org, &role).await;
    let t = org.owner_token.clone();
    let admin = app.admin.clone();
    let roles = org.path("/roles");
    let role_path = org.path(&format!("/roles/{role}"));
    let members = org.path("/members");
    let member_path = org.path(&format!("/members/{member}"));
    let audit = org.path("/audit-log");
    let long_name = "n".repeat(65);
    let long_description = "d".repeat(501);
    let huge = {
        let mut body = b"{\"name\":\"".to_vec();
        body.extend(std::iter::repeat_n(b'a', 2 * 1024 * 1024));
        body.extend_from_slice(b"\"}");
        body
    };
    let deep = format!("{{\"name\":{}", "[".repeat(100_000));
    const VF: &str = "VALIDATION_FAILED";

    let cases = vec![
        // Bodies that are not the JSON object asked for.
        case("malformed JSON", Method::POST, &roles)
            .token(&t)
            .json_bytes("{\"name\": ")
            .expect(400, VF),
        case("trailing garbage after the object", Method::POST, &roles)
            .token(&t)
            .json_bytes("{\"name\":\"A\"} x")
            .expect(400, VF),
        case("empty body with a JSON content type", Method::POST, &roles)
            .token(&t)
            .json_bytes("")
            .expect(400, VF),
        case("array body []", Method::POST, &roles)
            .token(&t)
            .json_bytes("[]")
            .expect(400, VF),
        case("null body", Method::POST, &roles)
            .token(&t)
            .json_bytes("null")
            .expect(400, VF),
        case("array body on org PATCH", Method::PATCH, org.path(""))
            .token(&t)
            .json_bytes("[]")
            .expect(400, VF),
        case("array standing in for a role object", Method::POST, &roles)
            .token(&t)
            .json_bytes("[\"Sneaky\"]")
            .expect(400, VF),
        case(
            "array standing in for an org PATCH object",
            Method::PATCH,
            org.path(""),
        )
        .token(&t)
        .json_bytes("[\"Renamed by array\"]")
        .expect(400, VF),
        case(
            "array standing in for a member PATCH object",
            Method::PATCH,
            &member_path,
        )
        .token(&t)
        .json_bytes(format!("[\"{}\"]", org.member_role))
        .expect(400, VF),
        case(
            "array standing in for an admin user object",
            Method::POST,
            "/admin/users",
        )
        .token(&admin)
        .json_bytes("[\"array-user@example.test\"]")
        .expect(400, VF),
        case("invalid UTF-8 in a string", Method::POST, &roles)
            .token(&t)
            .json_bytes(b"{\"name\":\"\xff\xfe\"}".to_vec())
            .expect(400, VF),
        case("nesting 100000 levels deep", Method::POST, &roles)
            .token(&t)
            .json_bytes(deep)
            .expect(400, VF),
        // Wrong types.
        case("name is a number", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": 5}))
            .expect(400, VF)
            .member("field", json!("name")),
        case("permissions is a string", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": "X", "permissions": "org:tasks:read"}))
            .expect(400, VF)
            .member("field", json!("permissions")),
        case("permissions holds a number", Method::PATCH, &role_path)
            .token(&t)
            .json(json!({"permissions": [1]}))
            .expect(400, VF),
        case("role_id is a number", Method::PATCH, &member_path)
            .token(&t)
            .json(json!({"role_id": 7}))
            .expect(400, VF)
            .member("field", json!("role_id")),
        case("plan is a number", Method::PATCH, org.path(""))
            .token(&t)
            .json(json!({"plan": 3}))
            .expect(400, VF),
        // Unknown and missing fields.
        case("unknown field on role create", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": "X", "colour": "red"}))
            .expect(400, VF),
        case("unknown field on role PATCH", Method::PATCH, &role_path)
            .token(&t)
            .json(json!({"is_immutable": true}))
            .expect(400, VF),
        case("unknown field on member add", Method::POST, &members)
            .token(&t)
            .json(json!({"user_id": member, "role_id": role, "admin": true}))
            .expect(400, VF),
        case("missing name on role create", Method::POST, &roles)
            .token(&t)
            .json(json!({"description": "no name"}))
            .expect(400, VF),
        case("missing role_id on member add", Method::POST, &members)
            .token(&t)
            .json(json!({"user_id": member}))
            .expect(400, VF),
        case(
            "both user_id and email on member add",
            Method::POST,
            &members,
        )
        .token(&t)
        .json(json!({"user_id": member, "email": "x@example.test", "role_id": role}))
        .expect(400, VF),
        case(
            "missing role_id on member PATCH",
            Method::PATCH,
            &member_path,
        )
        .token(&t)
        .json(json!({}))
        .expect(400, VF),
        // Values out of range.
        case("65-character name", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": long_name}))
            .expect(400, VF)
            .member("field", json!("name")),
        case("name of only spaces", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": "    "}))
            .expect(400, VF)
            .member("field", json!("name")),
        case("empty name on role PATCH", Method::PATCH, &role_path)
            .token(&t)
            .json(json!({"name": ""}))
            .expect(400, VF)
            .member("field", json!("name")),
        case("BEL control character in a name", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": "a\u{0007}b"}))
            .expect(400, VF)
            .member("field", json!("name")),
        case("newline in a name", Method::PATCH, &role_path)
            .token(&t)
            .json(json!({"name": "a\nb"}))
            .expect(400, VF)
            .member("field", json!("name")),
        case("501-character description", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": "X", "description": long_description}))
            .expect(400, VF)
            .member("field", json!("description")),
        case("explicit null description", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": "x", "description": null}))
            .expect(400, VF),
        case(
            "explicit null permissions on PATCH",
            Method::PATCH,
            &role_path,
        )
        .token(&t)
        .json(json!({"permissions": null}))
        .expect(400, VF),
        case(
            "explicit null name on org PATCH",
            Method::PATCH,
            org.path(""),
        )
        .token(&t)
        .json(json!({"name": null}))
        .expect(400, VF),
        case("empty org name", Method::PATCH, org.path(""))
            .token(&t)
            .json(json!({"name": ""}))
            .expect(400, VF),
        case("unknown permission key", Method::POST, &roles)
            .token(&t)
            .json(json!({"name": "X", "permissions": ["org:tasks:read", "org:nope:read"]}))
            .expect(400, "UNKNOWN_PERMISSION")
            .member("unknown", json!(["org:nope:read"])),
        case("unknown permission key on PATCH", Method::PATCH, &role_path)
            .token(&t)
            .json(json!({"permissions": ["org:tasks:fly"]}))
            .expect(400, "UNKNOWN_PERMISSION")
            .member("unknown", json!(["org:tasks:fly"])),
        case(
            "unknown permission filter on members",
            Method::GET,
            format!("{members}?permission=org:nope:read"),
        )
        .token(&t)
        .expect(400, "UNKNOWN_PERMISSION"),
        // Size and media type.
        case("2 MiB body", Method::POST, &roles)
            .token(&t)
            .json_bytes(huge.clone())
            .expect(413, "PAYLOAD_TOO_LARGE"),
        case("2 MiB body on role PATCH", Method::PATCH, &role_path)
            .token(&t)
            .json_bytes(huge)
            .expect(413, "PAYLOAD_TOO_LARGE"),
        case("text/plain content type", Method::POST, &roles)
            .token(&t)
            .body_as(Some("text/plain"), json!({"name": "Plain"}).to_string())
            .expect(415, "UNSUPPORTED_MEDIA_TYPE"),
        case("missing content type", Method::POST, &roles)
            .token(&t)
            .body_as(None, json!({"name": "Bare"}).to_string())
            .expect(415, "UNSUPPORTED_MEDIA_TYPE"),
        case(
            "form content type on member PATCH",
            Method::PATCH,
            &member_path,
        )
        .token(&t)
        .body_as(Some("application/x-www-form-urlencoded"), "role_id=x")
        .expect(415, "UNSUPPORTED_MEDIA_TYPE"),
        // Path ids that are not UUIDs, and unknown routes.
        case(
            "non-UUID role id",
            Method::GET,
            org.path("/roles/not-a-uuid"),
        )
        .token(&t)
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID role id on PATCH with a bad body",
            Method::PATCH,
            org.path("/roles/123"),
        )
        .token(&t)
        .json_bytes("{oops")
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID role id on DELETE",
            Method::DELETE,
            org.path("/roles/x"),
        )
        .token(&t)
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID member id",
            Method::GET,
            org.path("/members/12345"),
        )
        .token(&t)
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID member id on DELETE",
            Method::DELETE,
            org.path("/members/me"),
        )
        .token(&t)
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID org id",
            Method::GET,
            "/organizations/not-a-uuid/roles",
        )
        .token(&t)
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID org id on admin PATCH",
            Method::PATCH,
            "/admin/organizations/nope",
        )
        .token(&admin)
        .json(json!({"plan": "free"}))
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID token id",
            Method::DELETE,
            "/admin/tokens/not-a-uuid",
        )
        .token(&admin)
        .expect(404, "NOT_FOUND"),
        case(
            "non-UUID user id for a token",
            Method::POST,
            "/admin/users/nope/tokens",
        )
        .token(&admin)
        .json(json!({"kind": "api"}))
        .expect(404, "NOT_FOUND"),
        case("unknown route", Method::GET, "/no/such/route")
            .token(&t)
            .expect(404, "NOT_FOUND"),
        case(
            "unknown route under an org",
            Method::GET,
            org.path("/nonsense"),
        )
        .token(&t)
        .expect(404, "NOT_FOUND"),
        case("PUT on the role list", Method::PUT, &roles)
            .token(&t)
            .json(json!({"name": "Put"}))
            .expect(405, "METHOD_NOT_ALLOWED")
            .allow(&["GET", "POST"]),
        case("DELETE on the member list", Method::DELETE, &members)
            .token(&t)
            .expect(405, "METHOD_NOT_ALLOWED")
            .allow(&["GET", "POST"]),
        case("POST on a role", Method::POST, &role_path)
            .token(&t)
            .json(json!({"name": "Post"}))
            .expect(405, "METHOD_NOT_ALLOWED")
            .allow(&["DELETE", "GET", "PATCH"]),
        case("DELETE on the audit log", Method::DELETE, &audit)
            .token(&t)
            .expect(405, "METHOD_NOT_ALLOWED")
            .allow(&["GET"]),
        // Paging parameters.
        case(
            "bogus audit cursor",
            Method::GET,
            format!("{audit}?cursor=bogus!"),
        )
        .token(&t)
        .expect(400, VF)
        .member("field", json!("cursor")),
        case(
            "bogus role-list cursor",
            Method::GET,
            format!("{roles}?cursor=%25%25"),
        )
        .token(&t)
        .expect(400, VF),
        case("limit=0", Method::GET, format!("{roles}?limit=0"))
            .token(&t)
            .expect(400, VF)
            .member("field", json!("limit")),
        case("limit=201", Method::GET, format!("{audit}?limit=201"))
            .token(&t)
            .expect(400, VF)
            .member("field", json!("limit")),
        case("limit=-1", Method::GET, format!("{members}?limit=-1"))
            .token(&t)
            .expect(400, VF)
            .member("field", json!("limit")),
        case("limit=abc", Method::GET, format!("{audit}?limit=abc"))
            .token(&t)
            .expect(400, VF)
            .member("field", json!("limit")),
        case("limit=1.5", Method::GET, format!("{members}?limit=1.5"))
            .token(&t)
            .expect(400, VF),
        // Admin API values.
        case(
            "bad plan on admin org create",
            Method::POST,
            "/admin/organizations",
        )
        .token(&admin)
        .json(json!({"name": "Bad Plan", "plan": "platinum", "owner_user_id": org.owner_id}))
        .expect(400, VF),
        case(
            "non-UUID owner on admin org create",
            Method::POST,
            "/admin/organizations",
        )
        .token(&admin)
        .json(json!({"name": "Bad Owner", "plan": "free", "owner_user_id": "someone"}))
        .expect(400, VF)
        .member("field", json!("owner_user_id")),
        case(
            "bad plan on admin org PATCH",
            Method::PATCH,
            format!("/admin/organizations/{}", org.id),
        )
        .token(&admin)
        .json(json!({"plan": "gold"}))
        .expect(400, VF),
        case(
            "bad email on admin user create",
            Method::POST,
            "/admin/users",
        )
        .token(&admin)
        .json(json!({"email": "not-an-email"}))
        .expect(400, VF),
        case(
            "email with spaces on admin user create",
            Method::POST,
            "/admin/users",
        )
        .token(&admin)
        .json(json!({"email": "a b@example.test"}))
        .expect(400, VF),
        case(
            "bad token kind",
            Method::POST,
            format!("/admin/users/{member}/tokens"),
        )
        .token(&admin)
        .json(json!({"kind": "root"}))
        .expect(400, VF),
        // Authentication.
        case("no Authorization header", Method::POST, &roles)
            .json(json!({"name": "Anon"}))
            .expect(401, "UNAUTHENTICATED"),
        case("Basic credentials", Method::GET, &roles)
            .header("Authorization", "Basic x")
            .expect(401, "UNAUTHENTICATED"),
        case("Bearer with no token", Method::GET, &roles)
            .header("Authorization", "Bearer")
            .expect(401, "UNAUTHENTICATED"),
        case("token without a scheme", Method::GET, &roles)
            .header("Authorization", t.as_str())
            .expect(401, "UNAUTHENTICATED"),
        case("unknown bearer token", Method::DELETE, &role_path)
            .token("not-a-real-token-0123456789abcdef0123456789")
            .expect(401, "UNAUTHENTICATED"),
        case("admin token on /me", Method::GET, "/me")
            .token(&admin)
            .expect(401, "UNAUTHENTICATED"),
        case("admin token on an org route", Method::POST, &roles)
            .token(&admin)
            .json(json!({"name": "Admin"}))
            .expect(401, "UNAUTHENTICATED"),
        case("user token on /admin/users", Method::POST, "/admin/users")
            .token(&t)
            .json(json!({"email": "sneaky@example.test"}))
            .expect(401, "UNAUTHENTICATED"),
        case(
            "member token on admin org PATCH",
            Method::PATCH,
            format!("/admin/organizations/{}", org.id),
        )
        .token(&member_token)
        .json(json!({"plan": "free"}))
        .expect(401, "UNAUTHENTICATED"),
    ];
    assert!(cases.len() >= 30);

    // Every case is checked; all failures are reported together, each
    // naming its case. State is compared with the state just before the
    // case (so a change is blamed on the case that made it) and, at the
    // end, with the state before all cases.
    let initial = snapshot(&app, &org).await;
    let mut previous = initial.clone();
    let mut failures: Vec<String> = Vec::new();
    for case in cases {
        let name = case.name;
        let reply = app
            .raw(Req {
                method: case.method,
                path: case.path,
                token: case.token.as_deref(),
                body: case.body,
                content_type: case.content_type,
                headers: case.headers,
            })
            .await;
        let text = String::from_utf8_lossy(&reply.body).into_owned();
        let mut fail = |what: String| failures.push(format!("case {name:?}: {what}"));
        let body = reply.json();
        let got = (reply.status, body["code"].as_str().unwrap_or(""));
        if !(400..500).contains(&reply.status) {
            fail(format!("status {} is not 4xx; body: {text}", reply.status));
        } else {
            if got != (case.status, case.code) {
                fail(format!(
                    "expected {} {}, got {} {:?}; body: {text}",
                    case.status, case.code, got.0, got.1
                ));
            }
            let content_type = reply.header("content-type");
            if content_type != "application/problem+json" {
                fail(format!("content type is {content_type:?}"));
            }
            if body["type"] != json!("about:blank")
                || body["status"] != json!(reply.status)
                || !body["title"].is_string()
                || !body["detail"].is_string()
            {
                fail(format!("not a problem body: {text}"));
            }
            for (member, value) in &case.members {
                if &body[*member] != value {
                    fail(format!("member {member} should be {value}; body: {text}"));
                }
            }
            if case.status == 401 {
                let challenge = reply.header("www-authenticate");
                if !challenge.starts_with("Bearer") {
                    fail(format!("WWW-Authenticate is {challenge:?}"));
                }
            }
            if let Some(methods) = case.allow {
                let allow = reply.header("allow");
                let mut listed: Vec<String> = allow
                    .split(',')
                    .map(|m| m.trim().to_owned())
                    .filter(|m| !m.is_empty())
                    .collect();
                listed.sort();
                if listed != methods.to_vec() {
                    fail(format!("Allow is {allow:?}, expected {methods:?}"));
                }
            }
        }
        let now = snapshot(&app, &org).await;
        if now != previous {
            fail(format!("changed state: {}", changes(&previous, &now)));
        }
        previous = now;
    }
    if previous != initial {
        failures.push(format!(
            "state after all cases differs from before: {}",
            changes(&initial, &previous)
        ));
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
