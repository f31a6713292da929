//! A minimal W3C WebDriver client over `awc`: enough to drive Debian's
//! Chromium through its chromedriver, plus polling helpers with deadlines.
//!
//! `ChromeDriver::start` runs `/usr/bin/chromedriver` on a free loopback port
//! in its own process group; dropping it kills that group (chromedriver and
//! the browser it started), also when a test panics.
#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};
use tempfile::TempDir;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long the polling helpers wait before failing.
pub const WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);

/// Why the browser test cannot run here, if it cannot.
pub fn missing_browser() -> Option<String> {
    [CHROMIUM, CHROMEDRIVER]
        .iter()
        .find(|path| !Path::new(path).exists())
        .map(|path| format!("{path} is not installed (apt-get install chromium chromium-driver)"))
}

/// A running chromedriver; killed with its process group on drop.
pub struct ChromeDriver {
    child: Child,
    url: String,
    client: awc::Client,
}

impl ChromeDriver {
    /// Starts chromedriver on a free loopback port and waits until it is ready.
    pub async fn start() -> ChromeDriver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let driver = ChromeDriver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            client: awc::Client::builder()
                .timeout(Duration::from_secs(60))
                .finish(),
        };
        let deadline = Instant::now() + WAIT;
        loop {
            let ready = match driver
                .client
                .get(format!("{}/status", driver.url))
                .send()
                .await
            {
                Ok(mut response) => response
                    .json::<Value>()
                    .await
                    .is_ok_and(|v| v["value"]["ready"] == json!(true)),
                Err(_) => false,
            };
            if ready {
                return driver;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            actix_web::rt::time::sleep(POLL).await;
        }
    }

    /// A new headless Chromium session with its own profile directory.
    pub async fn session(&self) -> Session {
        self.session_with(&[]).await
    }

    /// A session with more Chromium flags (`extra`).
    pub async fn session_with(&self, extra: &[String]) -> Session {
        let profile = tempfile::tempdir().expect("profile dir");
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--lang=en-US",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([format!("--user-data-dir={}", profile.path().display())])
        .chain(extra.iter().cloned())
        .collect::<Vec<_>>();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let value = call(
            &self.client,
            awc::http::Method::POST,
            &format!("{}/session", self.url),
            Some(capabilities),
        )
        .await
        .unwrap_or_else(|e| panic!("new session: {e}"));
        let id = value["sessionId"].as_str().expect("session id").to_owned();
        Session {
            client: self.client.clone(),
            base: format!("{}/session/{id}", self.url),
            _profile: profile,
        }
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        // The whole group: chromedriver and the Chromium processes it started.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
pub struct Session {
    client: awc::Client,
    base: String,
    /// Kept until the session ends: Chromium's profile for this session.
    _profile: TempDir,
}

/// A found element: its WebDriver reference (`{"element-6066-…": id}`).
#[derive(Clone, Debug)]
pub struct Element(Value);

impl Element {
    fn id(&self) -> String {
        self.0
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }
}

/// Sends one command; its `value`, or the WebDriver error as text.
async fn call(
    client: &awc::Client,
    method: awc::http::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let request = client.request(method, url);
    let sent = match body {
        Some(body) => request.send_json(&body).await,
        None => request.send().await,
    };
    let mut response = sent.map_err(|e| format!("webdriver request failed: {e}"))?;
    let reply: Value = response
        .json()
        .limit(64 * 1024 * 1024)
        .await
        .map_err(|e| format!("webdriver reply unreadable: {e}"))?;
    if response.status().is_success() {
        Ok(reply["value"].clone())
    } else {
        Err(format!(
            "{}: {}",
            reply["value"]["error"].as_str().unwrap_or("error"),
            reply["value"]["message"]
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("")
        ))
    }
}

impl Session {
    async fn try_cmd(
        &self,
        method: awc::http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        call(&self.client, method, &format!("{}{path}", self.base), body).await
    }

    async fn cmd(&self, method: awc::http::Method, path: &str, body: Option<Value>) -> Value {
        self.try_cmd(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("webdriver {path}: {e}"))
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.cmd(awc::http::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Value {
        self.cmd(awc::http::Method::GET, path, None).await
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({ "url": url })).await;
    }

    /// Reloads the page.
    pub async fn refresh(&self) {
        self.post("/refresh", json!({})).await;
    }

    /// The first element matching `css`, if any.
    pub async fn find(&self, css: &str) -> Option<Element> {
        self.try_cmd(
            awc::http::Method::POST,
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )
        .await
        .ok()
        .map(Element)
    }

    /// Every element matching `css`.
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self
            .post("/elements", json!({"using": "css selector", "value": css}))
            .await;
        found
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(Element)
            .collect()
    }

    /// Clicks the element.
    pub async fn click(&self, element: &Element) {
        self.post(&format!("/element/{}/click", element.id()), json!({}))
            .await;
    }

    /// Empties an input.
    pub async fn clear(&self, element: &Element) {
        self.post(&format!("/element/{}/clear", element.id()), json!({}))
            .await;
    }

    /// Types `text` into the element (WebDriver key codes allowed, e.g. `\u{E007}` Enter).
    pub async fn send_keys(&self, element: &Element, text: &str) {
        self.post(
            &format!("/element/{}/value", element.id()),
            json!({ "text": text }),
        )
        .await;
    }

    /// The element's rendered text.
    pub async fn text(&self, element: &Element) -> String {
        self.get(&format!("/element/{}/text", element.id()))
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// A DOM property of the element (`value`, `checked`, `disabled`…).
    pub async fn property(&self, element: &Element, name: &str) -> Value {
        self.get(&format!("/element/{}/property/{name}", element.id()))
            .await
    }

    /// An attribute of the element.
    pub async fn attribute(&self, element: &Element, name: &str) -> Option<String> {
        self.get(&format!("/element/{}/attribute/{name}", element.id()))
            .await
            .as_str()
            .map(str::to_owned)
    }

    /// Whether the element is enabled.
    pub async fn enabled(&self, element: &Element) -> bool {
        self.get(&format!("/element/{}/enabled", element.id()))
            .await
            .as_bool()
            .unwrap_or(false)
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.post("/execute/sync", json!({ "script": script, "args": args }))
            .await
    }

    /// Sets the outer window size.
    pub async fn set_window(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({ "width": width, "height": height }))
            .await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let encoded = self.get("/screenshot").await;
        STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .expect("screenshot is base64")
    }

    /// The browser console's SEVERE entries since the last call (chromedriver's
    /// log extension): uncaught exceptions, CSP violations, failed loads.
    pub async fn console_errors(&self) -> Vec<String> {
        let entries = self.post("/se/log", json!({"type": "browser"})).await;
        entries
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["level"] == json!("SEVERE"))
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Ends the session (closes the browser).
    pub async fn quit(&self) {
        let _ = self.try_cmd(awc::http::Method::DELETE, "", None).await;
    }

    // ------------------------------------------------------------ polling

    /// Waits for an element matching `css`.
    pub async fn wait_for(&self, css: &str) -> Element {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(element) = self.find(css).await {
                return element;
            }
            assert!(Instant::now() < deadline, "timed out waiting for `{css}`");
            actix_web::rt::time::sleep(POLL).await;
        }
    }

    /// Waits until no element matches `css`.
    pub async fn wait_gone(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        while self.find(css).await.is_some() {
            assert!(Instant::now() < deadline, "`{css}` did not go away");
            actix_web::rt::time::sleep(POLL).await;
        }
    }

    /// The text of the first element matching `css` ("" when there is none).
    pub async fn text_of(&self, css: &str) -> String {
        let value = self
            .execute(
                "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';",
                vec![json!(css)],
            )
            .await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until the element matching `css` shows text containing `needle`; returns the text.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = self.text_of(css).await;
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for `{css}` to contain {needle:?}; it shows {text:?}"
            );
            actix_web::rt::time::sleep(POLL).await;
        }
    }

    /// Waits until the element matching `css` is enabled (`true`) or disabled (`false`).
    pub async fn wait_enabled(&self, css: &str, enabled: bool) -> Element {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(element) = self.find(css).await {
                if self.enabled(&element).await == enabled {
                    return element;
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for `{css}` to be {}",
                if enabled { "enabled" } else { "disabled" }
            );
            actix_web::rt::time::sleep(POLL).await;
        }
    }
}
