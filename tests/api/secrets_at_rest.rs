//! Webhook signing secrets encrypted at rest (`storage.secret_key`): with a
//! key, no secret byte is anywhere in the data directory; a wrong key, or
//! none, stops start-up with a clear message; `rolecall admin rekey`
//! changes keys offline, on both engines; the log says which mode is in
//! force.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rolecall::secrets::SealingKey;
use serde_json::json;

use crate::helpers::{refused_start, spawn_binary_capturing, Running, ADMIN};
use crate::receiver::TestReceiver;
use crate::webhook_delivery::service_signature;

pub(crate) const LOOPBACK: [(&str, &str); 2] = [
    ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
    ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
];

/// Every file under `dir` (recursively) holding `needle`, by name.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).expect("read_dir").flatten() {
                stack.push(entry.path());
            }
        } else if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// A server on `dir`, whose secrets are sealed, refuses to start without
/// a key and with a wrong one, saying which.
pub(crate) fn refused_without_the_key(dir: &Path) {
    let stderr = refused_start(dir, &LOOPBACK);
    assert!(stderr.contains("no storage.secret_key is set"), "{stderr}");
    let wrong = SealingKey::generate().expose();
    let stderr = refused_start(dir, &[("ROLECALL_STORAGE__SECRET_KEY", wrong.as_str())]);
    assert!(
        stderr.contains("does not decrypt the stored webhook secrets"),
        "{stderr}"
    );
}

/// `rolecall admin rekey --data-dir <dir> <args>`: (exit code, stdout and stderr).
fn rekey(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_rolecall"))
        .args(["admin", "rekey", "--data-dir"])
        .arg(dir)
        .args(args)
        .envs(crate::engines::Engine::current().env_for(dir))
        .output()
        .expect("rekey runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr),
    )
}

/// An organization whose webhook to `receiver` is saved; answers the org
/// id, the owner's token and the signing secret revealed by the test.
pub(crate) async fn org_with_webhook(
    server: &Running,
    receiver: &TestReceiver,
) -> (String, String, String) {
    let (org, token) = server.org(ADMIN, "Sealed").await;
    let test = server
        .post(
            &format!("/organizations/{org}/webhook/test"),
            &token,
            json!({"url": receiver.url, "events": ["task.created"]}),
        )
        .await
        .expect(200)
        .json();
    let secret = test["secret"].as_str().expect("secret revealed").to_owned();
    server
        .call(
            actix_web::http::Method::PUT,
            &format!("/organizations/{org}/webhook"),
            Some(&token),
            Some(json!({"test_id": test["test_id"]})),
        )
        .await
        .expect(200);
    (org, token, secret)
}

/// Rotates the org's webhook secret as its owner; answers the new one.
pub(crate) async fn rotate(server: &Running, org: &str, token: &str) -> String {
    let rotated = server
        .post(
            &format!("/organizations/{org}/webhook/rotate"),
            token,
            json!({}),
        )
        .await
        .expect(200)
        .json();
    rotated["secret"].as_str().expect("new secret").to_owned()
}

/// Creates a task and asserts its delivery is signed with `secret`.
pub(crate) async fn delivered_with(
    server: &Running,
    receiver: &TestReceiver,
    org: &str,
    token: &str,
    secret: &str,
) {
    let before = receiver.received().len();
    server
        .post(
            &format!("/organizations/{org}/tasks"),
            token,
            json!({"title": "signed"}),
        )
        .await
        .expect(201);
    let received = receiver.wait_for(before + 1, Duration::from_secs(10)).await;
    let delivery = &received[before];
    assert_eq!(delivery.header("x-service-event"), "task.created");
    assert_eq!(
        delivery.header("x-service-signature"),
        service_signature(secret, &delivery.body),
        "the delivery is signed with the stored secret"
    );
}

#[actix_web::test]
async fn with_a_key_no_secret_byte_reaches_the_disk_and_only_that_key_opens_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = SealingKey::generate().expose();
    let keyed = [
        LOOPBACK[0],
        LOOPBACK[1],
        ("ROLECALL_STORAGE__SECRET_KEY", key.as_str()),
    ];
    let receiver = TestReceiver::start().await;

    let (server, output) = spawn_binary_capturing(dir.path(), &keyed);
    let mut server = Running {
        server,
        client: crate::helpers::client(),
    };
    let (org, token, first) = org_with_webhook(&server, &receiver).await;
    delivered_with(&server, &receiver, &org, &token, &first).await;
    let second = rotate(&server, &org, &token).await;
    delivered_with(&server, &receiver, &org, &token, &second).await;
    server.stop_gracefully().await;
    let (stdout, _) = output.finish();
    assert!(
        stdout
            .iter()
            .any(|l| l.contains("webhook secrets at rest: encrypted")),
        "the log says the secrets are encrypted: {stdout:?}"
    );

    // Neither secret, nor its key bytes, nor their base64, is on disk.
    for secret in [&first, &second] {
        let encoded = secret.strip_prefix("whsec_").expect("whsec_ secret");
        let raw = STANDARD.decode(encoded).expect("base64 secret");
        for needle in [secret.as_bytes(), encoded.as_bytes(), raw.as_slice()] {
            let found = files_holding(dir.path(), needle);
            assert!(found.is_empty(), "a secret is stored in clear in {found:?}");
        }
    }

    // No key, or a wrong one: start-up stops with a clear message.
    refused_without_the_key(dir.path());
    let stderr = refused_start(dir.path(), &[("ROLECALL_STORAGE__SECRET_KEY", "short")]);
    assert!(
        stderr.contains("32 random bytes in standard base64"),
        "{stderr}"
    );

    // The right key still serves, and signs with the secret as it was.
    let server = Running::start(dir.path(), &keyed);
    delivered_with(&server, &receiver, &org, &token, &second).await;
}

