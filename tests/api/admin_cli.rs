//! `rolecall admin` end to end: the real binary's CLI against a real server
//! bootstraps a working organization from nothing.

use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, TestApp, ADMIN};

/// Runs `rolecall admin <args>` against `app` (off the test's thread, whose
/// actors must keep running), with the environment given.
async fn admin(app: &TestApp, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rolecall"));
    command
        .arg("admin")
        .args(["--url", &app.address])
        .args(args)
        .env_remove("ROLECALL_ADMIN__TOKEN")
        .env_remove("ROLECALL_STORAGE__DATA_DIR");
    for (key, value) in env {
        command.env(key, value);
    }
    actix_web::rt::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .expect("joined")
}

/// Runs a command that must succeed with `--json`; answers its JSON.
async fn admin_json(app: &TestApp, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let output = admin(app, &[("ROLECALL_ADMIN__TOKEN", ADMIN)], &all).await;
    assert!(
        output.status.success(),
        "admin {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

#[actix_web::test]
async fn admin_cli_bootstraps_a_working_org_from_nothing() {
    let app = spawn_app().await;
    let user = admin_json(
        &app,
        &[
            "user",
            "create",
            "--email",
            "ops@acme.example",
            "--name",
            "Ops",
        ],
    )
    .await;
    assert_eq!(user["email"], json!("ops@acme.example"));
    assert_eq!(user["name"], json!("Ops"));
    let user_id = user["id"].as_str().expect("user id");

    let token = admin_json(
        &app,
        &["token", "create", "--user-id", user_id, "--name", "laptop"],
    )
    .await;
    assert_eq!(token["kind"], json!("api"));
    assert_eq!(token["name"], json!("laptop"));
    let bearer = token["token"].as_str().expect("plaintext token");

    let org = admin_json(
        &app,
        &[
            "org",
            "create",
            "--name",
            "Acme",
            "--plan",
            "pro",
            "--owner-user-id",
            user_id,
        ],
    )
    .await;
    assert_eq!(org["name"], json!("Acme"));
    assert_eq!(org["plan"], json!("pro"));
    let org_id = org["id"].as_str().expect("org id");

    let upgraded = admin_json(
        &app,
        &[
            "org",
            "set-plan",
            "--org-id",
            org_id,
            "--plan",
            "enterprise",
        ],
    )
    .await;
    assert_eq!(upgraded["plan"], json!("enterprise"));

    // The token works, the user owns the org, and enterprise allows custom roles.
    let me = app.get("/me", bearer).await.expect(200).json();
    assert_eq!(me["user"]["id"], json!(user_id));
    assert_eq!(me["memberships"][0]["organization_id"], json!(org_id));
    app.post(
        &format!("/organizations/{org_id}/roles"),
        bearer,
        json!({"name": "Release manager", "permissions": ["org:tasks:read"]}),
    )
    .await
    .expect(201);

    // Revoked from the CLI, the token fails on the very next request.
    let token_id = token["id"].as_str().expect("token id");
    let revoked = admin(
        &app,
        &[("ROLECALL_ADMIN__TOKEN", ADMIN)],
        &["token", "revoke", "--token-id", token_id],
    )
    .await;
    assert!(revoked.status.success());
    assert!(revoked.stdout.is_empty());
    app.get("/me", bearer).await.problem(401, "UNAUTHENTICATED");
}

#[actix_web::test]
async fn admin_cli_prints_tables_and_explains_errors() {
    let app = spawn_app().await;
    let env = [("ROLECALL_ADMIN__TOKEN", ADMIN)];
    let created = admin(&app, &env, &["user", "create", "--email", "a@acme.example"]).await;
    assert!(created.status.success());
    let table = String::from_utf8(created.stdout).expect("utf-8");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "one line per field: {table}");
    assert!(
        lines[1].starts_with("email       a@acme.example"),
        "{table}"
    );
    assert!(lines[3].starts_with("name        -"), "{table}");

    let again = admin(&app, &env, &["user", "create", "--email", "A@acme.example"]).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(again.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.starts_with("rolecall admin: the server answered 409 EMAIL_TAKEN: "),
        "{stderr}"
    );

    let wrong = admin(
        &app,
        &[("ROLECALL_ADMIN__TOKEN", "not-the-admin-token")],
        &["user", "create", "--email", "b@acme.example"],
    )
    .await;
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("401 UNAUTHENTICATED"));

    let unusable = admin(
        &app,
        &env,
        &["org", "set-plan", "--org-id", "x", "--plan", "gold"],
    )
    .await;
    assert_eq!(
        unusable.status.code(),
        Some(2),
        "clap rejects an unknown plan"
    );
}

#[actix_web::test]
async fn admin_cli_reads_the_generated_token_from_the_data_dir() {
    let app = spawn_app_with(&[("ROLECALL_ADMIN__TOKEN", "")]).await;
    let dir = app.data_dir.path().display().to_string();
    let by_flag = admin(
        &app,
        &[],
        &[
            "--data-dir",
            &dir,
            "user",
            "create",
            "--email",
            "f@acme.example",
            "--json",
        ],
    )
    .await;
    assert!(
        by_flag.status.success(),
        "{}",
        String::from_utf8_lossy(&by_flag.stderr)
    );
    let by_env = admin(
        &app,
        &[("ROLECALL_STORAGE__DATA_DIR", &dir)],
        &["user", "create", "--email", "g@acme.example", "--json"],
    )
    .await;
    assert!(by_env.status.success());

    let missing = admin(
        &app,
        &[],
        &[
            "--data-dir",
            "/nonexistent/rolecall",
            "user",
            "create",
            "--email",
            "h@acme.example",
        ],
    )
    .await;
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains(
            "ROLECALL_ADMIN__TOKEN is not set and /nonexistent/rolecall/admin-token cannot be read"
        ),
        "{stderr}"
    );
}
