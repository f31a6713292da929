//! `TestReceiver`: a real HTTP subscriber on loopback whose behaviour can be
//! switched while a test runs, recording every request it gets.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::web::Bytes;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use futures_util::stream;

/// How the receiver answers.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// Answer `status` with `body` after `delay`.
    Respond {
        status: u16,
        body: String,
        delay: Duration,
    },
    /// Answer 200 with headers, then a body that never ends.
    EndlessBody,
    /// Answer 303 See Other to `location`.
    Redirect(String),
}

impl Behavior {
    /// 200 "ok" at once.
    pub fn ok() -> Self {
        Behavior::status(200)
    }

    /// `status` with a short body, at once.
    pub fn status(status: u16) -> Self {
        Behavior::Respond {
            status,
            body: format!("answer {status}"),
            delay: Duration::ZERO,
        }
    }

    /// 200 after `delay`.
    pub fn slow(delay: Duration) -> Self {
        Behavior::Respond {
            status: 200,
            body: "late".into(),
            delay,
        }
    }
}

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    /// A header's value ("" when absent); names compare case-insensitively.
    pub fn header(&self, name: &str) -> String {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The title of the resource the event is about ("" when none).
    pub fn title(&self) -> String {
        self.json()["data"]["title"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    /// Envelopes that did not validate against their published schema.
    invalid: Vec<String>,
    /// Answers for the next requests, then `default`.
    script: VecDeque<Behavior>,
    default: Option<Behavior>,
    /// Requests being answered now, and the most at once so far.
    answering: usize,
    most_answering: usize,
}

/// A running subscriber.
#[derive(Clone)]
pub struct TestReceiver {
    pub url: String,
    pub port: u16,
    state: Arc<Mutex<State>>,
}

async fn handle(
    req: HttpRequest,
    body: Bytes,
    state: web::Data<Arc<Mutex<State>>>,
) -> HttpResponse {
    let invalid = crate::event_schemas::check_envelope(&body);
    let behavior = {
        let mut state = state.lock().unwrap();
        state.invalid.extend(invalid);
        state.received.push(Received {
            path: req.path().to_owned(),
            headers: req
                .headers()
                .iter()
                .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            body: body.to_vec(),
            at: Instant::now(),
        });
        state.answering += 1;
        state.most_answering = state.most_answering.max(state.answering);
        state
            .script
            .pop_front()
            .or_else(|| state.default.clone())
            .unwrap_or_else(Behavior::ok)
    };
    // Counted until the response is built (the sender's attempt ends only
    // after), or the request is dropped.
    let _answering = Answering(state.get_ref().clone());
    respond(behavior).await
}

/// One request being answered.
struct Answering(Arc<Mutex<State>>);

impl Drop for Answering {
    fn drop(&mut self) {
        if let Ok(mut state) = self.0.lock() {
            state.answering -= 1;
        }
    }
}

async fn respond(behavior: Behavior) -> HttpResponse {
    match behavior {
        Behavior::Respond {
            status,
            body,
            delay,
        } => {
            if !delay.is_zero() {
                actix_web::rt::time::sleep(delay).await;
            }
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).body(body)
        }
        Behavior::EndlessBody => {
            let chunks = stream::unfold((), |_| async {
                actix_web::rt::time::sleep(Duration::from_millis(5)).await;
                Some((
                    Ok::<_, actix_web::Error>(Bytes::from_static(&[b'x'; 16])),
                    (),
                ))
            });
            HttpResponse::Ok().streaming(chunks)
        }
        Behavior::Redirect(location) => HttpResponse::SeeOther()
            .insert_header(("Location", location))
            .finish(),
    }
}

impl TestReceiver {
    /// Starts a receiver on 127.0.0.1 answering 200 by default.
    pub async fn start() -> TestReceiver {
        let state = Arc::new(Mutex::new(State::default()));
        let data = web::Data::new(state.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(handle))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .bind(("127.0.0.1", 0))
        .expect("receiver binds");
        let port = server.addrs()[0].port();
        actix_web::rt::spawn(server.run());
        TestReceiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            port,
            state,
        }
    }

    /// Answers every later request with `behavior`.
    pub fn set(&self, behavior: Behavior) {
        self.state.lock().unwrap().default = Some(behavior);
    }

    /// Answers the next requests with these, in order, then the default.
    pub fn script(&self, behaviors: Vec<Behavior>) {
        self.state.lock().unwrap().script.extend(behaviors);
    }

    /// The most requests answered at once so far.
    pub fn most_at_once(&self) -> usize {
        self.state.lock().unwrap().most_answering
    }

    /// Everything received so far; panics if an envelope did not validate
    /// against its event's published schema.
    pub fn received(&self) -> Vec<Received> {
        let state = self.state.lock().unwrap();
        assert!(
            state.invalid.is_empty(),
            "deliveries that break their event's schema: {:#?}",
            state.invalid
        );
        state.received.clone()
    }

    /// Waits until at least `n` requests arrived (or panics after `timeout`).
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.received();
            if received.len() >= n {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "receiver got {} of {n} requests in time",
                received.len()
            );
            actix_web::rt::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A loopback URL where nothing listens (connection refused).
pub fn refused_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/hook")
}
