//! Several nodes on one PostgreSQL database (CONTRACT §8): the promises
//! the cluster keeps, tested with real nodes (child processes) on one
//! database over real HTTP.

use std::path::Path;

use serde_json::json;

use crate::engines::{on_database, Engine};
use crate::helpers::{launch_binary, Running, ADMIN};

/// The settings that put a node on the database at `url`, with a
/// generated admin token.
fn node_env(url: &str) -> [(&str, &str); 3] {
    [
        ("ROLECALL_STORAGE__BACKEND", "postgres"),
        ("ROLECALL_STORAGE__POSTGRES_URL", url),
        ("ROLECALL_ADMIN__TOKEN", ""),
    ]
}

/// The advisory lock nodes take to migrate ("rolecall" in ASCII).
const MIGRATION_LOCK: i64 = 0x726f_6c65_6361_6c6c;

/// Holds the migration lock on `url` until dropped, so that nodes started
/// meanwhile wait at it and go on together.
struct HeldLock {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HeldLock {
    fn take(url: &str) -> HeldLock {
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let url = url.to_owned();
        let thread = std::thread::spawn(move || {
            on_database(&url, move |client| async move {
                client
                    .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
                    .await
                    .expect("lock");
                locked_tx.send(()).expect("locked");
                let _ = tokio::task::spawn_blocking(move || released.recv()).await;
                client
                    .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
                    .await
                    .expect("unlock");
            })
        });
        locked_rx.recv().expect("the lock is taken");
        HeldLock {
            release: Some(release),
            thread: Some(thread),
        }
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The admin token in `dir`'s admin-token file, if there is one.
fn admin_token_in(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("admin-token"))
        .ok()
        .map(|token| token.trim().to_owned())
}

/// How the three nodes of a round start.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    /// On an empty database: they race to create the schema.
    Empty,
    /// On a migrated database, held at the migration lock and released
    /// together: they race for the admin token as they leave it.
    Released,
}

/// Starts three nodes at once on a new database, as `start` says; checks
/// that they share one schema and one admin token that works on each.
async fn three_nodes(databases: &crate::engines::Databases, start: Start) {
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let url = databases.url_for(dirs[0].path());
    let env = node_env(&url);
    let held = (start == Start::Released).then(|| {
        let migrated = std::process::Command::new(env!("CARGO_BIN_EXE_rolecall"))
            .arg("migrate")
            .env("ROLECALL_STORAGE__POSTGRES_URL", &url)
            .output()
            .expect("migrate runs");
        assert!(migrated.status.success(), "{migrated:?}");
        HeldLock::take(&url)
    });
    let launched: Vec<_> = dirs
        .iter()
        .map(|dir| launch_binary(dir.path(), &env))
        .collect();
    if let Some(held) = held {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(held);
    }
    let nodes: Vec<Running> = launched
        .into_iter()
        .map(|node| Running {
            server: node.listening().0,
            client: crate::helpers::client(),
        })
        .collect();

    let tokens: Vec<String> = dirs
        .iter()
        .filter_map(|dir| admin_token_in(dir.path()))
        .collect();
    assert_eq!(tokens.len(), 1, "one node keeps the cluster's admin token");
    for (i, node) in nodes.iter().enumerate() {
        node.post(
            "/admin/users",
            &tokens[0],
            json!({"email": format!("node-{i}@cluster.test")}),
        )
        .await
        .expect(201);
    }
    let (versions, hashes) = on_database(&url, |client| async move {
        let count = async |sql: &str| {
            client
                .query_one(sql, &[])
                .await
                .expect("count")
                .get::<_, i64>(0)
        };
        (
            count("SELECT count(*) FROM rolecall_schema").await,
            count("SELECT count(*) FROM admin_token").await,
        )
    });
    assert_eq!(
        (versions, hashes),
        (2, 1),
        "one row per schema version (2), one admin token"
    );
}

#[actix_web::test]
async fn three_nodes_starting_at_once_share_one_schema_and_one_admin_token() {
    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::three_nodes_start") else {
        return;
    };
    // The admin-token race is narrow: a few rounds make it happen.
    three_nodes(&databases, Start::Empty).await;
    for _ in 0..4 {
        three_nodes(&databases, Start::Released).await;
    }
}

/// Two nodes on one new database (the tests' admin token).
struct Pair {
    a: Running,
    b: Running,
    _dirs: [tempfile::TempDir; 2],
}

fn two_nodes(databases: &crate::engines::Databases) -> Pair {
    two_nodes_with(databases, &[])
}

