//! Which webhook URLs the server will talk to (CONTRACT §0 `webhooks.*`, §6
//! `POST …/webhook/test`), over real HTTP: literal non-public hosts are
//! refused before any connection, host names resolving to loopback are
//! refused at connect time, and an https subscriber signed by an on-prem CA
//! works exactly when that CA is in `webhooks.ca_file`.
//!
//! Only loopback is ever contacted: every other URL below is refused by the
//! literal check before a socket is opened.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::http::Method;
use rolecall::config::Config;
use rolecall::startup::Application;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_app_with, Org, Reply, TestApp, ADMIN};
use crate::pki::{Leaf, TestCa};
use crate::receiver::TestReceiver;

/// `POST /organizations/{id}/webhook/test` as the owner.
pub(crate) async fn test_url(app: &TestApp, org: &Org, url: &str) -> Reply {
    app.post(
        &org.path("/webhook/test"),
        &org.owner_token,
        json!({"url": url, "events": ["member.added"]}),
    )
    .await
}

/// Asserts the shape of a test answer and returns it.
#[track_caller]
pub(crate) fn test_result(reply: Reply) -> Value {
    let reply = reply.expect(200);
    assert_eq!(reply.header("content-type"), "application/json");
    let body = reply.json();
    assert!(body["passed"].is_boolean(), "passed: {body}");
    assert!(
        body["test_id"].as_str().is_some_and(|t| t.len() == 36),
        "test_id: {body}"
    );
    assert!(body["latency_ms"].is_u64(), "latency_ms: {body}");
    body
}

/// A test that failed before any response arrived.
#[track_caller]
fn assert_failed_without_response(body: &Value) {
    assert_eq!(body["passed"], json!(false), "{body}");
    assert_eq!(body["status_code"], Value::Null, "{body}");
    assert_eq!(body["response_body"], Value::Null, "{body}");
    assert!(
        body.get("secret").is_none(),
        "a failed test reveals no secret: {body}"
    );
    assert!(body["error"].is_string(), "error: {body}");
}

/// A loopback listener that must never see a connection.
struct Sentinel {
    listener: TcpListener,
    port: u16,
}

impl Sentinel {
    fn bind() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("sentinel binds");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        Sentinel { listener, port }
    }

    #[track_caller]
    fn assert_untouched(&self) {
        match self.listener.accept() {
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok((_, peer)) => panic!("the server connected to a refused URL (from {peer})"),
            Err(err) => panic!("sentinel accept failed: {err}"),
        }
    }
}

