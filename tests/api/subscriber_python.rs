//! The README's Python subscriber (`examples/verify_delivery.py`) verifies a
//! real delivery with the `standardwebhooks` and `svix` libraries, refuses a
//! tampered one and acknowledges a duplicate without processing it. Skipped,
//! with the reason printed, when Python or those packages are absent, unless
//! `ROLECALL_REQUIRE_PYTHON` is set (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::helpers::{spawn_app_with, WEBHOOK_TEST_CONFIG};
use crate::receiver::TestReceiver;

/// A Python that imports both libraries: `ROLECALL_TEST_PYTHON`, the venv
/// `.ci/install.sh` makes, or `python3`.
fn python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        std::env::var_os("ROLECALL_TEST_PYTHON").map(PathBuf::from),
        Some(root.join("target/subscriber-venv/bin/python3")),
        Some(PathBuf::from("python3")),
    ];
    let found = candidates.into_iter().flatten().find(|python| {
        Command::new(python)
            .args(["-c", "import standardwebhooks, svix"])
            .output()
            .is_ok_and(|out| out.status.success())
    });
    if found.is_none() {
        let why = "no Python with the standardwebhooks and svix packages \
                   (pip install standardwebhooks svix, or bash .ci/install.sh)";
        assert!(
            std::env::var_os("ROLECALL_REQUIRE_PYTHON").is_none(),
            "ROLECALL_REQUIRE_PYTHON is set but there is {why}"
        );
        println!("skipped: {why}");
    }
    found
}

#[actix_web::test]
async fn the_readme_python_subscriber_verifies_a_real_delivery_with_both_libraries() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/verify_delivery.py");
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README");
    let source = std::fs::read_to_string(&script).expect("the example");
    assert!(
        readme.contains(source.trim()),
        "the README shows examples/verify_delivery.py verbatim"
    );
    let Some(python) = python() else {
        return;
    };
    let app = spawn_app_with(WEBHOOK_TEST_CONFIG).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("free").await;
    let secret = app
        .setup_webhook(&org, &receiver.url, &["task.created"])
        .await;
    app.post(
        &org.path("/tasks"),
        &org.owner_token,
        json!({"title": "Py"}),
    )
    .await
    .expect(201);
    let received = receiver
        .wait_for(2, std::time::Duration::from_secs(10))
        .await;
    let delivery = &received[1];

    let dir = tempfile::tempdir().expect("tempdir");
    let headers: serde_json::Map<String, serde_json::Value> = delivery
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), json!(value)))
        .collect();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("written");
        path
    };
    let headers = write("headers.json", &serde_json::to_vec(&headers).expect("JSON"));
    let body = write("body", &delivery.body);
    let mut forged = delivery.body.clone();
    forged.extend_from_slice(b" ");
    let forged = write("forged", &forged);

    let out = Command::new(&python)
        .arg(&script)
        .args([&headers, &body, &headers, &body, &headers, &forged])
        .env("WEBHOOK_SECRET", &secret)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = delivery.header("x-service-delivery");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!("200 task.created {id}"),
            format!("200 duplicate {id}"),
            "401".to_owned()
        ]
    );
}
