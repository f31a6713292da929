//! Issue 29, finding 1 (CONTRACT §11): a request body must arrive within
//! `server.body_timeout_ms`, else 408 and the connection is closed; and all
//! unfinished bodies together hold at most `server.body_memory_mb`. Checked
//! against the real binary, whose resident memory is read from /proc.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{client, spawn_binary, Running, ADMIN};

const CONNECTIONS: usize = 24;
const DECLARED: usize = 1024 * 1024;
/// What each connection sends of its declared body: all but 11 bytes.
const SENT: usize = DECLARED - 11;
const TIMEOUT_MS: u64 = 1500;

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// What one slow sender saw: the answer's bytes, whether the server closed
/// the connection, and when (since the headers were sent).
struct Outcome {
    answer: String,
    closed: bool,
    after: Duration,
}

/// Sends the headers and all but the last 11 bytes of a 1 MiB body, then
/// waits for the server's answer and its close.
fn slow_sender(address: &str, path: &str, token: &str) -> Outcome {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    stream
        .set_write_timeout(Some(Duration::from_secs(20)))
        .expect("write timeout");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {DECLARED}\r\n\r\n"
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).expect("headers sent");
    let mut body = b"{\"name\": \"".to_vec();
    body.resize(SENT, b'a');
    // The server may stop reading (its memory for bodies is spent) or
    // answer early; what matters is what it answers, not what we sent.
    let _ = stream.write_all(&body);
    let mut answer = Vec::new();
    let closed = match stream.read_to_end(&mut answer) {
        Ok(_) => true,
        Err(err) => err.kind() == std::io::ErrorKind::ConnectionReset,
    };
    Outcome {
        answer: String::from_utf8_lossy(&answer).into_owned(),
        closed,
        after: started.elapsed(),
    }
}

/// Resident memory of the server: before the senders, at its highest
/// while they were answered, and once they all were.
struct Memory {
    start_kib: u64,
    peak_kib: u64,
    end_kib: u64,
}

impl Memory {
    fn peak_growth_mib(&self) -> f64 {
        self.peak_kib.saturating_sub(self.start_kib) as f64 / 1024.0
    }

    fn left_mib(&self) -> f64 {
        self.end_kib.saturating_sub(self.start_kib) as f64 / 1024.0
    }
}

/// A server with bodies of at most `memory_mb` in all, an organization, and
/// the path of its role creates (where bodies are read before the 402 of
/// its free plan).
async fn server(memory_mb: u64) -> (Running, tempfile::TempDir, String, String) {
    let data = tempfile::tempdir().expect("tempdir");
    let server = spawn_binary(
        data.path(),
        &[
            ("ROLECALL_SERVER__BODY_TIMEOUT_MS", &TIMEOUT_MS.to_string()),
            ("ROLECALL_SERVER__BODY_MEMORY_MB", &memory_mb.to_string()),
        ],
    );
    let app = Running {
        server,
        client: client(),
    };
    let (org, owner) = app.org(ADMIN, "Slow").await;
    (app, data, format!("/organizations/{org}/roles"), owner)
}

/// Runs [`CONNECTIONS`] slow senders at once against `app`, watching its memory.
async fn slow_senders(app: &Running, path: &str, token: &str) -> (Vec<Outcome>, Memory) {
    let pid = app.server.child.id();
    // Warm up the paths the senders take, then measure where memory starts.
    for _ in 0..20 {
        app.get(path, token).await.expect(200);
    }
    let start_kib = rss_kib(pid);
    let address = app.server.address.trim_start_matches("http://").to_owned();
    let senders: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (address, path, token) = (address.clone(), path.to_owned(), token.to_owned());
            std::thread::spawn(move || slow_sender(&address, &path, &token))
        })
        .collect();
    let mut peak_kib = start_kib;
    while senders.iter().any(|s| !s.is_finished()) {
        peak_kib = peak_kib.max(rss_kib(pid));
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    let outcomes = senders
        .into_iter()
        .map(|s| s.join().expect("sender"))
        .collect();
    let end_kib = rss_kib(pid);
    eprintln!("server RSS: {start_kib} KiB before, {peak_kib} KiB at most, {end_kib} KiB after");
    let memory = Memory {
        start_kib,
        peak_kib: peak_kib.max(end_kib),
        end_kib,
    };
    (outcomes, memory)
}