on_both_engines! {
async fn rekey_moves_the_secrets_to_a_new_key_and_in_and_out_of_clear() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = TestReceiver::start().await;
    let mut server = Running::start(dir.path(), &LOOPBACK);
    let (org, token, secret) = org_with_webhook(&server, &receiver).await;
    server.stop_gracefully().await;

    let keys = tempfile::tempdir().expect("tempdir");
    let (old, new) = (SealingKey::generate(), SealingKey::generate());
    let old_file = keys.path().join("old.key");
    let new_file = keys.path().join("new.key");
    std::fs::write(&old_file, old.expose()).expect("key file");
    std::fs::write(&new_file, new.expose()).expect("key file");
    let rekey = |args: &[&str]| rekey(dir.path(), args);

    // In clear → the old key → the new key.
    let old_path = old_file.to_str().expect("path");
    let new_path = new_file.to_str().expect("path");
    let (code, out) = rekey(&["--to-key-file", old_path]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("1 webhook secret(s)") && out.contains("now encrypted with the new key"),
        "{out}"
    );
    let (code, out) = rekey(&["--from-key-file", new_path, "--to-key-file", old_path]);
    assert_eq!(code, Some(1), "a wrong from-key changes nothing: {out}");
    assert!(out.contains("does not decrypt"), "{out}");
    let (code, out) = rekey(&["--from-key-file", old_path, "--to-key-file", new_path]);
    assert_eq!(code, Some(0), "{out}");

    let old_key = old.expose();
    let old_env = [
        LOOPBACK[0],
        LOOPBACK[1],
        ("ROLECALL_STORAGE__SECRET_KEY", old_key.as_str()),
    ];
    let stderr = refused_start(dir.path(), &old_env);
    assert!(
        stderr.contains("does not decrypt"),
        "the old key is retired: {stderr}"
    );
    let new_key = new.expose();
    let new_env = [
        LOOPBACK[0],
        LOOPBACK[1],
        ("ROLECALL_STORAGE__SECRET_KEY", new_key.as_str()),
    ];
    let mut server = Running::start(dir.path(), &new_env);
    delivered_with(&server, &receiver, &org, &token, &secret).await;
    server.stop_gracefully().await;

    // Back to clear: the server without a key serves the same secret.
    let (code, out) = rekey(&["--from-key", &new_key]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("now stored in clear"), "{out}");
    let server = Running::start(dir.path(), &LOOPBACK);
    delivered_with(&server, &receiver, &org, &token, &secret).await;
}
}

on_both_engines! {
async fn a_key_set_on_an_installation_in_clear_encrypts_its_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = TestReceiver::start().await;
    let mut server = Running::start(dir.path(), &LOOPBACK);
    let (org, token, secret) = org_with_webhook(&server, &receiver).await;
    server.stop_gracefully().await;
    let key = SealingKey::generate().expose();
    let keyed = [
        LOOPBACK[0],
        LOOPBACK[1],
        ("ROLECALL_STORAGE__SECRET_KEY", key.as_str()),
    ];
    let mut server = Running::start(dir.path(), &keyed);
    delivered_with(&server, &receiver, &org, &token, &secret).await;
    server.stop_gracefully().await;
    // Encrypted now: without the key, start-up is refused.
    let stderr = refused_start(dir.path(), &LOOPBACK);
    assert!(stderr.contains("no storage.secret_key is set"), "{stderr}");
}
}

on_both_engines! {
async fn a_lost_key_is_survived_by_replacing_the_secrets_it_sealed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = TestReceiver::start().await;
    let lost = SealingKey::generate().expose();
    let keyed = [
        LOOPBACK[0],
        LOOPBACK[1],
        ("ROLECALL_STORAGE__SECRET_KEY", lost.as_str()),
    ];
    let mut server = Running::start(dir.path(), &keyed);
    let (org, token, old_secret) = org_with_webhook(&server, &receiver).await;
    server.stop_gracefully().await;

    let keys = tempfile::tempdir().expect("tempdir");
    let new = SealingKey::generate().expose();
    let new_file = keys.path().join("new.key");
    std::fs::write(&new_file, &new).expect("key file");
    let new_file = new_file.to_str().expect("utf-8 path");

    // Without the lost key nothing opens, and nothing changes unless asked.
    let (code, out) = rekey(dir.path(), &["--to-key-file", new_file]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("no storage.secret_key is set"), "{out}");
    let (code, out) = rekey(
        dir.path(),
        &["--to-key-file", new_file, "--replace-unreadable"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("1 of them did not open and were replaced") && out.contains(&org),
        "the organization to tell is listed: {out}"
    );

    // The new key opens the store; deliveries no longer verify with the old
    // secret, and an owner's rotation hands out one that does.
    let new_env = [
        LOOPBACK[0],
        LOOPBACK[1],
        ("ROLECALL_STORAGE__SECRET_KEY", new.as_str()),
    ];
    let server = Running::start(dir.path(), &new_env);
    let before = receiver.received().len();
    server
        .post(
            &format!("/organizations/{org}/tasks"),
            &token,
            json!({"title": "unverifiable"}),
        )
        .await
        .expect(201);
    let received = receiver.wait_for(before + 1, Duration::from_secs(10)).await;
    assert_ne!(
        received[before].header("x-service-signature"),
        service_signature(&old_secret, &received[before].body),
        "the lost secret no longer signs"
    );
    let secret = rotate(&server, &org, &token).await;
    delivered_with(&server, &receiver, &org, &token, &secret).await;
}
}