#[actix_web::test]
async fn default_policy_refuses_http_and_non_public_literals_before_connecting() {
    let app = spawn_app().await;
    let org = app.org("enterprise").await;
    let sentinel = Sentinel::bind();
    let port = sentinel.port;

    let mut refused: Vec<String> = [
        "http://example.com/hook",
        "https://127.0.0.1/",
        "https://127.1.2.3/",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://2130706433/",
        "https://0x7f.1/",
        "https://10.0.0.1/",
        "https://169.254.169.254/",
    ]
    .iter()
    .map(|u| u.to_string())
    .collect();
    // The same loopback spellings with the port of a live listener: had the
    // server tried them, the sentinel would have seen a connection.
    refused.extend([
        format!("https://127.0.0.1:{port}/hook"),
        format!("https://[::ffff:127.0.0.1]:{port}/hook"),
        format!("https://2130706433:{port}/hook"),
        format!("https://0x7f.1:{port}/hook"),
        format!("https://0177.0.0.1:{port}/hook"),
        format!("http://127.0.0.1:{port}/hook"),
    ]);
    for url in &refused {
        let reply = test_url(&app, &org, url).await;
        let body = reply.problem(400, "INVALID_URL");
        assert!(
            !body["detail"].as_str().unwrap_or("").is_empty(),
            "{url}: the detail says why: {body}"
        );
    }
    sentinel.assert_untouched();

    // A refused request changes nothing: no endpoint, no delivery-log record.
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
    let log = app
        .get(&org.path("/webhook/deliveries"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(log, json!({"items": [], "next_cursor": null}));
}

/// CONTRACT §1: a URL "resolving to a refused address" is 400 INVALID_URL.
/// A name is resolved when it is tested (and again when it is saved, and
/// on every attempt at connect time, which is what defeats DNS rebinding:
/// see `webhooks::client`'s unit test of the resolver).
#[actix_web::test]
async fn a_name_resolving_only_to_loopback_is_refused_when_tested() {
    let app = spawn_app_with(&[("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true")]).await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let url = format!("http://localhost:{}/hook", receiver.port);

    let body = test_url(&app, &org, &url).await.problem(400, "INVALID_URL");
    assert_eq!(
        body["detail"],
        json!("the URL's host does not resolve to an address that deliveries may use")
    );
    // A refused request changes nothing: nothing sent, nothing logged, no endpoint.
    actix_web::rt::time::sleep(Duration::from_millis(300)).await;
    assert!(
        receiver.received().is_empty(),
        "the loopback receiver must get no request: {:?}",
        receiver.received()
    );
    let log = app
        .get(&org.path("/webhook/deliveries"), &org.owner_token)
        .await
        .expect(200)
        .json();
    assert_eq!(log, json!({"items": [], "next_cursor": null}));
    app.get(&org.path("/webhook"), &org.owner_token)
        .await
        .problem(404, "NOT_FOUND");
}

#[actix_web::test]
async fn a_name_resolving_to_loopback_passes_when_private_networks_are_allowed() {
    let app = spawn_app_with(&[
        ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
        ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
    ])
    .await;
    let receiver = TestReceiver::start().await;
    let org = app.org("enterprise").await;
    let url = format!("http://localhost:{}/hook", receiver.port);

    let body = test_result(test_url(&app, &org, &url).await);
    assert_eq!(body["passed"], json!(true), "{body}");
    assert_eq!(body["status_code"], json!(200));
    assert_eq!(body["response_body"], json!("answer 200"));
    assert_eq!(body["error"], Value::Null);
    assert!(body["secret"]
        .as_str()
        .is_some_and(|s| s.starts_with("whsec_")));
    let received = receiver.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/hook");
    assert_eq!(received[0].header("x-service-event"), "test.preflight");
    assert_eq!(received[0].json()["data"]["url"], json!(url));
    assert_eq!(received[0].json()["data"]["test_id"], body["test_id"]);
}

// ---------------------------------------------------------------------------
// https with an on-prem CA

/// A CA and a leaf for `localhost` / `127.0.0.1` signed by it.
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    leaf: Leaf,
}

pub(crate) fn make_pki() -> Pki {
    let ca = TestCa::new("rolecall test on-prem CA");
    Pki {
        leaf: ca.issue("localhost"),
        ca_pem: ca.pem,
    }
}

/// One request the https subscriber read.
#[derive(Clone, Debug)]
pub(crate) struct HttpsRequest {
    /// `POST /hook HTTP/1.1`.
    pub(crate) request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpsRequest {
    pub(crate) fn header(&self, name: &str) -> String {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct HttpsState {
    requests: Vec<HttpsRequest>,
    /// Connections whose TLS handshake failed, with the reason.
    handshake_failures: Vec<String>,
}

/// A minimal HTTP/1.1-over-TLS subscriber on 127.0.0.1 (std threads and
/// rustls): reads one request per connection, answers 200 and closes.
pub(crate) struct HttpsSubscriber {
    pub(crate) port: u16,
    state: Arc<Mutex<HttpsState>>,
    stop: Arc<AtomicBool>,
}

pub(crate) const HTTPS_ANSWER: &str = "subscribed over tls";

impl HttpsSubscriber {
    pub(crate) fn start(pki: &Pki) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![rustls::pki_types::CertificateDer::from(
                    pki.leaf.der.clone(),
                )],
                rustls::pki_types::PrivateKeyDer::Pkcs8(pki.leaf.key_der.clone().into()),
            )
            .expect("server certificate");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("https subscriber binds");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(HttpsState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_state, thread_stop) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (config, state) = (config.clone(), thread_state.clone());
                std::thread::spawn(move || serve_one(stream, config, state));
            }
        });
        HttpsSubscriber { port, state, stop }
    }

    pub(crate) fn requests(&self) -> Vec<HttpsRequest> {
        self.state.lock().expect("lock").requests.clone()
    }

    fn handshake_failures(&self) -> Vec<String> {
        self.state.lock().expect("lock").handshake_failures.clone()
    }
}

impl Drop for HttpsSubscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve_one(stream: TcpStream, config: Arc<rustls::ServerConfig>, state: Arc<Mutex<HttpsState>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let conn = rustls::ServerConnection::new(config).expect("server connection");
    let mut tls = rustls::StreamOwned::new(conn, stream);
    while tls.conn.is_handshaking() {
        if let Err(err) = tls.conn.complete_io(&mut tls.sock) {
            state
                .lock()
                .expect("lock")
                .handshake_failures
                .push(err.to_string());
            return;
        }
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    state.lock().expect("lock").requests.push(HttpsRequest {
        request_line,
        headers,
        body,
    });
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{HTTPS_ANSWER}",
        HTTPS_ANSWER.len()
    );
    let _ = tls.write_all(answer.as_bytes());
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.conn.complete_io(&mut tls.sock);
}