/// Asserts an answer of `status` and `code` that closed its connection.
#[track_caller]
fn refused_and_closed(i: usize, outcome: &Outcome, status: &str, code: &str) {
    assert!(
        outcome.answer.starts_with(&format!("HTTP/1.1 {status} ")),
        "sender {i}: {:?}",
        outcome.answer.lines().next()
    );
    assert!(
        outcome.answer.contains(&format!("\"code\":\"{code}\"")),
        "sender {i}: {}",
        outcome.answer
    );
    assert!(
        outcome
            .answer
            .to_ascii_lowercase()
            .contains("connection: close"),
        "sender {i}: {}",
        outcome.answer
    );
    assert!(outcome.closed, "sender {i}: the connection stays open");
}

/// Nothing was created, and the server serves as before.
async fn nothing_created(app: &Running, path: &str, token: &str) {
    let roles = app.get(path, token).await.expect(200).json();
    assert_eq!(roles["items"].as_array().map(Vec::len), Some(2));
    app.post(path, token, json!({"name": "Fine"}))
        .await
        .problem(402, "LICENSE_REQUIRED");
}

#[actix_web::test]
async fn unfinished_bodies_get_408_their_connections_close_and_memory_returns() {
    let (app, _data, path, owner) = server(64).await;
    let (outcomes, memory) = slow_senders(&app, &path, &owner).await;
    for (i, outcome) in outcomes.iter().enumerate() {
        refused_and_closed(i, outcome, "408", "REQUEST_TIMEOUT");
        // Within the timeout, give or take scheduling on a busy machine.
        assert!(
            outcome.after >= Duration::from_millis(TIMEOUT_MS - 100)
                && outcome.after < Duration::from_millis(TIMEOUT_MS + 5000),
            "sender {i} answered after {:?}",
            outcome.after
        );
    }
    // Each body was held until its timeout, then its memory went back.
    assert!(
        memory.peak_growth_mib() > 12.0,
        "{CONNECTIONS} bodies of 1 MiB were held: peak {:.1} MiB over the start",
        memory.peak_growth_mib()
    );
    assert!(
        memory.left_mib() < 10.0,
        "RSS is {:.1} MiB above its start after the 408s (peak {:.1})",
        memory.left_mib(),
        memory.peak_growth_mib()
    );
    nothing_created(&app, &path, &owner).await;
}

/// What the bodies may hold in all is a budget: past it, a body is refused
/// at once (503 SERVER_BUSY, Retry-After, connection closed) rather than
/// kept waiting with its data buffered.
#[actix_web::test]
async fn bodies_past_the_memory_budget_are_refused_at_once() {
    const BUDGET_MB: u64 = 4;
    let (app, _data, path, owner) = server(BUDGET_MB).await;
    let (outcomes, memory) = slow_senders(&app, &path, &owner).await;
    let mut timed_out = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        if outcome.answer.starts_with("HTTP/1.1 408 ") {
            refused_and_closed(i, outcome, "408", "REQUEST_TIMEOUT");
            timed_out += 1;
            continue;
        }
        refused_and_closed(i, outcome, "503", "SERVER_BUSY");
        assert!(
            outcome
                .answer
                .to_ascii_lowercase()
                .contains("retry-after: 1"),
            "sender {i}: {}",
            outcome.answer
        );
        assert!(
            outcome.after < Duration::from_millis(TIMEOUT_MS),
            "sender {i}: refused only after {:?}",
            outcome.after
        );
    }
    // Each 1 MiB body holds a whole MiB of the budget.
    assert!(
        (1..=BUDGET_MB as usize).contains(&timed_out),
        "{timed_out} bodies were held"
    );
    // Unbounded, the 24 bodies would hold 24 MiB; the budget's 4 and the
    // HTTP layer's buffers of the refused connections make about 10.
    assert!(
        memory.peak_growth_mib() < (BUDGET_MB + 10) as f64,
        "RSS grew by {:.1} MiB for {CONNECTIONS} unfinished bodies (budget {BUDGET_MB} MiB)",
        memory.peak_growth_mib()
    );
    nothing_created(&app, &path, &owner).await;
}
