//! `rolecall serve` that cannot start says why on one line of standard
//! error and exits 1, or 78 (`EX_CONFIG`) when the configuration itself is
//! wrong: no panic, no backtrace, no actor or timer left running (they
//! start only once the server has bound). Each case runs the real binary.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use crate::helpers::{spawn_binary, ADMIN};

/// Runs `rolecall serve` with `args` and `env` (sled in `data_dir`, a free
/// port, backtraces on so that a panic would show) and answers its exit
/// code and the lines it wrote to standard error.
fn start(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Vec<String>, Output) {
    let output = Command::new(env!("CARGO_BIN_EXE_rolecall"))
        .arg("serve")
        .args(args)
        .env("ROLECALL_SERVER__LISTEN", "127.0.0.1:0")
        .env("ROLECALL_STORAGE__DATA_DIR", data_dir)
        .env("ROLECALL_ADMIN__TOKEN", ADMIN)
        .env("RUST_BACKTRACE", "1")
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines = stderr.lines().map(str::to_owned).collect();
    (output.status.code().unwrap_or(-1), lines, output)
}

/// The one line `rolecall serve` wrote to standard error, after checking
/// that it exited with `code` and printed nothing else there, and no
/// panic anywhere.
fn refused(data_dir: &Path, args: &[&str], env: &[(&str, &str)], code: i32) -> String {
    let (exit, lines, output) = start(data_dir, args, env);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !stdout.contains("panicked") && !lines.iter().any(|l| l.contains("panicked")),
        "no panic: {lines:?} {stdout}"
    );
    assert_eq!(lines.len(), 1, "one line of standard error: {lines:?}");
    assert_eq!(exit, code, "{lines:?}");
    assert!(lines[0].starts_with("rolecall: "), "{}", lines[0]);
    lines[0].clone()
}

#[test]
fn a_port_in_use_is_one_line_and_exit_1_before_anything_starts() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("address").to_string();
    let data = tempfile::tempdir().expect("tempdir");
    let line = refused(
        data.path(),
        &[],
        &[("ROLECALL_SERVER__LISTEN", &address)],
        1,
    );
    assert_eq!(
        line,
        format!("rolecall: cannot listen on {address}: Address already in use (os error 98)")
    );
}

#[test]
fn a_config_file_that_cannot_be_read_or_is_invalid_exits_78() {
    let data = tempfile::tempdir().expect("tempdir");
    let missing = data.path().join("missing.toml");
    let line = refused(
        data.path(),
        &["--config", missing.to_str().expect("utf-8")],
        &[],
        78,
    );
    assert_eq!(
        line,
        format!(
            "rolecall: cannot read {}: No such file or directory (os error 2)",
            missing.display()
        )
    );

    let broken = data.path().join("broken.toml");
    std::fs::write(&broken, "[server]\nlisten = [\n").expect("written");
    let line = refused(
        data.path(),
        &["--config", broken.to_str().expect("utf-8")],
        &[],
        78,
    );
    assert!(
        line.starts_with(&format!(
            "rolecall: invalid configuration: {}: TOML parse error at line 2",
            broken.display()
        )),
        "{line}"
    );

    let unknown = data.path().join("unknown.toml");
    std::fs::write(&unknown, "[server]\nlistn = \"127.0.0.1:0\"\n").expect("written");
    let line = refused(
        data.path(),
        &["--config", unknown.to_str().expect("utf-8")],
        &[],
        78,
    );
    assert!(
        line.starts_with("rolecall: invalid configuration: unknown field `listn`")
            && line.ends_with("in `server`"),
        "{line}"
    );

    let line = refused(
        data.path(),
        &[],
        &[(
            "ROLECALL_WEBHOOKS__PROXY_URL",
            "socks5://user:pw-secret@proxy:1080",
        )],
        78,
    );
    assert!(
        line.starts_with("rolecall: webhooks.proxy_url: must start with http://")
            && !line.contains("pw-secret"),
        "{line}"
    );

    let line = refused(data.path(), &[], &[("ROLECALL_SERVER__WORKERS", "two")], 78);
    assert_eq!(
        line,
        "rolecall: invalid configuration: ROLECALL_SERVER__WORKERS: expected an integer, got \"two\""
    );
}

#[test]
fn a_tls_file_that_is_missing_or_holds_no_certificate_exits_1() {
    let data = tempfile::tempdir().expect("tempdir");
    let missing = data.path().join("missing.pem");
    let missing = missing.to_str().expect("utf-8");
    let line = refused(
        data.path(),
        &[],
        &[
            ("ROLECALL_SERVER__TLS_CERT_FILE", missing),
            ("ROLECALL_SERVER__TLS_KEY_FILE", missing),
        ],
        1,
    );
    assert_eq!(
        line,
        format!(
            "rolecall: server.tls_cert_file {missing}: I/O error: No such file or directory (os error 2)"
        )
    );

    let junk = data.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").expect("written");
    let junk = junk.to_str().expect("utf-8");
    let line = refused(
        data.path(),
        &[],
        &[
            ("ROLECALL_SERVER__TLS_CERT_FILE", junk),
            ("ROLECALL_SERVER__TLS_KEY_FILE", junk),
        ],
        1,
    );
    assert_eq!(
        line,
        format!("rolecall: server.tls_cert_file {junk}: no certificate found")
    );
}

#[test]
fn a_data_directory_that_cannot_be_opened_exits_1() {
    let data = tempfile::tempdir().expect("tempdir");
    let file = data.path().join("a-file");
    std::fs::write(&file, "").expect("written");
    let line = refused(&file.join("data"), &[], &[], 1);
    assert_eq!(
        line,
        "rolecall: storage: the data directory could not be prepared: Not a directory (os error 20)"
    );

    let running = spawn_binary(data.path(), &[("ROLECALL_STORAGE__BACKEND", "sled")]);
    let line = refused(data.path(), &[], &[], 1);
    assert_eq!(
        line,
        format!(
            "rolecall: storage: the data directory {} is in use by another process (another `rolecall serve`?)",
            data.path().display()
        )
    );
    drop(running);
}

#[test]
fn an_unreachable_postgresql_exits_1_after_storage_startup_wait_secs() {
    // A loopback port nobody listens on: refused at once, every try.
    let closed = TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let url = format!("postgres://rolecall:rolecall@127.0.0.1:{port}/rolecall");
    let data = tempfile::tempdir().expect("tempdir");
    let started = std::time::Instant::now();
    let line = refused(
        data.path(),
        &[],
        &[
            ("ROLECALL_STORAGE__BACKEND", "postgres"),
            ("ROLECALL_STORAGE__POSTGRES_URL", &url),
            ("ROLECALL_STORAGE__STARTUP_WAIT_SECS", "1"),
        ],
        1,
    );
    assert!(
        line.starts_with(
            "rolecall: storage: not available after waiting 1 s (storage.startup_wait_secs): "
        ) && line.contains("PostgreSQL cannot be reached")
            && line.contains("Connection refused"),
        "{line}"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "it waited for the database first"
    );
    assert!(
        !line.contains("rolecall@"),
        "no credentials in the error: {line}"
    );
}
