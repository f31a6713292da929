//! Deliveries through an egress proxy (issue 32, CONTRACT §10): a real
//! `tinyproxy` on a loopback port, started by each test. Every attempt, the
//! Test's preflight included, goes through its CONNECT tunnel (TLS end to
//! end for https), unless `webhooks.no_proxy` names the host; the URL
//! policy still refuses private addresses; a proxy that wants credentials
//! answers 407, which fails the attempt with a clear error that never
//! holds them. Skipped, with the reason printed, where tinyproxy is not
//! installed, unless `ROLECALL_REQUIRE_PROXY` is set (CI sets it).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::helpers::{eventually, spawn_app_with, TestApp};
use crate::receiver::TestReceiver;
use crate::webhook_policy::{make_pki, test_result, test_url, write_ca_file, HttpsSubscriber};

/// A tinyproxy listening on 127.0.0.1; killed when dropped.
struct Tinyproxy {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Tinyproxy {
    /// Starts one (with `BasicAuth user password` when `auth` is given);
    /// `None`, after saying why, where tinyproxy is not installed.
    async fn start(auth: Option<(&str, &str)>) -> Option<Tinyproxy> {
        let installed = Command::new("tinyproxy")
            .arg("-v")
            .output()
            .is_ok_and(|out| out.status.success());
        if !installed {
            assert!(
                std::env::var_os("ROLECALL_REQUIRE_PROXY").is_none(),
                "ROLECALL_REQUIRE_PROXY is set but tinyproxy is not installed"
            );
            eprintln!("skipped: tinyproxy is not installed (apt-get install tinyproxy)");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = dir.path().join("tinyproxy.log");
        // No ConnectPort line: CONNECT to any port (the subscribers' are random).
        let mut config = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nLogLevel Connect\nMaxClients 100\n\
             LogFile \"{}\"\nAllow 127.0.0.1\n",
            log.display()
        );
        if let Some((user, password)) = auth {
            config.push_str(&format!("BasicAuth {user} {password}\n"));
        }
        let path = dir.path().join("tinyproxy.conf");
        std::fs::write(&path, config).expect("config written");
        let child = Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tinyproxy starts");
        let proxy = Tinyproxy {
            child,
            port,
            log,
            _dir: dir,
        };
        eventually(Duration::from_secs(10), "tinyproxy listening", || async {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        })
        .await;
        Some(proxy)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The CONNECT targets it logged, in order.
    fn tunnels(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let (_, rest) = line.split_once("Request (file descriptor")?;
                let (_, request) = rest.split_once("): ")?;
                let target = request.strip_prefix("CONNECT ")?;
                Some(target.split_whitespace().next()?.to_owned())
            })
            .collect()
    }
}

/// A server whose attempts go through `proxy_url`, with loopback
/// subscribers allowed (plus `extra`).
async fn through(proxy_url: &str, extra: &[(&str, &str)]) -> TestApp {
    let mut env = vec![
        ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
        ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "3000"),
        ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "200"),
        ("ROLECALL_WEBHOOKS__PROXY_URL", proxy_url),
    ];
    env.extend_from_slice(extra);
    spawn_app_with(&env).await
}

#[actix_web::test]
async fn an_http_subscriber_is_reached_through_the_proxy_tunnel() {
    let Some(proxy) = Tinyproxy::start(None).await else {
        return;
    };
    let receiver = TestReceiver::start().await;
    let app = through(&proxy.url(), &[]).await;
    let org = app.org("enterprise").await;
    app.setup_webhook(&org, &receiver.url, &["member.added"])
        .await;
    app.member(&org, &org.member_role).await;
    let received = receiver.wait_for(2, Duration::from_secs(10)).await;
    let events: Vec<String> = received
        .iter()
        .map(|r| r.header("x-service-event"))
        .collect();
    assert_eq!(events, ["test.preflight", "member.added"]);
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next());
    let target = format!("127.0.0.1:{}", port.unwrap_or_default());
    let tunnels = eventually(Duration::from_secs(5), "two tunnels logged", || async {
        let tunnels = proxy.tunnels();
        (tunnels.len() >= 2).then_some(tunnels)
    })
    .await;
    assert!(
        tunnels.iter().all(|t| *t == target),
        "every attempt tunnelled to {target}: {tunnels:?}"
    );
}

#[actix_web::test]
async fn an_https_subscriber_signed_by_the_test_ca_is_reached_through_the_proxy() {
    let Some(proxy) = Tinyproxy::start(None).await else {
        return;
    };
    let pki = make_pki();
    let (_ca_dir, ca_path) = write_ca_file(&pki.ca_pem);
    let subscriber = HttpsSubscriber::start(&pki);
    let app = through(
        &proxy.url(),
        &[
            ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "false"),
            ("ROLECALL_WEBHOOKS__CA_FILE", &ca_path),
        ],
    )
    .await;
    let org = app.org("enterprise").await;
    let url = format!("https://localhost:{}/hook", subscriber.port);
    let tested = test_result(test_url(&app, &org, &url).await);
    assert_eq!(tested["passed"], json!(true), "{tested}");
    assert_eq!(tested["status_code"], json!(200));
    let requests = subscriber.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].request_line, "POST /hook HTTP/1.1");
    assert_eq!(requests[0].header("x-service-event"), "test.preflight");
    assert_eq!(
        proxy.tunnels(),
        [format!("localhost:{}", subscriber.port)],
        "TLS ran inside the proxy's tunnel"
    );
}

