//! `rolecall storage copy`: a populated single-node installation (sled)
//! moved into an empty PostgreSQL database, after which a PostgreSQL node
//! answers exactly what the sled node answered and delivers what was
//! still pending, signed with the same secret; a database that is not
//! empty is refused and left as it was.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use rolecall::secrets::SealingKey;
use serde_json::{json, Value};

use crate::engines::{on_database, Engine};
use crate::helpers::{eventually, Running, ADMIN};
use crate::receiver::{Behavior, TestReceiver};
use crate::secrets_at_rest::{org_with_webhook, LOOPBACK};
use crate::webhook_delivery::service_signature;

/// `rolecall storage copy --from <dir> --to <url>` with `env`.
fn storage_copy(from: &Path, to: &str, env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rolecall"))
        .args(["storage", "copy", "--from"])
        .arg(from)
        .args(["--to", to])
        .envs(env.iter().copied())
        .output()
        .expect("rolecall storage copy runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Rows per table of the database at `url`.
fn row_counts(url: &str) -> Vec<(String, i64)> {
    on_database(url, |client| async move {
        let mut counts = Vec::new();
        for table in [
            "users",
            "tokens",
            "organizations",
            "roles",
            "memberships",
            "webhooks",
            "audit_log",
            "resources",
            "outbox",
            "delivery_log",
            "admin_token",
        ] {
            let row = client
                .query_one(&format!("SELECT count(*) FROM {table}"), &[])
                .await
                .expect("count");
            counts.push((table.to_owned(), row.get::<_, i64>(0)));
        }
        counts
    })
}

/// What an organization's owner reads, path by path (the delivery log,
/// which the node adds to as it delivers, apart).
async fn answers(server: &Running, org: &str, token: &str) -> Vec<(String, Value)> {
    let mut read = Vec::new();
    for path in [
        "",
        "/roles",
        "/members",
        "/audit-log?limit=200",
        "/tasks",
        "/decisions",
        "/projects",
        "/webhook",
    ] {
        let path = format!("/organizations/{org}{path}");
        let body = server.get(&path, token).await.expect(200).json();
        read.push((path, body));
    }
    read
}

#[actix_web::test]
async fn a_copied_installation_serves_the_same_on_postgres_and_delivers_what_was_pending() {
    let Some(engine) = Engine::postgres("storage_copy") else {
        return;
    };
    let Engine::Postgres(databases) = engine else {
        unreachable!("postgres() gives PostgreSQL")
    };
    let sled_dir = tempfile::tempdir().expect("tempdir");
    let pg_dir = tempfile::tempdir().expect("tempdir");
    let url = databases.url_for(pg_dir.path());
    let key = SealingKey::generate().expose();
    let keyed = [("ROLECALL_STORAGE__SECRET_KEY", key.as_str())];
    let receiver = TestReceiver::start().await;
    let sled_env = [
        LOOPBACK[0],
        LOOPBACK[1],
        keyed[0],
        ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "100"),
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "120000"),
    ];

    // A generated admin token, stored as its hash.
    let mut first = Running::start(sled_dir.path(), &[("ROLECALL_ADMIN__TOKEN", "")]);
    let generated = std::fs::read_to_string(sled_dir.path().join("admin-token"))
        .expect("admin-token written")
        .trim()
        .to_owned();
    first
        .post(
            "/admin/users",
            &generated,
            json!({"email": "first@copy.test"}),
        )
        .await
        .expect(201);
    first.stop_gracefully().await;

    // An organization with a custom role, a member, resources, a webhook
    // with a delivery log (a failed attempt, then its retry).
    let mut server = Running::start(sled_dir.path(), &sled_env);
    let (org, token, secret) = org_with_webhook(&server, &receiver).await;
    let base = format!("/organizations/{org}");
    server
        .patch(
            &format!("/admin/organizations/{org}"),
            ADMIN,
            json!({"plan": "enterprise"}),
        )
        .await
        .expect(200);
    let editor = server
        .post(
            &format!("{base}/roles"),
            &token,
            json!({"name": "Editor", "permissions": ["org:tasks:read", "org:tasks:create"]}),
        )
        .await
        .expect(201)
        .json();
    let (member, member_token) = server.user(ADMIN, "member@copy.test").await;
    server
        .post(
            &format!("{base}/members"),
            &token,
            // Its role ends in 30 days: the expiry travels with the membership.
            json!({"user_id": member, "role_id": editor["id"], "role_expires_at": rolecall::time::Timestamp(rolecall::time::Timestamp::now().millis() + 30 * 86_400_000).to_rfc3339()}),
        )
        .await
        .expect(201);
    server
        .post(
            &format!("{base}/decisions"),
            &token,
            json!({"title": "Use Postgres", "statement": "We use Postgres."}),
        )
        .await
        .expect(201);
    server
        .post(
            &format!("{base}/projects"),
            &token,
            json!({"name": "api", "repository_url": "https://example.test/acme/api"}),
        )
        .await
        .expect(201);
    receiver.script(vec![Behavior::status(500)]);
    server
        .post(&format!("{base}/tasks"), &token, json!({"title": "logged"}))
        .await
        .expect(201);
    // The test's preflight, the failed attempt and its retry.
    receiver.wait_for(3, Duration::from_secs(10)).await;
    let log_before = eventually(Duration::from_secs(10), "the retry logged", || async {
        let log = server
            .get(&format!("{base}/webhook/deliveries?limit=200"), &token)
            .await
            .expect(200)
            .json()["items"]
            .clone();
        let retried = log.as_array().is_some_and(|items| {
            items
                .iter()
                .any(|r| r["event"] == "task.created" && r["outcome"] == "succeeded")
        });
        retried.then_some(log)
    })
    .await;
    let logged = log_before.as_array().map_or(0, Vec::len);

    // Three deliveries still pending when the node dies: their attempts hang.
    receiver.set(Behavior::slow(Duration::from_secs(600)));
    let mut pending = Vec::new();
    for title in ["pending 1", "pending 2", "pending 3"] {
        let task = server
            .post(&format!("{base}/tasks"), &token, json!({"title": title}))
            .await
            .expect(201)
            .json();
        pending.push(task["id"].as_str().expect("task id").to_owned());
    }
    let hung = receiver.wait_for(6, Duration::from_secs(10)).await;
    let delivery_ids: Vec<String> = hung[3..]
        .iter()
        .map(|r| r.header("x-service-delivery"))
        .collect();
    let before = answers(&server, &org, &token).await;
    let expiring = before
        .iter()
        .find(|(path, _)| path.ends_with("/members"))
        .and_then(|(_, body)| body["items"].as_array().cloned())
        .unwrap_or_default();
    assert_eq!(
        expiring
            .iter()
            .filter(|m| m["role_expires_at"].is_string())
            .count(),
        1,
        "the member's expiry is among what must survive the copy: {expiring:?}"
    );
    let member_view = server
        .get(&format!("{base}/tasks"), &member_token)
        .await
        .expect(200)
        .json();
    server.kill_hard();

    // The copy: a progress bar, then counts that match.
    let copied = storage_copy(sled_dir.path(), &url, &keyed);
    let (stdout, stderr) = (text(&copied.stdout), text(&copied.stderr));
    assert!(copied.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("records (100%)"), "progress: {stderr}");
    assert!(stdout.contains("counts match the source"), "{stdout}");
    let counts = row_counts(&url);
    let count = |table: &str| {
        counts
            .iter()
            .find(|(t, _)| t == table)
            .map(|(_, n)| *n)
            .unwrap_or(-1)
    };
    assert_eq!(count("organizations"), 1, "{counts:?}");
    assert_eq!(count("users"), 3, "{counts:?}");
    assert_eq!(count("roles"), 3, "Owner, Member, Editor: {counts:?}");
    assert_eq!(count("memberships"), 2, "{counts:?}");
    assert_eq!(count("webhooks"), 1, "{counts:?}");
    assert_eq!(count("resources"), 6, "{counts:?}");
    assert_eq!(count("outbox"), 3, "the pending deliveries: {counts:?}");
    assert_eq!(count("delivery_log"), logged as i64, "{counts:?}");
    assert_eq!(count("admin_token"), 1, "{counts:?}");
    assert!(count("audit_log") >= 4, "{counts:?}");
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    assert!(
        stdout.contains(&format!("copied {total} records")),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!("{total} of {total} records (100%)")),
        "{stderr}"
    );

    // The secret is still sealed in the database.
    let stored: Vec<String> = on_database(&url, |client| async move {
        let rows = client
            .query("SELECT secret FROM webhooks", &[])
            .await
            .expect("secrets");
        rows.iter().map(|row| row.get::<_, String>(0)).collect()
    });
    assert!(SealingKey::is_sealed(&stored[0]), "sealed: {}", stored[0]);
    let encoded = secret.strip_prefix("whsec_").expect("whsec_ secret");
    assert!(!stored[0].contains(encoded), "a secret is stored in clear");

    // A second copy into the same database is refused and changes nothing.
    let again = storage_copy(sled_dir.path(), &url, &keyed);
    assert!(!again.status.success());
    let refusal = text(&again.stderr);
    assert!(
        refusal.contains("the target database is not empty")
            && refusal.contains("organizations: 1"),
        "{refusal}"
    );
    assert_eq!(row_counts(&url), counts);

    // The PostgreSQL node: the same answers, the same admin token, and the
    // pending deliveries delivered, signed with the copied secret.
    receiver.set(Behavior::ok());
    let seen = receiver.received().len();
    let pg_env = [
        LOOPBACK[0],
        LOOPBACK[1],
        keyed[0],
        ("ROLECALL_ADMIN__TOKEN", ""),
        ("ROLECALL_STORAGE__BACKEND", "postgres"),
        ("ROLECALL_STORAGE__POSTGRES_URL", url.as_str()),
    ];
    let node = Running::start(pg_dir.path(), &pg_env);
    assert_eq!(answers(&node, &org, &token).await, before);
    assert_eq!(
        node.get(&format!("{base}/tasks"), &member_token)
            .await
            .expect(200)
            .json(),
        member_view
    );
    node.post(
        "/admin/users",
        &generated,
        json!({"email": "node@copy.test"}),
    )
    .await
    .expect(201);
    node.post("/admin/users", ADMIN, json!({"email": "refused@copy.test"}))
        .await
        .expect(401);

    let arrived = receiver.wait_for(seen + 3, Duration::from_secs(20)).await;
    let mut redelivered: Vec<String> = Vec::new();
    for request in &arrived[seen..] {
        assert_eq!(
            request.header("x-service-signature"),
            service_signature(&secret, &request.body),
            "signed with the copied secret"
        );
        redelivered.push(request.header("x-service-delivery"));
    }
    redelivered.sort();
    let mut expected = delivery_ids.clone();
    expected.sort();
    assert_eq!(redelivered, expected, "the pending deliveries, once each");
    let titles: Vec<Value> = arrived[seen..]
        .iter()
        .map(|r| r.json()["data"]["title"].clone())
        .collect();
    for title in ["pending 1", "pending 2", "pending 3"] {
        assert!(titles.contains(&json!(title)), "{titles:?}");
    }
    assert_eq!(pending.len(), 3);

    // The delivery log: the copied records, under the new ones.
    let log = eventually(
        Duration::from_secs(10),
        "the new attempts logged",
        || async {
            let log = node
                .get(&format!("{base}/webhook/deliveries?limit=200"), &token)
                .await
                .expect(200)
                .json()["items"]
                .clone();
            (log.as_array().map(Vec::len) == Some(logged + 3)).then_some(log)
        },
    )
    .await;
    assert_eq!(
        log.as_array().map(|items| items[3..].to_vec()),
        log_before.as_array().cloned()
    );
}

#[test]
fn a_directory_without_rolecall_data_is_refused_and_nothing_is_created() {
    let Some(Engine::Postgres(databases)) = Engine::postgres("storage_copy::empty_source") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let url = databases.url_for(dir.path());
    let missing = dir.path().join("no-such-dir");
    let refused = storage_copy(&missing, &url, &[]);
    assert!(!refused.status.success());
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("holds no rolecall data (no sled database in it)"),
        "{stderr}"
    );
    assert!(!missing.exists(), "the copy must not create the source");
}
