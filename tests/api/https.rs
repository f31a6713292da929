//! HTTPS built in (`server.tls_cert_file`, `server.tls_key_file`), against
//! the real binary with certificates from a test CA: the API over TLS 1.2
//! and 1.3 and nothing in clear; SIGHUP serves a renewed certificate to new
//! connections while an open one carries on; a broken renewal keeps the
//! certificate in use; a missing or mismatched file stops start-up; and the
//! dashboard signs in over HTTPS in a real browser under its strict CSP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, ProtocolVersion, RootCertStore, StreamOwned};
use serde_json::json;
use tempfile::TempDir;

use crate::dashboard_browser::browser_available;
use crate::helpers::{
    eventually, refused_start, spawn_binary_capturing, CapturedOutput, Running, ADMIN,
};
use crate::pki::{Leaf, TestCa};
use crate::webdriver::ChromeDriver;

/// The certificate and key files the server is configured with.
struct CertFiles {
    dir: TempDir,
    cert: String,
    key: String,
}

impl CertFiles {
    fn new(leaf: &Leaf) -> CertFiles {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = |name: &str| dir.path().join(name).display().to_string();
        let files = CertFiles {
            cert: path("server.crt"),
            key: path("server.key"),
            dir,
        };
        files.install(&leaf.pem, &leaf.key_pem);
        files
    }

    /// Replaces both files the way a renewal tool does: write aside, rename.
    fn install(&self, cert_pem: &str, key_pem: &str) {
        for (path, pem) in [(&self.cert, cert_pem), (&self.key, key_pem)] {
            let aside = self.dir.path().join("incoming.pem");
            std::fs::write(&aside, pem).expect("write aside");
            std::fs::rename(&aside, path).expect("rename into place");
        }
    }

    fn env(&self) -> [(&str, &str); 2] {
        [
            ("ROLECALL_SERVER__TLS_CERT_FILE", self.cert.as_str()),
            ("ROLECALL_SERVER__TLS_KEY_FILE", self.key.as_str()),
        ]
    }
}

/// A client configuration that trusts only `ca_pem`, for the given versions.
fn trusting(
    ca_pem: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca_pem) {
        roots.add(cert).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Every connection a full handshake: a resumed session shows the
    // certificate of the session it resumes, not the one served now.
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

fn certificates(pem: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("PEM certificates")
}

/// One blocking TLS connection to 127.0.0.1, HTTP/1.1 with keep-alive.
struct TlsConnection {
    stream: BufReader<StreamOwned<ClientConnection, TcpStream>>,
}

impl TlsConnection {
    /// Connects and completes the handshake (or answers why it failed).
    fn open(port: u16, config: &Arc<ClientConfig>) -> Result<TlsConnection, String> {
        let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let name = ServerName::try_from("127.0.0.1").expect("server name");
        let connection =
            ClientConnection::new(config.clone(), name.to_owned()).map_err(|e| e.to_string())?;
        let mut stream = StreamOwned::new(connection, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| e.to_string())?;
        }
        Ok(TlsConnection {
            stream: BufReader::new(stream),
        })
    }

    /// The SHA-256 of the certificate the server presented.
    fn leaf(&self) -> String {
        let certs = self.stream.get_ref().conn.peer_certificates();
        hex_sha256(&certs.expect("a server certificate")[0])
    }

    fn version(&self) -> Option<ProtocolVersion> {
        self.stream.get_ref().conn.protocol_version()
    }

    /// `GET path` on this connection: (status, body).
    fn get(&mut self, path: &str) -> (u16, String) {
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let stream = self.stream.get_mut();
        stream.write_all(request.as_bytes()).expect("request sent");
        stream.flush().expect("request flushed");
        let mut status_line = String::new();
        self.stream
            .read_line(&mut status_line)
            .expect("status line");
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP status line: {status_line:?}"));
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).expect("header line");
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().expect("content-length");
                }
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).expect("body");
        (status, String::from_utf8(body).expect("utf-8 body"))
    }
}

/// The port of a server the helpers found as `http://127.0.0.1:PORT`.
fn port_of(server: &Running) -> u16 {
    let address = &server.server.address;
    address
        .rsplit(':')
        .next()
        .expect("port")
        .parse()
        .expect("port")
}

/// Starts the binary with `files`, and points the helpers' client at its
/// HTTPS address with `ca_pem` as the only trusted root.
fn start_https(data_dir: &Path, files: &CertFiles, ca_pem: &str) -> (Running, CapturedOutput) {
    let (server, output) = spawn_binary_capturing(data_dir, &files.env());
    let mut running = Running {
        server,
        client: crate::helpers::client(),
    };
    let port = port_of(&running);
    running.server.address = format!("https://127.0.0.1:{port}");
    let connector = awc::Connector::new()
        .rustls_0_23(trusting(ca_pem, rustls::ALL_VERSIONS))
        .conn_keep_alive(crate::helpers::CLIENT_KEEP_ALIVE);
    running.client = awc::Client::builder()
        .connector(connector)
        .timeout(Duration::from_secs(30))
        .disable_redirects()
        .finish();
    (running, output)
}