/// Two nodes on one new database, with `extra` settings.
fn two_nodes_with(databases: &crate::engines::Databases, extra: &[(&str, &str)]) -> Pair {
    let dirs = [
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    ];
    let url = databases.url_for(dirs[0].path());
    let mut env = vec![
        ("ROLECALL_STORAGE__BACKEND", "postgres"),
        ("ROLECALL_STORAGE__POSTGRES_URL", url.as_str()),
    ];
    env.extend_from_slice(extra);
    Pair {
        a: Running::start(dirs[0].path(), &env),
        b: Running::start(dirs[1].path(), &env),
        _dirs: dirs,
    }
}

/// An enterprise organization made on `node`: (org path, owner token).
async fn enterprise_org(node: &Running, name: &str) -> (String, String) {
    let (org, owner) = node.org(ADMIN, name).await;
    node.patch(
        &format!("/admin/organizations/{org}"),
        ADMIN,
        json!({"plan": "enterprise"}),
    )
    .await
    .expect(200);
    (format!("/organizations/{org}"), owner)
}

/// The id in a JSON answer.
fn id_of(value: &serde_json::Value) -> String {
    value["id"].as_str().expect("id").to_owned()
}

#[actix_web::test]
async fn a_change_answered_by_one_node_is_in_force_on_the_next_request_to_the_other() {
    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::next_request") else {
        return;
    };
    let Pair { a, b, .. } = two_nodes(&databases);
    let (org, owner) = enterprise_org(&a, "Fresh").await;
    let readers = a
        .post(
            &format!("{org}/roles"),
            &owner,
            json!({"name": "Readers", "permissions": ["org:team:read"]}),
        )
        .await
        .expect(201)
        .json();
    let role = format!("{org}/roles/{}", id_of(&readers));
    let (member, member_token) = a.user(ADMIN, "reader@cluster.test").await;
    b.post(
        &format!("{org}/members"),
        &owner,
        json!({"user_id": member, "role_id": id_of(&readers)}),
    )
    .await
    .expect(201);

    // The role's permission removed and restored, five times, each change
    // on one node and the next request on the other.
    let members = format!("{org}/members");
    for round in 0..5 {
        let (writer, reader) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        reader.get(&members, &member_token).await.expect(200);
        writer
            .patch(&role, &owner, json!({"permissions": ["org:tasks:read"]}))
            .await
            .expect(200);
        reader
            .get(&members, &member_token)
            .await
            .problem(403, "FORBIDDEN");
        writer
            .patch(&role, &owner, json!({"permissions": ["org:team:read"]}))
            .await
            .expect(200);
        reader.get(&members, &member_token).await.expect(200);
    }

    // A member removed on one node is gone on the next request to the other.
    b.get(&members, &member_token).await.expect(200);
    a.delete(&format!("{members}/{member}"), &owner)
        .await
        .expect(204);
    b.get(&members, &member_token)
        .await
        .problem(404, "NOT_FOUND");

    // A token revoked on one node is refused on the next request to the other.
    let (_, doomed) = a.user(ADMIN, "doomed@cluster.test").await;
    b.get("/me", &doomed).await.expect(200);
    let me = b.get("/me", &doomed).await.expect(200).json();
    let doomed_user = me["user"]["id"].as_str().expect("user id").to_owned();
    let issued = a
        .post(
            &format!("/admin/users/{doomed_user}/tokens"),
            ADMIN,
            json!({"kind": "api"}),
        )
        .await
        .expect(201)
        .json();
    let second = issued["token"].as_str().expect("token").to_owned();
    b.get("/me", &second).await.expect(200);
    a.delete(&format!("/admin/tokens/{}", id_of(&issued)), ADMIN)
        .await
        .expect(204);
    b.get("/me", &second).await.problem(401, "UNAUTHENTICATED");
    b.get("/me", &doomed).await.expect(200);
}

