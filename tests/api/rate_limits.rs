//! Per-token rate limits (issue 18): a token bucket per bearer token, 429
//! RATE_LIMITED with `Retry-After` over it (and nothing changed), the IETF
//! RateLimit fields on every limited answer, a bucket of its own for the admin
//! token, probes not limited, and a refill after the wait it announced.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, Reply};

const LIMITS: &[(&str, &str)] = &[
    ("ROLECALL_API__RATE_LIMIT_PER_SECOND", "1"),
    ("ROLECALL_API__RATE_LIMIT_BURST", "10"),
];

fn number(reply: &Reply, name: &str) -> u64 {
    reply
        .header(name)
        .parse()
        .unwrap_or_else(|_| panic!("{name}: {:?}", reply.header(name)))
}

fn has_rate_headers(reply: &Reply) -> bool {
    ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]
        .iter()
        .any(|name| reply.headers.contains_key(*name))
}

#[actix_web::test]
async fn over_the_limit_a_token_gets_429_and_nothing_changes() {
    let app = spawn_app_with(LIMITS).await;
    let org = app.org("enterprise").await;
    let (_, other_token) = app.user("other@example.test").await;

    // Creates roles until the owner's bucket runs dry; each answer says how much is left.
    let mut created = Vec::new();
    let mut last_remaining = u64::MAX;
    let refused = loop {
        let name = format!("Role {}", created.len());
        let reply = app
            .post(&org.path("/roles"), &org.owner_token, json!({"name": name}))
            .await;
        assert_eq!(number(&reply, "ratelimit-limit"), 10);
        if reply.status == 429 {
            break (name, reply);
        }
        assert_eq!(
            reply.status,
            201,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        let remaining = number(&reply, "ratelimit-remaining");
        // Never more than one request's worth taken; a refill may add one back.
        assert!(remaining < 10 && remaining <= last_remaining.saturating_add(1));
        let reset = number(&reply, "ratelimit-reset");
        assert!((1..=10).contains(&reset), "reset {reset}");
        last_remaining = remaining;
        created.push(name);
        assert!(
            created.len() < 30,
            "no 429 after {} requests",
            created.len()
        );
    };
    // The owner's first request (reading the roles in `org`) took one too.
    assert!(
        created.len() >= 8,
        "{} created before the 429",
        created.len()
    );
    let (refused_name, reply) = refused;
    let problem = reply.problem(429, "RATE_LIMITED");
    assert!(problem["detail"]
        .as_str()
        .is_some_and(|d| d.contains("try again")));
    let retry_after = number(&reply, "retry-after");
    assert!((1..=2).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(number(&reply, "ratelimit-remaining"), 0);
    assert!((1..=10).contains(&number(&reply, "ratelimit-reset")));

    // Other tokens have buckets of their own, the admin token included.
    let me = app.get("/me", &other_token).await.expect(200);
    assert_eq!(number(&me, "ratelimit-limit"), 10);
    let admin = app
        .post(
            "/admin/users",
            &app.admin,
            json!({"email": "third@example.test"}),
        )
        .await
        .expect(201);
    assert_eq!(
        number(&admin, "ratelimit-limit"),
        10,
        "limited too, in a bucket of its own"
    );
    assert!(number(&admin, "ratelimit-remaining") < 10);
    // Probes and metrics are never limited, nor answered with the fields.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let reply = app.get(path, &org.owner_token).await.expect(200);
        assert!(!has_rate_headers(&reply), "{path}");
    }
    // Without a token there is no bucket: the 401 is the answer.
    let anonymous = app
        .call(actix_web::http::Method::GET, "/me", None, None)
        .await;
    anonymous.problem(401, "UNAUTHENTICATED");
    assert!(!has_rate_headers(&anonymous));

    // After the announced wait the token works again, and the refused role does not exist.
    actix_web::rt::time::sleep(Duration::from_secs(retry_after) + Duration::from_millis(200)).await;
    let roles = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200);
    assert!(number(&roles, "ratelimit-remaining") < 10);
    let names: Vec<Value> = roles.json()["items"]
        .as_array()
        .map(|items| items.iter().map(|r| r["name"].clone()).collect())
        .unwrap_or_default();
    assert!(!names.contains(&json!(refused_name)), "{names:?}");
    for name in &created {
        assert!(names.contains(&json!(name)), "{name} in {names:?}");
    }
    actix_web::rt::time::sleep(Duration::from_millis(1100)).await;
    let audit = app.audit(&org).await;
    let role_records = audit
        .iter()
        .filter(|r| r["action"] == json!("role.created"))
        .count();
    assert_eq!(role_records, created.len());
}

#[actix_web::test]
async fn limits_are_off_by_default() {
    let app = spawn_app().await;
    let (_, token) = app.user("fast@example.test").await;
    for _ in 0..50 {
        let reply = app.get("/me", &token).await.expect(200);
        assert!(!has_rate_headers(&reply));
    }
}

/// Every operation a token calls documents the 429 and its `Retry-After`.
#[actix_web::test]
async fn the_document_says_where_a_429_may_come() {
    let app = spawn_app().await;
    let doc = app
        .call(actix_web::http::Method::GET, "/openapi.json", None, None)
        .await
        .expect(200)
        .json();
    let mut secured = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let needs_token = operation["security"]
                .as_array()
                .is_some_and(|s| !s.is_empty());
            let limited = &operation["responses"]["429"];
            if needs_token {
                secured += 1;
                assert!(
                    limited["headers"]["Retry-After"].is_object(),
                    "{method} {path}: {limited}"
                );
                assert_eq!(
                    limited["content"]["application/problem+json"]["schema"]["$ref"],
                    json!("#/components/schemas/Problem"),
                    "{method} {path}"
                );
            } else {
                assert!(limited.is_null(), "{method} {path} needs no token");
            }
        }
    }
    assert!(secured > 60, "{secured} operations take a token");
}

/// Issue 29, finding 3: the bucket belongs to the token, not to the
/// header's spelling. `Bearer` followed by 1 to 36 spaces names one token,
/// as authentication reads it, so the spellings share one bucket of 3.
#[actix_web::test]
async fn every_spelling_of_a_token_shares_its_bucket() {
    let app = spawn_app_with(&[
        ("ROLECALL_API__RATE_LIMIT_PER_SECOND", "1"),
        ("ROLECALL_API__RATE_LIMIT_BURST", "3"),
    ])
    .await;
    let (_, token) = app.user("spaces@example.test").await;
    let started = std::time::Instant::now();
    let mut statuses = Vec::new();
    for spaces in 1..=36 {
        let header = format!("Bearer{}{token}", " ".repeat(spaces));
        let reply = app
            .raw(
                crate::helpers::Req::json(actix_web::http::Method::GET, "/me", None, None)
                    .header("Authorization", header),
            )
            .await;
        statuses.push(reply.status);
    }
    let seconds = started.elapsed().as_secs();
    let allowed = statuses.iter().filter(|s| **s == 200).count() as u64;
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    // The burst, plus what the bucket refilled at 1/s while the loop ran.
    assert!(
        (3..=4 + seconds).contains(&allowed),
        "{allowed} of 36 allowed in {seconds} s: {statuses:?}"
    );
    assert_eq!(&statuses[..3], [200, 200, 200]);
}