/// `rolecall admin --url <the https address> --json <args> --email cli@rolecall.test --name CLI`.
async fn admin_cli(server: &Running, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rolecall"));
    command
        .arg("admin")
        .args(["--url", &server.server.address, "--json"])
        .args(args)
        .args(["--email", "cli@rolecall.test", "--name", "CLI"])
        .env("ROLECALL_ADMIN__TOKEN", ADMIN);
    actix_web::rt::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .expect("joined")
}

fn sighup(server: &Running) {
    let pid = server.server.child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -HUP {pid}");
}

/// Waits for a log line holding `needle`.
async fn logged(output: &CapturedOutput, needle: &str) -> String {
    eventually(Duration::from_secs(10), needle, || async {
        let lines = output.stdout.lock().expect("lines");
        lines.iter().find(|line| line.contains(needle)).cloned()
    })
    .await
}

#[actix_web::test]
async fn the_api_is_served_over_tls_and_sighup_renews_the_certificate_without_dropping_connections()
{
    let ca = TestCa::new("rolecall test CA");
    let (first, second) = (ca.issue("first"), ca.issue("second"));
    let files = CertFiles::new(&first);
    let data = tempfile::tempdir().expect("tempdir");
    let (server, output) = start_https(data.path(), &files, &ca.pem);
    let port = port_of(&server);

    let listening = logged(&output, "listening on").await;
    assert!(listening.contains(r#""scheme":"https""#), "{listening}");
    let (first_sha256, second_sha256) = (hex_sha256(&first.der), hex_sha256(&second.der));
    assert!(listening.contains(&first_sha256), "{listening}");

    // The API over TLS, through an ordinary HTTPS client.
    let health = server
        .call(awc::http::Method::GET, "/healthz", None, None)
        .await;
    assert_eq!(health.expect(200).json(), json!({"status": "ok"}));
    let (user, token) = server.user(ADMIN, "tls@rolecall.test").await;
    let me = server.get("/me", &token).await.expect(200).json();
    assert_eq!(me["user"]["email"], json!("tls@rolecall.test"));

    // `rolecall admin` over HTTPS: with the on-prem CA it works, without it
    // the certificate is refused.
    let ca_file = files.dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.pem).expect("write CA");
    let ca_file = ca_file.display().to_string();
    let created = admin_cli(&server, &["--ca-file", &ca_file, "user", "create"]).await;
    assert!(created.status.success(), "{created:?}");
    let created: serde_json::Value = serde_json::from_slice(&created.stdout).expect("JSON");
    assert_eq!(created["email"], json!("cli@rolecall.test"));
    let refused = admin_cli(&server, &["user", "create"]).await;
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("cannot reach https://127.0.0.1:"),
        "{stderr}"
    );

    // TLS 1.3 by default, TLS 1.2 for the clients that need it.
    for (versions, expected) in [
        (&[&rustls::version::TLS13][..], ProtocolVersion::TLSv1_3),
        (&[&rustls::version::TLS12][..], ProtocolVersion::TLSv1_2),
    ] {
        let mut connection = TlsConnection::open(port, &trusting(&ca.pem, versions))
            .unwrap_or_else(|e| panic!("{expected:?} handshake: {e}"));
        assert_eq!(connection.version(), Some(expected));
        assert_eq!(
            connection.get("/healthz"),
            (200, r#"{"status":"ok"}"#.to_owned())
        );
    }

    // Nothing in clear: a plain HTTP request gets no HTTP answer.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("write");
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plain HTTP must not be answered: {:?}",
        String::from_utf8_lossy(&answer)
    );

    // A connection opened before the renewal.
    let config = trusting(&ca.pem, rustls::ALL_VERSIONS);
    let mut open = TlsConnection::open(port, &config).expect("handshake");
    assert_eq!(open.leaf(), first_sha256);
    assert_eq!(open.get("/healthz").0, 200);

    // Renewal: a new key and certificate, then SIGHUP.
    files.install(&second.pem, &second.key_pem);
    sighup(&server);
    let reloaded = logged(&output, "reloaded the HTTPS certificate").await;
    assert!(reloaded.contains(&second_sha256), "{reloaded}");
    let fresh = TlsConnection::open(port, &config).expect("handshake after reload");
    assert_eq!(
        fresh.leaf(),
        second_sha256,
        "new connections get the new certificate"
    );
    assert_eq!(
        open.get("/healthz"),
        (200, r#"{"status":"ok"}"#.to_owned()),
        "the connection opened before the reload carries on"
    );
    assert_eq!(open.leaf(), first_sha256);
    let me = server.get("/me", &token).await.expect(200).json();
    assert_eq!(me["user"]["id"], json!(user));

    // A renewal half done (the third certificate, the second key) is refused
    // and the second certificate stays in use.
    let third = ca.issue("third");
    files.install(&third.pem, &second.key_pem);
    sighup(&server);
    let kept = logged(&output, "kept the certificate in use").await;
    assert!(
        kept.contains("is not the key of the certificate") && kept.contains(&files.key),
        "{kept}"
    );
    assert!(kept.contains(&second_sha256), "{kept}");
    let after = TlsConnection::open(port, &config).expect("handshake after a bad reload");
    assert_eq!(after.leaf(), second_sha256);
}

fn hex_sha256(der: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A case, the environment it starts with, and what stderr must say.
type Refusal<'a> = (&'a str, Vec<(&'a str, &'a str)>, String);

#[test]
fn a_missing_half_set_or_mismatched_certificate_stops_start_up() {
    let ca = TestCa::new("rolecall test CA");
    let (one, other) = (ca.issue("one"), ca.issue("other"));
    let files = CertFiles::new(&one);
    let dir = files.dir.path();
    let missing = dir.join("missing.crt").display().to_string();
    let garbage = dir.join("garbage.key");
    std::fs::write(&garbage, "not a key\n").expect("write");
    let garbage = garbage.display().to_string();
    let other_key = dir.join("other.key");
    std::fs::write(&other_key, &other.key_pem).expect("write");
    let other_key = other_key.display().to_string();

    let cases: [Refusal; 5] = [
        (
            "a certificate without a key",
            vec![("ROLECALL_SERVER__TLS_CERT_FILE", files.cert.as_str())],
            "server.tls_cert_file and server.tls_key_file go together".to_owned(),
        ),
        (
            "a key without a certificate",
            vec![("ROLECALL_SERVER__TLS_KEY_FILE", files.key.as_str())],
            "server.tls_cert_file and server.tls_key_file go together".to_owned(),
        ),
        (
            "a missing certificate file",
            vec![
                ("ROLECALL_SERVER__TLS_CERT_FILE", missing.as_str()),
                ("ROLECALL_SERVER__TLS_KEY_FILE", files.key.as_str()),
            ],
            format!("server.tls_cert_file {missing}: "),
        ),
        (
            "a key file that holds no key",
            vec![
                ("ROLECALL_SERVER__TLS_CERT_FILE", files.cert.as_str()),
                ("ROLECALL_SERVER__TLS_KEY_FILE", garbage.as_str()),
            ],
            format!("server.tls_key_file {garbage}: "),
        ),
        (
            "the key of another certificate",
            vec![
                ("ROLECALL_SERVER__TLS_CERT_FILE", files.cert.as_str()),
                ("ROLECALL_SERVER__TLS_KEY_FILE", other_key.as_str()),
            ],
            format!(
                "server.tls_key_file {other_key} is not the key of the certificate in \
                 server.tls_cert_file {}",
                files.cert
            ),
        ),
    ];
    for (case, env, message) in cases {
        let data = tempfile::tempdir().expect("tempdir");
        let stderr = refused_start(data.path(), &env);
        assert!(stderr.contains(&message), "{case}: {stderr}");
        assert!(
            std::fs::read_dir(data.path())
                .expect("data dir")
                .next()
                .is_none(),
            "{case}: refused before the store was opened"
        );
    }
}

#[actix_web::test]
async fn the_dashboard_signs_in_over_https_under_its_strict_csp() {
    if !browser_available() {
        return;
    }
    let ca = TestCa::new("rolecall test CA");
    let leaf = ca.issue("dashboard");
    let files = CertFiles::new(&leaf);
    let data = tempfile::tempdir().expect("tempdir");
    let (server, _output) = start_https(data.path(), &files, &ca.pem);
    let (owner, _) = server.user(ADMIN, "ada@tls.test").await;
    let session_token = server
        .post(
            &format!("/admin/users/{owner}/tokens"),
            ADMIN,
            json!({"kind": "session", "name": "browser over https"}),
        )
        .await
        .expect(201)
        .json()["token"]
        .as_str()
        .expect("token")
        .to_owned();
    server
        .post(
            "/admin/organizations",
            ADMIN,
            json!({"name": "Secure Robotics", "plan": "enterprise", "owner_user_id": owner}),
        )
        .await
        .expect(201);

    let page = server
        .call(awc::http::Method::GET, "/", None, None)
        .await
        .expect(200);
    assert_eq!(
        page.header("content-security-policy"),
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; \
         form-action 'none'"
    );

    // Chromium trusts exactly this certificate's key, as if the CA were installed.
    let chromedriver = ChromeDriver::start().await;
    let session = chromedriver
        .session_with(&[format!(
            "--ignore-certificate-errors-spki-list={}",
            leaf.spki_sha256
        )])
        .await;
    session.goto(&format!("{}/", server.server.address)).await;
    let token = session.wait_for("#token").await;
    session
        .send_keys(&token, &format!("{session_token}\u{E007}"))
        .await;
    session.wait_text("main h1", "Roles").await;
    let picker = session.text_of("#org-picker").await;
    assert!(picker.contains("Secure Robotics"), "{picker:?}");
    assert_eq!(
        session.execute("return location.protocol;", vec![]).await,
        json!("https:")
    );
    assert_eq!(
        session
            .execute("return window.isSecureContext;", vec![])
            .await,
        json!(true)
    );
    let errors = session.console_errors().await;
    assert!(errors.is_empty(), "browser console errors: {errors:#?}");
    session.quit().await;
    drop(chromedriver);
}