#[actix_web::test]
async fn racing_creates_of_one_name_on_two_nodes_make_exactly_one_role() {
    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::racing_creates") else {
        return;
    };
    let Pair { a, b, .. } = two_nodes(&databases);
    let (org, owner) = enterprise_org(&a, "Race").await;
    b.get(&format!("{org}/roles"), &owner).await.expect(200);
    let path = format!("{org}/roles");
    let body = json!({"name": "Reviewers", "permissions": ["org:team:read"]});
    let creates = (0..40).map(|i| {
        let node = if i % 2 == 0 { &a } else { &b };
        node.post(&path, &owner, body.clone())
    });
    let answers = futures_util::future::join_all(creates).await;
    let mut statuses: Vec<u16> = answers.iter().map(|reply| reply.status).collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        39,
        "{statuses:?}"
    );
    for reply in answers.iter().filter(|reply| reply.status == 409) {
        reply.problem(409, "NAME_CONFLICT");
    }
    for node in [&a, &b] {
        let roles = node
            .get(&format!("{org}/roles"), &owner)
            .await
            .expect(200)
            .json();
        let reviewers = roles["items"]
            .as_array()
            .map(|items| items.iter().filter(|r| r["name"] == "Reviewers").count());
        assert_eq!(reviewers, Some(1), "{roles}");
    }
}

