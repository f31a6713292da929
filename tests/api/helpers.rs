//! `spawn_app()` and typed request helpers over real HTTP.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actix_web::http::Method;
use rolecall::config::Config;
use rolecall::startup::Application;
use serde_json::{json, Value};
use tempfile::TempDir;

/// The admin token every in-process test server is configured with.
pub const ADMIN: &str = "test-admin-token-0123456789abcdef";

/// A response, fully read.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: awc::http::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value as text ("" when absent).
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    }

    /// Asserts the status, with the body in the message.
    #[track_caller]
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(
            self.status,
            status,
            "unexpected status; body: {}",
            String::from_utf8_lossy(&self.body)
        );
        self
    }

    /// Asserts the status, with the body in the message; the body as JSON.
    #[track_caller]
    pub fn json_with_status(&self, status: u16) -> Value {
        assert_eq!(
            self.status,
            status,
            "unexpected status; body: {}",
            String::from_utf8_lossy(&self.body)
        );
        self.json()
    }

    /// Asserts a problem+json error with `status` and `code`; returns the body.
    #[track_caller]
    pub fn problem(&self, status: u16, code: &str) -> Value {
        let body = self.json();
        assert_eq!(
            (self.status, body["code"].as_str().unwrap_or("")),
            (status, code),
            "unexpected error; body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.header("content-type"), "application/problem+json");
        assert_eq!(body["status"], json!(status));
        assert_eq!(body["type"], json!("about:blank"));
        assert!(body["title"].is_string() && body["detail"].is_string());
        body
    }
}

/// What a request carries.
pub struct Req<'a> {
    pub method: Method,
    pub path: String,
    pub token: Option<&'a str>,
    pub body: Option<Vec<u8>>,
    pub content_type: Option<&'a str>,
    pub headers: Vec<(&'a str, String)>,
}

impl<'a> Req<'a> {
    /// A request with a JSON body (when given) and a bearer token (when given).
    pub fn json(method: Method, path: &str, token: Option<&'a str>, body: Option<Value>) -> Self {
        let content_type = body.is_some().then_some("application/json");
        Req {
            method,
            path: path.to_owned(),
            token,
            body: body.map(|b| b.to_string().into_bytes()),
            content_type,
            headers: Vec::new(),
        }
    }