/// Writes the CA PEM to a temp file (kept alive by the returned dir).
pub(crate) fn write_ca_file(pem: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("on-prem-ca.pem");
    std::fs::write(&path, pem).expect("CA file written");
    let path = path.display().to_string();
    (dir, path)
}

#[actix_web::test]
async fn an_https_subscriber_signed_by_the_configured_ca_passes() {
    let pki = make_pki();
    let (_ca_dir, ca_path) = write_ca_file(&pki.ca_pem);
    let subscriber = HttpsSubscriber::start(&pki);
    let app = spawn_app_with(&[
        ("ROLECALL_WEBHOOKS__CA_FILE", &ca_path),
        ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
    ])
    .await;
    let org = app.org("enterprise").await;

    // https stays required: the same subscriber over http is refused.
    test_url(
        &app,
        &org,
        &format!("http://localhost:{}/hook", subscriber.port),
    )
    .await
    .problem(400, "INVALID_URL");

    for (n, host) in ["localhost", "127.0.0.1"].into_iter().enumerate() {
        let url = format!("https://{host}:{}/hook", subscriber.port);
        let body = test_result(test_url(&app, &org, &url).await);
        assert_eq!(body["passed"], json!(true), "{url}: {body}");
        assert_eq!(body["status_code"], json!(200), "{body}");
        assert_eq!(body["response_body"], json!(HTTPS_ANSWER), "{body}");
        assert_eq!(body["error"], Value::Null, "{body}");
        assert!(body["secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("whsec_")));

        let requests = subscriber.requests();
        assert_eq!(requests.len(), n + 1, "one POST per test: {requests:?}");
        let request = &requests[n];
        assert_eq!(request.request_line, "POST /hook HTTP/1.1");
        assert_eq!(request.header("content-type"), "application/json");
        assert_eq!(request.header("x-service-event"), "test.preflight");
        assert_eq!(request.header("x-service-attempt"), "1");
        let delivery = request.header("x-service-delivery");
        assert!(!delivery.is_empty());
        assert_eq!(request.header("webhook-id"), delivery);
        let envelope: Value = serde_json::from_slice(&request.body).expect("JSON body");
        assert_eq!(envelope["event"], json!("test.preflight"));
        assert_eq!(
            envelope["data"],
            json!({
                "organization_id": org.id,
                "url": url,
                "events": ["member.added"],
                "test_id": body["test_id"],
            })
        );
    }
    assert_eq!(subscriber.handshake_failures(), Vec::<String>::new());
}

#[actix_web::test]
async fn an_https_subscriber_signed_by_an_unknown_ca_fails_the_test() {
    let pki = make_pki();
    let subscriber = HttpsSubscriber::start(&pki);
    let app = spawn_app_with(&[("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true")]).await;
    let org = app.org("enterprise").await;
    let url = format!("https://localhost:{}/hook", subscriber.port);

    let body = test_result(test_url(&app, &org, &url).await);
    assert_failed_without_response(&body);
    let error = body["error"].as_str().unwrap_or("").to_ascii_lowercase();
    assert!(
        error.contains("certificate"),
        "the error names the TLS failure: {body}"
    );
    assert!(
        subscriber.requests().is_empty(),
        "no request is sent over an untrusted connection: {:?}",
        subscriber.requests()
    );
    // The connection was made and refused during the handshake.
    let deadline = Instant::now() + Duration::from_secs(5);
    while subscriber.handshake_failures().is_empty() {
        assert!(Instant::now() < deadline, "the subscriber saw no handshake");
        actix_web::rt::time::sleep(Duration::from_millis(10)).await;
    }
    app.call(
        Method::PUT,
        &org.path("/webhook"),
        Some(&org.owner_token),
        Some(json!({"test_id": body["test_id"]})),
    )
    .await
    .problem(409, "TEST_REQUIRED");
}

/// `Application::build` with a fresh data dir (kept alive by the returned
/// dir) and these overrides.
async fn build_with(
    overrides: &[(&str, &str)],
) -> (tempfile::TempDir, Result<Application, String>) {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path().display().to_string();
    let mut all: Vec<(&str, &str)> = vec![
        ("ROLECALL_SERVER__LISTEN", "127.0.0.1:0"),
        ("ROLECALL_SERVER__WORKERS", "1"),
        ("ROLECALL_STORAGE__DATA_DIR", &dir),
        ("ROLECALL_ADMIN__TOKEN", ADMIN),
        ("ROLECALL_LOG__LEVEL", "warn"),
    ];
    all.extend_from_slice(overrides);
    let config = Config::with_overrides(&all).expect("config");
    let built = Application::build(config).await.map_err(|e| e.to_string());
    (data_dir, built)
}

/// Runs a built application and stops it again.
async fn run_and_stop(app: Application) {
    let handle = app.handle();
    let task = actix_web::rt::spawn(app.run_until_stopped());
    handle.stop(true).await;
    let _ = task.await;
}

#[actix_web::test]
async fn a_missing_or_invalid_ca_file_makes_startup_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-ca.pem").display().to_string();
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "this is not a certificate\n").expect("write");
    let key_only = dir.path().join("key-only.pem");
    let key = rcgen::KeyPair::generate().expect("key");
    std::fs::write(&key_only, key.serialize_pem()).expect("write");
    let broken = dir.path().join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!!\n-----END CERTIFICATE-----\n",
    )
    .expect("write");

    for path in [
        missing,
        garbage.display().to_string(),
        key_only.display().to_string(),
        broken.display().to_string(),
    ] {
        let (_data, built) = build_with(&[("ROLECALL_WEBHOOKS__CA_FILE", &path)]).await;
        match built {
            Ok(app) => {
                run_and_stop(app).await;
                panic!("startup must fail with webhooks.ca_file = {path}");
            }
            Err(err) => assert!(
                err.contains("ca_file"),
                "the error names the setting ({path}): {err}"
            ),
        }
    }

    // Positive control: a valid CA file starts.
    let pki = make_pki();
    let (_ca_dir, ca_path) = write_ca_file(&pki.ca_pem);
    let (_data, built) = build_with(&[("ROLECALL_WEBHOOKS__CA_FILE", &ca_path)]).await;
    run_and_stop(built.expect("a valid CA file starts")).await;
}