#[actix_web::test]
async fn racing_owner_demotions_on_two_nodes_never_leave_the_organization_without_an_owner() {
    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::owner_races") else {
        return;
    };
    let Pair { a, b, .. } = two_nodes(&databases);
    let (org, first_token) = enterprise_org(&a, "Owners").await;
    let roles = a
        .get(&format!("{org}/roles"), &first_token)
        .await
        .expect(200)
        .json();
    let (owner_role, member_role) = (id_of(&roles["items"][0]), id_of(&roles["items"][1]));
    let me = a.get("/me", &first_token).await.expect(200).json();
    let first = me["user"]["id"].as_str().expect("user id").to_owned();
    let (second, second_token) = a.user(ADMIN, "second-owner@cluster.test").await;
    a.post(
        &format!("{org}/members"),
        &first_token,
        json!({"user_id": second, "role_id": owner_role}),
    )
    .await
    .expect(201);

    for round in 0..10 {
        // Each owner demotes the other, on different nodes, at once.
        let (demote_second, demote_first) = (
            format!("{org}/members/{second}"),
            format!("{org}/members/{first}"),
        );
        let demote = json!({"role_id": member_role});
        let (one, two) = futures_util::join!(
            a.patch(&demote_second, &first_token, demote.clone()),
            b.patch(&demote_first, &second_token, demote.clone()),
        );
        let won = [one.status, two.status]
            .iter()
            .filter(|s| **s == 200)
            .count();
        assert!(
            won <= 1,
            "round {round}: both demotions passed ({}, {})",
            one.status,
            two.status
        );
        let members = b
            .get(
                &format!("{org}/members"),
                &if one.status == 200 {
                    first_token.clone()
                } else {
                    second_token.clone()
                },
            )
            .await
            .expect(200)
            .json();
        let owners: Vec<String> = members["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|m| m["role_id"] == owner_role.as_str())
            .map(|m| m["user_id"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(owners.len(), 1, "round {round}: one owner left: {members}");
        // The remaining owner promotes the other again.
        let (remaining, demoted) = if owners[0] == first {
            (&first_token, &second)
        } else {
            (&second_token, &first)
        };
        a.patch(
            &format!("{org}/members/{demoted}"),
            remaining,
            json!({"role_id": owner_role}),
        )
        .await
        .expect(200);
    }
}

#[actix_web::test]
async fn a_webhook_tested_on_one_node_is_saved_on_the_other_once() {
    use crate::receiver::TestReceiver;
    use crate::secrets_at_rest::LOOPBACK;
    use crate::webhook_delivery::service_signature;

    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::webhook_test") else {
        return;
    };
    let Pair { a, b, .. } = two_nodes_with(&databases, &LOOPBACK);
    let receiver = TestReceiver::start().await;
    let (org, owner) = enterprise_org(&a, "Hooks").await;
    let (secret, save) = webhook_tested(&a, &org, &owner, &receiver).await;
    b.call(
        actix_web::http::Method::PUT,
        &format!("{org}/webhook"),
        Some(&owner),
        Some(save.clone()),
    )
    .await
    .expect(200);
    a.call(
        actix_web::http::Method::PUT,
        &format!("{org}/webhook"),
        Some(&owner),
        Some(save),
    )
    .await
    .problem(409, "TEST_REQUIRED");

    b.post(&format!("{org}/tasks"), &owner, json!({"title": "hooked"}))
        .await
        .expect(201);
    let received = receiver
        .wait_for(2, std::time::Duration::from_secs(10))
        .await;
    assert_eq!(received[1].header("x-service-event"), "task.created");
    assert_eq!(
        received[1].header("x-service-signature"),
        service_signature(&secret, &received[1].body),
        "signed with the secret the test revealed on the other node"
    );
}

/// A passed webhook test of `org` on `node` for `task.created` at
/// `receiver`: the secret it revealed, and the body that saves it.
async fn webhook_tested(
    node: &Running,
    org: &str,
    owner: &str,
    receiver: &crate::receiver::TestReceiver,
) -> (String, serde_json::Value) {
    let tested = node
        .post(
            &format!("{org}/webhook/test"),
            owner,
            json!({"url": receiver.url, "events": ["task.created"]}),
        )
        .await
        .expect(200)
        .json();
    let secret = tested["secret"].as_str().expect("secret").to_owned();
    (secret, json!({"test_id": tested["test_id"]}))
}

/// Two nodes with an organization on them whose webhook (tested and saved
/// on the first) points at a new receiver: the pair, the org path, the
/// owner's token, the receiver and the secret.
async fn hooked_pair(
    databases: &crate::engines::Databases,
    extra: &[(&str, &str)],
) -> (Pair, String, String, crate::receiver::TestReceiver, String) {
    use crate::secrets_at_rest::LOOPBACK;
    let mut env = LOOPBACK.to_vec();
    env.extend_from_slice(extra);
    let pair = two_nodes_with(databases, &env);
    let receiver = crate::receiver::TestReceiver::start().await;
    let (org, owner) = enterprise_org(&pair.a, "Hooked").await;
    let (secret, save) = webhook_tested(&pair.a, &org, &owner, &receiver).await;
    pair.a
        .call(
            actix_web::http::Method::PUT,
            &format!("{org}/webhook"),
            Some(&owner),
            Some(save),
        )
        .await
        .expect(200);
    (pair, org, owner, receiver, secret)
}

#[actix_web::test]
async fn a_secret_rotated_on_one_node_signs_the_next_attempt_the_other_makes() {
    use crate::receiver::Behavior;
    use crate::webhook_delivery::service_signature;

    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::rotated_secret") else {
        return;
    };
    let (Pair { a, b, .. }, org, owner, receiver, first) =
        hooked_pair(&databases, &[("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "1500")]).await;
    // The first attempt fails; node A retries it 1.5 s later.
    receiver.script(vec![Behavior::status(500)]);
    a.post(&format!("{org}/tasks"), &owner, json!({"title": "retried"}))
        .await
        .expect(201);
    let received = receiver
        .wait_for(2, std::time::Duration::from_secs(10))
        .await;
    assert_eq!(
        received[1].header("x-service-signature"),
        service_signature(&first, &received[1].body)
    );
    // Rotated on B meanwhile; A gets no request in between.
    let rotated = b
        .post(&format!("{org}/webhook/rotate"), &owner, json!({}))
        .await
        .expect(200)
        .json();
    let second = rotated["secret"].as_str().expect("secret").to_owned();
    let received = receiver
        .wait_for(3, std::time::Duration::from_secs(10))
        .await;
    let retry = &received[2];
    assert_eq!(
        retry.header("x-service-delivery"),
        received[1].header("x-service-delivery"),
        "the retry of the same delivery"
    );
    assert_eq!(
        retry.header("x-service-signature"),
        service_signature(&second, &retry.body),
        "signed with the secret rotated on the other node"
    );
}

#[actix_web::test]
async fn events_created_on_both_nodes_are_each_delivered_once() {
    let Some(Engine::Postgres(databases)) = Engine::postgres("cluster::delivered_once") else {
        return;
    };
    let (Pair { a, b, .. }, org, owner, receiver, _) = hooked_pair(&databases, &[]).await;
    let mut created = Vec::new();
    for i in 0..20 {
        let node = if i % 2 == 0 { &a } else { &b };
        let task = node
            .post(
                &format!("{org}/tasks"),
                &owner,
                json!({"title": format!("task {i}")}),
            )
            .await
            .expect(201)
            .json();
        created.push(id_of(&task));
    }
    receiver
        .wait_for(21, std::time::Duration::from_secs(15))
        .await;
    actix_web::rt::time::sleep(std::time::Duration::from_millis(1000)).await;
    let received = receiver.received();
    let deliveries: Vec<String> = received[1..]
        .iter()
        .map(|r| r.header("x-service-delivery"))
        .collect();
    let distinct: std::collections::BTreeSet<&String> = deliveries.iter().collect();
    assert_eq!(deliveries.len(), 20, "no delivery repeated: {deliveries:?}");
    assert_eq!(distinct.len(), 20);
    let mut tasks: Vec<String> = received[1..]
        .iter()
        .map(|r| {
            r.json()["data"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    tasks.sort();
    created.sort();
    assert_eq!(tasks, created, "every event once");
}
