//! A client generated from the served `/openapi.json` works: openapi-python-
//! client generates a Python package from the document, and
//! `tests/clients/python_roles_workflow.py` runs a roles-and-members
//! workflow through it against a real server (create, get, patch with
//! If-Match, a duplicate name, an invite, a list by cursor, a permission
//! check, delete), reading each error from the generated `Problem` model.
//! Skipped, with the reason printed, where the generator `.ci/install.sh`
//! installs is absent, unless `ROLECALL_REQUIRE_OPENAPI_TOOLS` is set (CI
//! sets it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;

use crate::helpers::spawn_app;

/// The generator and a Python with the generated client's dependencies:
/// the venv `.ci/install.sh` makes, or the one `ROLECALL_TEST_CLIENT_VENV`
/// names.
fn client_venv() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = std::env::var_os("ROLECALL_TEST_CLIENT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/openapi-tools/client-venv"));
    let ready = Command::new(venv.join("bin/openapi-python-client"))
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
        && Command::new(venv.join("bin/python"))
            .args(["-c", "import httpx, attrs, dateutil"])
            .output()
            .is_ok_and(|out| out.status.success());
    if ready {
        return Some(venv);
    }
    let why = "no openapi-python-client (bash .ci/install.sh installs it under \
               target/openapi-tools/client-venv)";
    assert!(
        std::env::var_os("ROLECALL_REQUIRE_OPENAPI_TOOLS").is_none(),
        "ROLECALL_REQUIRE_OPENAPI_TOOLS is set but there is {why}"
    );
    println!("skipped: {why}");
    None
}

/// Runs `command` off the test's thread (the server's actors run on it).
async fn run(mut command: Command) -> Output {
    actix_web::rt::task::spawn_blocking(move || command.output().expect("the command runs"))
        .await
        .expect("the command's thread")
}

fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[actix_web::test]
async fn a_generated_python_client_runs_a_roles_and_members_workflow() {
    let Some(venv) = client_venv() else {
        return;
    };
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let (invitee, _) = app.user("generated-client@example.test").await;
    let document = app
        .get("/openapi.json", &app.admin)
        .await
        .expect(200)
        .json();
    let dir = tempfile::tempdir().expect("a temp dir");
    let spec = dir.path().join("openapi.json");
    std::fs::write(&spec, document.to_string()).expect("the document written");
    // No post-generation hooks: the formatter they call is not needed to run it.
    let config = dir.path().join("config.json");
    std::fs::write(&config, json!({"post_hooks": []}).to_string()).expect("the config written");

    let mut generate = Command::new(venv.join("bin/openapi-python-client"));
    generate
        .arg("generate")
        .arg("--path")
        .arg(&spec)
        .arg("--config")
        .arg(&config)
        .args(["--meta", "none", "--output-path"])
        .arg(dir.path().join("rolecall_client"));
    let generated = run(generate).await;
    let report = printed(&generated);
    assert!(generated.status.success(), "the generator: {report}");
    assert!(
        !report.contains("Warning"),
        "the generator warns about nothing: {report}"
    );

    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python_roles_workflow.py");
    let mut workflow = Command::new(venv.join("bin/python"));
    workflow
        .arg(&script)
        .args([&app.address, &org.owner_token, &org.id, &invitee])
        .env("PYTHONPATH", dir.path());
    let ran = run(workflow).await;
    let output = printed(&ran);
    assert!(ran.status.success(), "the workflow: {output}");
    for step in [
        "ok: create a role",
        "ok: patch it with If-Match",
        "ok: 412 PRECONDITION_FAILED read from the Problem model",
        "ok: 409 NAME_CONFLICT read from the Problem model",
        "ok: invite a member with the role",
        "ok: list with a cursor",
        "ok: check permissions",
        "ok: ROLE_IN_USE carries member_count",
        "ok: delete the role",
        "ok: 404 NOT_FOUND read from the Problem model",
        "workflow done",
    ] {
        assert!(output.contains(step), "{step}: {output}");
    }

    // What the workflow did is what the server stored.
    let roles = app
        .get(&org.path("/roles"), &org.owner_token)
        .await
        .expect(200)
        .json();
    let names: Vec<&str> = roles["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|role| role["name"].as_str())
        .collect();
    assert_eq!(names, ["Owner", "Member"]);
    app.get(&org.path(&format!("/members/{invitee}")), &org.owner_token)
        .await
        .expect(404);
}