#[actix_web::test]
async fn a_private_address_is_refused_before_anything_reaches_the_proxy() {
    let Some(proxy) = Tinyproxy::start(None).await else {
        return;
    };
    let receiver = TestReceiver::start().await;
    let app = through(
        &proxy.url(),
        &[("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "false")],
    )
    .await;
    let org = app.org("enterprise").await;
    // A literal, and a name resolving to loopback: both judged here. The
    // proxy's own address (127.0.0.1) is the operator's, and allowed.
    for url in [
        receiver.url.clone(),
        receiver.url.replace("127.0.0.1", "localhost"),
    ] {
        test_url(&app, &org, &url).await.problem(400, "INVALID_URL");
    }
    assert!(receiver.received().is_empty());
    assert!(proxy.tunnels().is_empty(), "{:?}", proxy.tunnels());
}

#[actix_web::test]
async fn a_proxy_that_wants_credentials_fails_the_attempt_with_407_and_takes_them_when_given() {
    let Some(proxy) = Tinyproxy::start(Some(("hooks", "s3cr3t-pass"))).await else {
        return;
    };
    let receiver = TestReceiver::start().await;
    let app = through(&proxy.url(), &[]).await;
    let org = app.org("enterprise").await;
    let refused = test_result(test_url(&app, &org, &receiver.url).await);
    assert_eq!(refused["passed"], json!(false), "{refused}");
    assert_eq!(refused["status_code"], json!(null));
    let error = refused["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        error.contains(&format!(
            "the proxy 127.0.0.1:{} refused the tunnel",
            proxy.port
        )) && error.contains("407"),
        "{error}"
    );
    assert!(receiver.received().is_empty());

    let with = format!("http://hooks:s3cr3t-pass@127.0.0.1:{}", proxy.port);
    let app = through(&with, &[]).await;
    let org = app.org("enterprise").await;
    let passed = test_result(test_url(&app, &org, &receiver.url).await);
    assert_eq!(passed["passed"], json!(true), "{passed}");
    assert_eq!(receiver.received().len(), 1);
    assert!(!passed.to_string().contains("s3cr3t-pass"));
}

#[actix_web::test]
async fn no_proxy_hosts_are_reached_directly() {
    let Some(proxy) = Tinyproxy::start(None).await else {
        return;
    };
    let receiver = TestReceiver::start().await;
    let app = through(
        &proxy.url(),
        &[("ROLECALL_WEBHOOKS__NO_PROXY", "internal.example, 127.0.0.1")],
    )
    .await;
    let org = app.org("enterprise").await;
    let tested = test_result(test_url(&app, &org, &receiver.url).await);
    assert_eq!(tested["passed"], json!(true), "{tested}");
    assert_eq!(receiver.received().len(), 1);
    // Through `localhost`, which no_proxy does not name: tunnelled.
    let by_name = receiver.url.replace("127.0.0.1", "localhost");
    let tested = test_result(test_url(&app, &org, &by_name).await);
    assert_eq!(tested["passed"], json!(true), "{tested}");
    let tunnels = proxy.tunnels();
    assert_eq!(tunnels.len(), 1, "only the localhost test: {tunnels:?}");
    assert!(tunnels[0].starts_with("localhost:"), "{tunnels:?}");
}

/// The attempt timeout covers the proxy's hop: a proxy that accepts and
/// never answers fails the attempt in time; one that cannot be reached
/// fails it at once, saying so. (No tinyproxy needed.)
#[actix_web::test]
async fn a_silent_or_absent_proxy_fails_the_attempt_within_its_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("a port");
    let silent_port = silent.local_addr().expect("address").port();
    let held = std::thread::spawn(move || {
        // Accepts, reads nothing, answers nothing, until the test ends.
        let connections: Vec<_> = silent.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(5));
        drop(connections);
    });
    let receiver = TestReceiver::start().await;
    let app = through(
        &format!("http://127.0.0.1:{silent_port}"),
        &[("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "500")],
    )
    .await;
    let org = app.org("enterprise").await;
    let started = std::time::Instant::now();
    let tested = test_result(test_url(&app, &org, &receiver.url).await);
    let took = started.elapsed();
    assert_eq!(tested["passed"], json!(false), "{tested}");
    let error = tested["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("timed out") || error.contains("Timeout"),
        "{error}"
    );
    assert!(
        took < Duration::from_secs(4),
        "bounded by the timeout: {took:?}"
    );
    drop(held);

    let closed = TcpListener::bind("127.0.0.1:0").expect("a port");
    let closed_port = closed.local_addr().expect("address").port();
    drop(closed);
    let app = through(&format!("http://127.0.0.1:{closed_port}"), &[]).await;
    let org = app.org("enterprise").await;
    let tested = test_result(test_url(&app, &org, &receiver.url).await);
    let error = tested["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!(
            "the proxy 127.0.0.1:{closed_port} could not be reached"
        )),
        "{error}"
    );
    assert!(receiver.received().is_empty());
}