/// The one answer to a host that yields no address deliveries may use.
const NO_USABLE_ADDRESS: &str =
    "the URL's host does not resolve to an address that deliveries may use";

/// Issue 29, finding 5: with private networks refused, a name that does not
/// resolve and a name that resolves only to refused addresses get the same
/// 400, so an owner cannot map the operator's internal names; the
/// operator's log keeps the precise reason. The body runs in a network
/// namespace of its own with only loopback
/// ([`one_answer_for_missing_and_internal_hosts_inside`]), where looking up
/// a missing name fails on this machine instead of asking a DNS server.
#[test]
fn one_answer_for_missing_and_internal_hosts() {
    let inner = "webhook_policy::one_answer_for_missing_and_internal_hosts_inside";
    if !crate::netns::available() {
        crate::netns::skip("one_answer_for_missing_and_internal_hosts");
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let output = crate::netns::run(
        std::process::Command::new(exe)
            .args([
                inner,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(crate::netns::INSIDE, "1"),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the test inside the namespace failed:\n{stdout}\n{stderr}"
    );
}

/// The body of [`one_answer_for_missing_and_internal_hosts`]; only run
/// inside its namespace.
#[ignore = "run inside a network namespace by one_answer_for_missing_and_internal_hosts"]
#[actix_web::test]
async fn one_answer_for_missing_and_internal_hosts_inside() {
    assert!(
        std::env::var_os(crate::netns::INSIDE).is_some(),
        "runs only inside the namespace that one_answer_for_missing_and_internal_hosts makes"
    );
    let data = tempfile::tempdir().expect("tempdir");
    let (server, output) = crate::helpers::spawn_binary_capturing(
        data.path(),
        &[("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true")],
    );
    let app = crate::helpers::Running {
        server,
        client: crate::helpers::client(),
    };
    let (org, owner) = app.org(ADMIN, "Mapper").await;
    let mut details = Vec::new();
    for url in [
        "http://localhost:9/",
        "http://no-such-host.invalid/",
        "https://no-such-host.invalid/hook",
    ] {
        let reply = app
            .post(
                &format!("/organizations/{org}/webhook/test"),
                &owner,
                json!({"url": url, "events": ["member.added"]}),
            )
            .await;
        let body = reply.problem(400, "INVALID_URL");
        details.push(body["detail"].clone());
        assert_eq!(body["detail"], json!(NO_USABLE_ADDRESS), "{url}");
        assert_eq!(body.get("field"), None, "{url}: {body}");
    }
    // Nothing was recorded for either.
    let log = app
        .get(&format!("/organizations/{org}/webhook/deliveries"), &owner)
        .await
        .expect(200)
        .json();
    assert_eq!(log, json!({"items": [], "next_cursor": null}));
    drop(app);
    // The operator's log says which was which.
    let (stdout, _) = output.finish();
    let reasons: Vec<&String> = stdout
        .iter()
        .filter(|line| line.contains("webhook host refused"))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|l| l.contains("localhost resolves only to refused")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|l| l.contains("no-such-host.invalid could not be resolved")),
        "{reasons:?}"
    );
}
