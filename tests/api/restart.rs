//! Durability of the real binary: a graceful restart keeps everything, a
//! SIGKILL loses nothing that was acknowledged, and the admin token is
//! bootstrapped once.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::helpers::{create_task_keyed, send, Reply, Req, Running, ADMIN};

fn str_of(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
        .to_owned()
}

fn items(reply: Reply) -> Vec<Value> {
    let body = reply.expect(200).json();
    assert_eq!(
        body["next_cursor"],
        Value::Null,
        "one page expected: {body}"
    );
    body["items"].as_array().expect("items").clone()
}

/// What the world built by [`graceful_restart_keeps_everything`] consists of.
struct World {
    org: String,
    owner_token: String,
    /// (label, token) of every live token.
    tokens: Vec<(String, String)>,
    revoked: String,
}

/// Everything observable over HTTP, keyed by what it is.
async fn snapshot(server: &Running, world: &World) -> BTreeMap<String, Value> {
    let mut snap = BTreeMap::new();
    let org = format!("/organizations/{}", world.org);
    for (label, token) in &world.tokens {
        let me = server.get("/me", token).await.expect(200).json();
        snap.insert(format!("me of {label}"), me);
    }
    let owner = world.owner_token.as_str();
    let org_body = server.get(&org, owner).await.expect(200).json();
    snap.insert("organization".into(), org_body);
    let roles = items(server.get(&format!("{org}/roles"), owner).await);
    for role in &roles {
        let id = str_of(&role["id"]);
        let reply = server
            .get(&format!("{org}/roles/{id}"), owner)
            .await
            .expect(200);
        let etag = reply.header("etag");
        assert!(!etag.is_empty(), "role GET must answer an ETag");
        snap.insert(
            format!("role {id}"),
            json!({"etag": etag, "body": reply.json()}),
        );
        let holders = items(
            server
                .get(&format!("{org}/roles/{id}/members"), owner)
                .await,
        );
        snap.insert(format!("members of role {id}"), json!(holders));
    }
    snap.insert("roles".into(), json!(roles));
    let members = items(server.get(&format!("{org}/members?limit=200"), owner).await);
    snap.insert("members".into(), json!(members));
    let audit = items(
        server
            .get(&format!("{org}/audit-log?limit=200"), owner)
            .await,
    );
    snap.insert("audit".into(), json!(audit));
    snap
}

