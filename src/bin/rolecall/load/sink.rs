//! The load tool's webhook subscriber: verifies every signature, records
//! when each delivery arrived, and can play a dead endpoint (`/hang`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::web::{self, Bytes};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};

use rolecall::secrets::Secret;
use rolecall::time::Timestamp;
use rolecall::webhooks::signing::service_signature;

/// One delivery as the sink saw it.
#[derive(Clone, Debug)]
pub struct Receipt {
    /// `X-Service-Delivery`.
    pub delivery_id: String,
    /// `data.id` of the envelope, when present.
    pub resource_id: Option<String>,
    /// Event time → receipt, in milliseconds (same machine clock).
    pub latency_ms: i64,
    /// When it arrived.
    pub at: Instant,
}

/// Shared sink state.
#[derive(Default)]
pub struct SinkState {
    secrets: Mutex<HashMap<String, Secret>>,
    receipts: Mutex<Vec<Receipt>>,
    bad_signatures: Mutex<u64>,
}

impl SinkState {
    /// Registers the secret of an organization's endpoint.
    pub fn trust(&self, org: &str, secret: Secret) {
        self.secrets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(org.to_owned(), secret);
    }

    /// Everything received so far.
    pub fn receipts(&self) -> Vec<Receipt> {
        self.receipts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many deliveries were received so far.
    pub fn received(&self) -> usize {
        self.receipts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Deliveries whose signature did not verify.
    pub fn bad_signatures(&self) -> u64 {
        *self
            .bad_signatures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets all receipts (between scenarios).
    pub fn clear(&self) {
        self.receipts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

fn header<'a>(req: &'a HttpRequest, name: &str) -> &'a str {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn receive(
    req: HttpRequest,
    body: Bytes,
    state: web::Data<Arc<SinkState>>,
    hang: web::Data<Duration>,
) -> HttpResponse {
    let event = header(&req, "X-Service-Event").to_owned();
    if event == "test.preflight" {
        return HttpResponse::Ok().finish();
    }
    if req.path() == "/hang" {
        actix_web::rt::time::sleep(**hang).await;
        return HttpResponse::Ok().finish();
    }
    let envelope: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let data = &envelope["data"];
    let organization_id = data["organization_id"].as_str().map(str::to_owned);
    let verified = organization_id
        .as_deref()
        .and_then(|org| {
            state
                .secrets
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(org)
                .cloned()
        })
        .is_some_and(|secret| {
            service_signature(&secret, &body) == header(&req, "X-Service-Signature")
        });
    if !verified {
        *state
            .bad_signatures
            .lock()
            .unwrap_or_else(|e| e.into_inner()) += 1;
        return HttpResponse::Unauthorized().finish();
    }
    let occurred = envelope["occurred_at"]
        .as_str()
        .and_then(Timestamp::parse_rfc3339)
        .unwrap_or(Timestamp::now());
    let receipt = Receipt {
        delivery_id: header(&req, "X-Service-Delivery").to_owned(),
        resource_id: data["id"].as_str().map(str::to_owned),
        latency_ms: Timestamp::now().millis() - occurred.millis(),
        at: Instant::now(),
    };
    state
        .receipts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(receipt);
    HttpResponse::Ok().finish()
}

/// Starts the sink on a free loopback port; `/hang` sleeps `hang` per delivery.
pub fn start(
    state: Arc<SinkState>,
    hang: Duration,
) -> std::io::Result<(String, actix_web::dev::ServerHandle)> {
    let data = web::Data::new(state);
    let hang = web::Data::new(hang);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(hang.clone())
            .default_service(web::to(receive))
    })
    .workers(1)
    .disable_signals()
    .bind(("127.0.0.1", 0))?;
    let port = server.addrs().first().map(|a| a.port()).unwrap_or(0);
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    Ok((format!("http://127.0.0.1:{port}"), handle))
}