    /// The same request with one more header.
    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

/// A running server (in this process) and a client for it.
pub struct TestApp {
    pub address: String,
    pub port: u16,
    pub admin: String,
    pub data_dir: TempDir,
    pub client: awc::Client,
    pub handle: actix_web::dev::ServerHandle,
    pub registry: std::sync::Arc<rolecall::actors::registry::Registry>,
}

/// Starts a server with a fresh data dir and the given env-style overrides.
pub async fn spawn_app_with(overrides: &[(&str, &str)]) -> TestApp {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path().display().to_string();
    let mut all: Vec<(&str, &str)> = vec![
        ("ROLECALL_SERVER__LISTEN", "127.0.0.1:0"),
        ("ROLECALL_SERVER__WORKERS", "2"),
        ("ROLECALL_STORAGE__DATA_DIR", &dir),
        ("ROLECALL_ADMIN__TOKEN", ADMIN),
        ("ROLECALL_LOG__LEVEL", "warn"),
    ];
    let engine = crate::engines::Engine::current().env_for(data_dir.path());
    all.extend(engine.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    all.extend_from_slice(overrides);
    let config = Config::with_overrides(&all).expect("config");
    // Logs to stdout at this level, to follow a test that failed
    // (`ROLECALL_TEST_LOG=debug cargo test NAME -- --nocapture`).
    if let Ok(level) = std::env::var("ROLECALL_TEST_LOG") {
        let mut log = config.log.clone();
        log.level = level;
        rolecall::telemetry::init(&log);
    }
    let app = Application::build(config).await.expect("server starts");
    let port = app.port();
    let handle = app.handle();
    let registry = app.registry();
    actix_web::rt::spawn(app.run_until_stopped());
    TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        admin: ADMIN.to_owned(),
        data_dir,
        client: client(),
        handle,
        registry,
    }
}

/// Starts a server with a fresh data dir.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// How long the tests' clients keep an idle connection for reuse: well
/// under the server's keep-alive (actix-web's 5 s). At awc's default, 15 s,
/// a request sent after a wait of about 5 s (for deliveries, say) could go
/// out on a connection the server was closing and fail `Disconnected`; on
/// a loaded machine that happened in most runs.
pub const CLIENT_KEEP_ALIVE: Duration = Duration::from_secs(2);

/// An HTTP client with generous limits.
pub fn client() -> awc::Client {
    awc::Client::builder()
        .connector(awc::Connector::new().conn_keep_alive(CLIENT_KEEP_ALIVE))
        .timeout(Duration::from_secs(30))
        .disable_redirects()
        .finish()
}

/// POSTs a task titled `title` to `tasks` (the path of an organization's
/// tasks) of the server at `base`, with `token` and `Idempotency-Key: key`.
pub async fn create_task_keyed(
    client: &awc::Client,
    base: &str,
    tasks: &str,
    token: &str,
    (title, key): (&str, &str),
) -> Reply {
    let request = Req::json(
        actix_web::http::Method::POST,
        tasks,
        Some(token),
        Some(serde_json::json!({ "title": title })),
    )
    .header("Idempotency-Key", key);
    send(client, base, request).await
}

/// Sends any request to `base`.
pub async fn send(client: &awc::Client, base: &str, req: Req<'_>) -> Reply {
    let mut request = client.request(req.method, format!("{base}{}", req.path));
    if let Some(token) = req.token {
        request = request.insert_header(("Authorization", format!("Bearer {token}")));
    }
    if let Some(ct) = req.content_type {
        request = request.insert_header(("Content-Type", ct));
    }
    for (name, value) in req.headers {
        request = request.insert_header((name, value));
    }
    let result = match req.body {
        Some(body) => request.send_body(body).await,
        None => request.send().await,
    };
    let mut response = result.expect("request sent");
    let body = response
        .body()
        .limit(64 * 1024 * 1024)
        .await
        .expect("body read")
        .to_vec();
    Reply {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body,
    }
}

impl TestApp {
    /// A request with a JSON body (when given) and a bearer token (when given).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        send(
            &self.client,
            &self.address,
            Req::json(method, path, token, body),
        )
        .await
    }

    /// A raw request.
    pub async fn raw(&self, req: Req<'_>) -> Reply {
        send(&self.client, &self.address, req).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Reply {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Reply {
        self.call(Method::PATCH, path, Some(token), Some(body))
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Reply {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// Creates a user; returns its JSON.
    pub async fn create_user(&self, email: &str) -> Value {
        self.post(
            "/admin/users",
            &self.admin,
            json!({"email": email, "name": "Test User"}),
        )
        .await
        .expect(201)
        .json()
    }

    /// Issues an API token for a user.
    pub async fn create_token(&self, user_id: &str) -> String {
        let reply = self
            .post(
                &format!("/admin/users/{user_id}/tokens"),
                &self.admin,
                json!({"kind": "api"}),
            )
            .await;
        reply.expect(201).json()["token"]
            .as_str()
            .expect("token")
            .to_owned()
    }

    /// A new user with a token: (user id, token).
    pub async fn user(&self, email: &str) -> (String, String) {
        let user = self.create_user(email).await;
        let id = user["id"].as_str().expect("id").to_owned();
        let token = self.create_token(&id).await;
        (id, token)
    }

    /// A new organization owned by a new user.
    pub async fn org(&self, plan: &str) -> Org {
        let tag = rolecall::ids::new_v7().simple().to_string();
        let (owner_id, owner_token) = self.user(&format!("owner-{tag}@example.test")).await;
        let org = self
            .post(
                "/admin/organizations",
                &self.admin,
                json!({"name": format!("Org {tag}"), "plan": plan, "owner_user_id": owner_id}),
            )
            .await
            .expect(201)
            .json();
        let id = org["id"].as_str().expect("org id").to_owned();
        let roles = self
            .get(&format!("/organizations/{id}/roles"), &owner_token)
            .await
            .expect(200)
            .json();
        let role = |i: usize| {
            roles["items"][i]["id"]
                .as_str()
                .expect("role id")
                .to_owned()
        };
        Org {
            id,
            owner_id,
            owner_token,
            owner_role: role(0),
            member_role: role(1),
        }
    }

    /// Adds a new user to `org` with `role_id`: (user id, token).
    pub async fn member(&self, org: &Org, role_id: &str) -> (String, String) {
        let tag = rolecall::ids::new_v7().simple().to_string();
        let (id, token) = self.user(&format!("member-{tag}@example.test")).await;
        self.post(
            &org.path("/members"),
            &org.owner_token,
            json!({"user_id": id, "role_id": role_id}),
        )
        .await
        .expect(201);
        (id, token)
    }

    /// Creates a custom role as the owner (org must be enterprise): its id.
    pub async fn role(&self, org: &Org, name: &str, permissions: &[&str]) -> String {
        let reply = self
            .post(
                &org.path("/roles"),
                &org.owner_token,
                json!({"name": name, "permissions": permissions}),
            )
            .await;
        reply.expect(201).json()["id"]
            .as_str()
            .expect("role id")
            .to_owned()
    }

    /// The org's audit log, newest first (up to 200 records), as the owner.
    pub async fn audit(&self, org: &Org) -> Vec<Value> {
        let reply = self
            .get(&org.path("/audit-log?limit=200"), &org.owner_token)
            .await
            .expect(200);
        reply.json()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Stops the server.
    pub async fn stop(&self) {
        self.handle.stop(true).await;
    }
}

/// A test organization.
#[derive(Clone, Debug)]
pub struct Org {
    pub id: String,
    pub owner_id: String,
    pub owner_token: String,
    pub owner_role: String,
    pub member_role: String,
}

impl Org {
    /// `/organizations/{id}{suffix}`.
    pub fn path(&self, suffix: &str) -> String {
        format!("/organizations/{}{suffix}", self.id)
    }
}

/// A server running as a child process (the real binary); SIGKILLed when
/// dropped, so a failing test never leaves a server behind.
pub struct ChildServer {
    pub child: Child,
    pub address: String,
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the real `rolecall serve` on `data_dir` and waits for "listening on".
/// Its output is collected in memory and dropped with the server.
pub fn spawn_binary(data_dir: &std::path::Path, extra_env: &[(&str, &str)]) -> ChildServer {
    spawn_binary_capturing(data_dir, extra_env).0
}

/// Polls `check` every 20 ms until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// After a keyed create was refused with 503 (not kept): sends it until
/// the store takes it again, asserts that answer was run (not replayed),
/// and that sending it once more replays the same answer. The answer.
pub async fn runs_once_back_then_replays<F, Fut>(timeout: Duration, keyed: F) -> Reply
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Reply>,
{
    let created = eventually(timeout, "the keyed create runs", || async {
        let reply = keyed().await;
        (reply.status == 201).then_some(reply)
    })
    .await;
    assert_eq!(
        created.header("idempotent-replayed"),
        "",
        "run, not replayed"
    );
    let again = keyed().await;
    assert_eq!(again.header("idempotent-replayed"), "true");
    assert_eq!(again.json(), created.json());
    created
}

/// Config overrides for webhook tests: loopback http allowed, small timings.
pub const WEBHOOK_TEST_CONFIG: &[(&str, &str)] = &[
    ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
    ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
    ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "300"),
    ("ROLECALL_WEBHOOKS__RETRY_DELAY_MS", "200"),
];

impl TestApp {
    /// Tests then saves a webhook for `org`; returns the revealed secret.
    pub async fn setup_webhook(&self, org: &Org, url: &str, events: &[&str]) -> String {
        let test = self
            .post(
                &org.path("/webhook/test"),
                &org.owner_token,
                json!({"url": url, "events": events}),
            )
            .await
            .expect(200)
            .json();
        assert_eq!(test["passed"], json!(true), "webhook test failed: {test}");
        let secret = test["secret"]
            .as_str()
            .expect("first setup reveals the secret")
            .to_owned();
        self.call(
            Method::PUT,
            &org.path("/webhook"),
            Some(&org.owner_token),
            Some(json!({"test_id": test["test_id"]})),
        )
        .await
        .expect(200);
        secret
    }

    /// The org's delivery log (newest first, up to 200 records).
    pub async fn deliveries(&self, org: &Org, query: &str) -> Vec<Value> {
        let reply = self
            .get(
                &org.path(&format!("/webhook/deliveries?limit=200{query}")),
                &org.owner_token,
            )
            .await
            .expect(200);
        reply.json()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// Every line a child server wrote, collected by reader threads.
pub struct CapturedOutput {
    pub stdout: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl CapturedOutput {
    /// Waits (at most 10 s) for both pipes to close, which happens once the
    /// child has exited, and returns (stdout lines, stderr lines).
    pub fn finish(self) -> (Vec<String>, Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for reader in self.readers {
            while !reader.is_finished() {
                assert!(
                    Instant::now() < deadline,
                    "the child's output did not end within 10 s (is it still running?)"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            reader.join().expect("reader thread");
        }
        let take = |lines: &std::sync::Arc<std::sync::Mutex<Vec<String>>>| {
            std::mem::take(&mut *lines.lock().expect("lines"))
        };
        (take(&self.stdout), take(&self.stderr))
    }
}

/// Reads `pipe` line by line (lossily decoded) into `lines`, announcing each on `tx`;
/// with `ROLECALL_TEST_ECHO` set, also repeated on stderr (a spawned server's log).
fn collect_lines(
    pipe: impl std::io::Read + Send + 'static,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    tx: Option<std::sync::mpsc::Sender<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    let line = String::from_utf8_lossy(&buf).into_owned();
                    if std::env::var_os("ROLECALL_TEST_ECHO").is_some() {
                        eprintln!("SERVER| {line}");
                    }
                    if let Some(tx) = &tx {
                        let _ = tx.send(line.clone());
                    }
                    lines.lock().expect("lines").push(line);
                }
            }
        }
    })
}

/// Runs `rolecall serve` expecting it to refuse to start; answers its stderr.
pub fn refused_start(data_dir: &std::path::Path, env: &[(&str, &str)]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_rolecall"))
        .arg("serve")
        .env("ROLECALL_SERVER__LISTEN", "127.0.0.1:0")
        .env("ROLECALL_STORAGE__DATA_DIR", data_dir)
        .env("ROLECALL_ADMIN__TOKEN", ADMIN)
        .envs(crate::engines::Engine::current().env_for(data_dir))
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs");
    assert!(!output.status.success(), "start-up must fail");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Like [`spawn_binary`], but keeps every stdout and stderr line (those
/// before "listening on" included) for the test to inspect.
pub fn spawn_binary_capturing(
    data_dir: &std::path::Path,
    extra_env: &[(&str, &str)],
) -> (ChildServer, CapturedOutput) {
    launch_binary(data_dir, extra_env).listening()
}

/// A `rolecall serve` child that has not necessarily bound yet.
pub struct Launched {
    /// SIGKILLed when dropped; its address is known once it has bound.
    server: ChildServer,
    pub output: CapturedOutput,
    stdout_lines: std::sync::mpsc::Receiver<String>,
}

/// Starts the real `rolecall serve` on `data_dir` without waiting for it.
pub fn launch_binary(data_dir: &std::path::Path, extra_env: &[(&str, &str)]) -> Launched {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rolecall"));
    command
        .arg("serve")
        .env("ROLECALL_SERVER__LISTEN", "127.0.0.1:0")
        .env("ROLECALL_SERVER__WORKERS", "2")
        .env("ROLECALL_STORAGE__DATA_DIR", data_dir)
        .env("ROLECALL_ADMIN__TOKEN", ADMIN)
        .env("ROLECALL_LOG__FORMAT", "json")
        .envs(crate::engines::Engine::current().env_for(data_dir))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in extra_env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("binary starts");
    let stdout = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, stdout_lines) = std::sync::mpsc::channel();
    let (child_stdout, child_stderr) = (
        child.stdout.take().expect("stdout"),
        child.stderr.take().expect("stderr"),
    );
    let readers = vec![
        collect_lines(child_stdout, stdout.clone(), Some(tx)),
        collect_lines(child_stderr, stderr.clone(), None),
    ];
    Launched {
        server: ChildServer {
            child,
            address: String::new(),
        },
        output: CapturedOutput {
            stdout,
            stderr,
            readers,
        },
        stdout_lines,
    }
}

impl Launched {
    /// Whether it printed "listening on" yet.
    pub fn has_bound(&self) -> bool {
        let lines = self.output.stdout.lock().expect("lines");
        lines.iter().any(|line| line.contains("listening on "))
    }

    /// Waits (at most 30 s) for "listening on": the server and its output.
    pub fn listening(mut self) -> (ChildServer, CapturedOutput) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let address = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.stdout_lines.recv_timeout(left) {
                Ok(line) => line,
                Err(err) => {
                    panic!(
                        "no 'listening on' line in time ({err}); stderr: {:?}",
                        self.output.stderr.lock().expect("lines")
                    );
                }
            };
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                    .collect();
                break format!("http://{addr}");
            }
        };
        self.server.address = address;
        (self.server, self.output)
    }
}

/// A running `rolecall` child process (SIGKILLed when dropped) and a client.
pub struct Running {
    pub server: ChildServer,
    pub client: awc::Client,
}

impl Running {
    pub fn start(data_dir: &std::path::Path, env: &[(&str, &str)]) -> Self {
        Running {
            server: spawn_binary(data_dir, env),
            client: client(),
        }
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        send(
            &self.client,
            &self.server.address,
            Req::json(method, path, token, body),
        )
        .await
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Reply {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Reply {
        self.call(Method::PATCH, path, Some(token), Some(body))
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Reply {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// A new user with an API token, made with `admin`: (user id, token).
    pub async fn user(&self, admin: &str, email: &str) -> (String, String) {
        let user = self
            .post(
                "/admin/users",
                admin,
                json!({"email": email, "name": email}),
            )
            .await
            .expect(201)
            .json();
        let id = user["id"].as_str().expect("user id").to_owned();
        let token = self
            .post(
                &format!("/admin/users/{id}/tokens"),
                admin,
                json!({"kind": "api"}),
            )
            .await
            .expect(201)
            .json();
        (id, token["token"].as_str().expect("token").to_owned())
    }

    /// A new free organization named `name`, made with `admin`, and its
    /// owner's token: (org id, owner token).
    pub async fn org(&self, admin: &str, name: &str) -> (String, String) {
        let email = format!("owner@{}.test", name.to_lowercase());
        let (owner, token) = self.user(admin, &email).await;
        let org = self
            .post(
                "/admin/organizations",
                admin,
                json!({"name": name, "plan": "free", "owner_user_id": owner}),
            )
            .await
            .expect(201)
            .json();
        (org["id"].as_str().expect("org id").to_owned(), token)
    }

    /// Sends SIGTERM and waits (polling, at most 10 s) for the exit; asserts exit 0.
    pub async fn stop_gracefully(&mut self) {
        let pid = self.server.child.id();
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(10);
        let exit = loop {
            if let Some(exit) = self.server.child.try_wait().expect("try_wait") {
                break exit;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within 10 s of SIGTERM"
            );
            actix_web::rt::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(exit.success(), "graceful shutdown must exit 0, got {exit}");
    }

    /// SIGKILL, no chance to flush anything.
    pub fn kill_hard(&mut self) {
        self.server.child.kill().expect("SIGKILL sent");
        let exit = self.server.child.wait().expect("child reaped");
        assert!(!exit.success(), "a SIGKILLed server cannot exit 0");
    }
}