#[actix_web::test]
async fn graceful_restart_keeps_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Running::start(dir.path(), &[]);

    // Users and tokens.
    let (owner_id, owner_token) = server.user(ADMIN, "owner@restart.test").await;
    let (alice, alice_token) = server.user(ADMIN, "alice@restart.test").await;
    let (bob, bob_token) = server.user(ADMIN, "bob@restart.test").await;
    let (carol, carol_token) = server.user(ADMIN, "carol@restart.test").await;
    let session = server
        .post(
            &format!("/admin/users/{owner_id}/tokens"),
            ADMIN,
            json!({"kind": "session", "name": "laptop"}),
        )
        .await
        .expect(201)
        .json();
    let session_token = str_of(&session["token"]);
    let doomed = server
        .post(
            &format!("/admin/users/{alice}/tokens"),
            ADMIN,
            json!({"kind": "session", "name": "old phone"}),
        )
        .await
        .expect(201)
        .json();
    let revoked = str_of(&doomed["token"]);
    server.get("/me", &revoked).await.expect(200);
    server
        .delete(&format!("/admin/tokens/{}", str_of(&doomed["id"])), ADMIN)
        .await
        .expect(204);
    server
        .get("/me", &revoked)
        .await
        .problem(401, "UNAUTHENTICATED");

    // An enterprise organization with custom roles.
    let org = server
        .post(
            "/admin/organizations",
            ADMIN,
            json!({"name": "Restart Inc", "plan": "enterprise", "owner_user_id": owner_id}),
        )
        .await
        .expect(201)
        .json();
    let org_id = str_of(&org["id"]);
    let base = format!("/organizations/{org_id}");
    let roles = items(server.get(&format!("{base}/roles"), &owner_token).await);
    let member_role = str_of(&roles[1]["id"]);
    let auditor = server
        .role(
            &base,
            &owner_token,
            "Auditor",
            &["org:settings:read", "org:team:read"],
        )
        .await;
    let inviter = server
        .role(
            &base,
            &owner_token,
            "Inviter",
            &["org:team:invite", "org:team:read"],
        )
        .await;
    let temp = server
        .role(&base, &owner_token, "Temporary", &["org:tags:read"])
        .await;
    server
        .patch(
            &format!("{base}/roles/{auditor}"),
            &owner_token,
            json!({"description": "reads the audit log"}),
        )
        .await
        .expect(200);
    server
        .delete(&format!("{base}/roles/{temp}"), &owner_token)
        .await
        .expect(204);

    // Members: added, one role change, one removal.
    for (user, role_id) in [(&alice, &auditor), (&bob, &member_role), (&carol, &inviter)] {
        server
            .post(
                &format!("{base}/members"),
                &owner_token,
                json!({"user_id": user, "role_id": role_id}),
            )
            .await
            .expect(201);
    }
    server
        .patch(
            &format!("{base}/members/{bob}"),
            &owner_token,
            json!({"role_id": auditor}),
        )
        .await
        .expect(200);
    server
        .delete(&format!("{base}/members/{carol}"), &owner_token)
        .await
        .expect(204);

    // A rename and a plan change.
    server
        .patch(&base, &owner_token, json!({"name": "Restart Corp"}))
        .await
        .expect(200);
    let patched = server
        .patch(&base, &owner_token, json!({"plan": "pro"}))
        .await
        .expect(200)
        .json();
    assert_eq!(patched["plan"], json!("pro"));

    let world = World {
        org: org_id.clone(),
        owner_token: owner_token.clone(),
        tokens: vec![
            ("owner (api)".into(), owner_token.clone()),
            ("owner (session)".into(), session_token.clone()),
            ("alice".into(), alice_token.clone()),
            ("bob".into(), bob_token.clone()),
            ("carol".into(), carol_token.clone()),
        ],
        revoked: revoked.clone(),
    };
    let before = snapshot(&server, &world).await;

    // The snapshot really holds what was built.
    let actions: Vec<&str> = before["audit"]
        .as_array()
        .expect("audit")
        .iter()
        .map(|r| r["action"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        actions,
        [
            "organization.plan_changed",
            "organization.renamed",
            "member.removed",
            "member.role_changed",
            "member.added",
            "member.added",
            "member.added",
            "role.deleted",
            "role.updated",
            "role.created",
            "role.created",
            "role.created",
            "organization.created",
        ]
    );
    let names: Vec<&str> = before["roles"]
        .as_array()
        .expect("roles")
        .iter()
        .map(|r| r["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["Owner", "Member", "Auditor", "Inviter"]);
    assert_eq!(before["members"].as_array().expect("members").len(), 3);
    assert_eq!(before["me of carol"]["memberships"], json!([]));
    assert_eq!(
        before["me of bob"]["memberships"],
        json!([{"organization_id": org_id, "role_id": auditor, "role_name": "Auditor"}])
    );
    assert_eq!(before["organization"]["name"], json!("Restart Corp"));
    assert_eq!(before["organization"]["plan"], json!("pro"));

    server.stop_gracefully().await;
    drop(server);
    let server = Running::start(dir.path(), &[]);

    let after = snapshot(&server, &world).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the same things exist after the restart"
    );
    for (what, value) in &before {
        assert_eq!(
            Some(value),
            after.get(what),
            "{what} changed across the restart"
        );
    }

    // Revoked stays revoked; the plan is still pro (role writes refused).
    server
        .get("/me", &world.revoked)
        .await
        .problem(401, "UNAUTHENTICATED");
    server
        .post(
            &format!("{base}/roles"),
            &owner_token,
            json!({"name": "After restart"}),
        )
        .await
        .problem(402, "LICENSE_REQUIRED");
    // The pre-restart ETag is still current: an If-Match edit with it succeeds.
    server
        .patch(
            &format!("/admin/organizations/{org_id}"),
            ADMIN,
            json!({"plan": "enterprise"}),
        )
        .await
        .expect(200);
    let etag = str_of(&before[&format!("role {inviter}")]["etag"]);
    let edited = server
        .raw_patch_if_match(
            &format!("{base}/roles/{inviter}"),
            &owner_token,
            &etag,
            json!({"description": "edited after restart"}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(edited["description"], json!("edited after restart"));
    // And a new write is still appended after the old audit records.
    let audit = items(
        server
            .get(&format!("{base}/audit-log?limit=200"), &owner_token)
            .await,
    );
    assert_eq!(audit.len(), 15);
    assert_eq!(audit[0]["action"], json!("role.updated"));
    assert_eq!(audit[1]["action"], json!("organization.plan_changed"));
    assert_eq!(
        &audit[2..],
        before["audit"].as_array().expect("audit").as_slice()
    );
}

impl Running {
    /// Creates a role under `base` (an organization path): its id.
    async fn role(&self, base: &str, token: &str, name: &str, keys: &[&str]) -> String {
        let reply = self
            .post(
                &format!("{base}/roles"),
                token,
                json!({"name": name, "description": format!("{name} role"), "permissions": keys}),
            )
            .await
            .expect(201);
        str_of(&reply.json()["id"])
    }

    async fn raw_patch_if_match(&self, path: &str, token: &str, etag: &str, body: Value) -> Reply {
        let req = Req {
            method: Method::PATCH,
            path: path.to_owned(),
            token: Some(token),
            body: Some(body.to_string().into_bytes()),
            content_type: Some("application/json"),
            headers: vec![("If-Match", etag.to_owned())],
        };
        send(&self.client, &self.server.address, req).await
    }
}

#[actix_web::test]
async fn sigkill_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Running::start(dir.path(), &[]);
    let (owner_id, owner_token) = server.user(ADMIN, "owner@kill.test").await;
    let org = server
        .post(
            "/admin/organizations",
            ADMIN,
            json!({"name": "Kill Inc", "plan": "enterprise", "owner_user_id": owner_id}),
        )
        .await
        .expect(201)
        .json();
    let base = format!("/organizations/{}", str_of(&org["id"]));
    let roles = items(server.get(&format!("{base}/roles"), &owner_token).await);
    let member_role = str_of(&roles[1]["id"]);
    let mut invitees = Vec::new();
    for i in 0..20 {
        let user = server
            .post(
                "/admin/users",
                ADMIN,
                json!({"email": format!("invitee-{i:02}@kill.test")}),
            )
            .await
            .expect(201)
            .json();
        invitees.push(str_of(&user["id"]));
    }

    // The burst: 30 role creations and 20 invites, all in flight at once.
    let role_path = format!("{base}/roles");
    let member_path = format!("{base}/members");
    let role_requests = (0..30).map(|i| {
        server.post(
            &role_path,
            &owner_token,
            json!({"name": format!("Burst {i:02}"), "permissions": ["org:decisions:read"]}),
        )
    });
    let invite_requests = invitees.iter().map(|user| {
        server.post(
            &member_path,
            &owner_token,
            json!({"user_id": user, "role_id": member_role}),
        )
    });
    let (role_replies, invite_replies) = futures_util::future::join(
        futures_util::future::join_all(role_requests),
        futures_util::future::join_all(invite_requests),
    )
    .await;
    server.kill_hard();

    let mut created_roles = BTreeMap::new();
    for (i, reply) in role_replies.into_iter().enumerate() {
        let role = reply.expect(201).json();
        assert_eq!(role["name"], json!(format!("Burst {i:02}")));
        created_roles.insert(str_of(&role["id"]), format!("Burst {i:02}"));
    }
    for reply in invite_replies {
        reply.expect(201);
    }
    drop(server);

    let server = Running::start(dir.path(), &[]);
    let listed: BTreeMap<String, String> =
        items(server.get(&format!("{base}/roles"), &owner_token).await)
            .into_iter()
            .skip(2)
            .map(|r| (str_of(&r["id"]), str_of(&r["name"])))
            .collect();
    assert_eq!(listed, created_roles, "every acknowledged role survives");

    let members = items(
        server
            .get(&format!("{base}/members?limit=200"), &owner_token)
            .await,
    );
    let mut listed_members: Vec<(String, String)> = members
        .iter()
        .map(|m| (str_of(&m["user_id"]), str_of(&m["role_id"])))
        .collect();
    listed_members.sort();
    let mut expected: Vec<(String, String)> = invitees
        .iter()
        .map(|u| (u.clone(), member_role.clone()))
        .chain([(owner_id.clone(), str_of(&roles[0]["id"]))])
        .collect();
    expected.sort();
    assert_eq!(
        listed_members, expected,
        "every acknowledged invite survives"
    );

    let audit = items(
        server
            .get(&format!("{base}/audit-log?limit=200"), &owner_token)
            .await,
    );
    assert_eq!(
        audit.len(),
        51,
        "organization.created plus one record per write"
    );
    let count = |action: &str, target: &str| {
        audit
            .iter()
            .filter(|r| r["action"] == json!(action) && r["target_id"] == json!(target))
            .count()
    };
    for role in created_roles.keys() {
        assert_eq!(count("role.created", role), 1, "role.created for {role}");
    }
    for user in &invitees {
        assert_eq!(count("member.added", user), 1, "member.added for {user}");
    }
}

#[actix_web::test]
async fn admin_token_is_generated_once_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("data");
    let env = [("ROLECALL_ADMIN__TOKEN", "")];
    let mut server = Running::start(&data_dir, &env);

    let mode = std::fs::metadata(&data_dir)
        .expect("data dir exists")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "data dir mode is {:o}", mode & 0o777);
    let token_file = data_dir.join("admin-token");
    let meta = std::fs::metadata(&token_file).expect("admin-token written");
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "admin-token mode is {:o}",
        meta.permissions().mode() & 0o777
    );
    let content = std::fs::read_to_string(&token_file).expect("admin-token readable");
    let token = content.trim_end_matches('\n').to_owned();
    assert!(token.len() >= 32, "a random token, got {token:?}");
    assert!(!token.contains(char::is_whitespace));

    let health = server
        .call(Method::GET, "/healthz", None, None)
        .await
        .expect(200);
    assert_eq!(health.json(), json!({"status": "ok"}));

    server
        .post("/admin/users", &token, json!({"email": "first@boot.test"}))
        .await
        .expect(201);
    for wrong in [ADMIN, "not-the-admin-token", &format!("{token}x")] {
        let reply = server
            .post("/admin/users", wrong, json!({"email": "second@boot.test"}))
            .await;
        reply.problem(401, "UNAUTHENTICATED");
        assert_eq!(reply.header("www-authenticate"), "Bearer");
    }

    server.stop_gracefully().await;
    drop(server);
    let server = Running::start(&data_dir, &env);

    let after = std::fs::read_to_string(&token_file).expect("admin-token still there");
    assert_eq!(after, content, "the admin token file is not rewritten");
    let meta_after = std::fs::metadata(&token_file).expect("admin-token");
    assert_eq!(
        meta_after.modified().expect("mtime"),
        meta.modified().expect("mtime"),
        "the admin token file is not rewritten"
    );
    assert_eq!(meta_after.permissions().mode() & 0o777, 0o600);
    server
        .post("/admin/users", &token, json!({"email": "second@boot.test"}))
        .await
        .expect(201);
    server
        .post("/admin/users", &token, json!({"email": "FIRST@boot.test"}))
        .await
        .problem(409, "EMAIL_TAKEN");
    server
        .post(
            "/admin/users",
            "not-the-admin-token",
            json!({"email": "third@boot.test"}),
        )
        .await
        .problem(401, "UNAUTHENTICATED");
    let health = server
        .call(Method::GET, "/healthz", None, None)
        .await
        .expect(200);
    assert_eq!(health.json(), json!({"status": "ok"}));
}

#[actix_web::test]
async fn an_idempotency_key_is_replayed_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Running::start(dir.path(), &[]);
    let (org, owner) = server.org(ADMIN, "Keyed").await;
    async fn create(server: &Running, org: &str, owner: &str) -> Reply {
        create_task_keyed(
            &server.client,
            &server.server.address,
            &format!("/organizations/{org}/tasks"),
            owner,
            ("kept across restarts", "restart-1"),
        )
        .await
    }
    let first = create(&server, &org, &owner).await;
    let created = first.json_with_status(201);
    server.stop_gracefully().await;

    let server = Running::start(dir.path(), &[]);
    let replayed = create(&server, &org, &owner).await;
    assert_eq!(replayed.status, 201);
    assert_eq!(replayed.header("idempotent-replayed"), "true");
    assert_eq!(replayed.json(), created);
    let tasks = server
        .get(&format!("/organizations/{org}/tasks"), &owner)
        .await
        .expect(200)
        .json();
    assert_eq!(tasks["items"].as_array().map(Vec::len), Some(1));
}
