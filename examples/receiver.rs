//! A webhook subscriber that verifies rolecall deliveries.
//!
//! ```sh
//! WEBHOOK_SECRET=whsec_... cargo run --example receiver -- 127.0.0.1:9000
//! ```
//!
//! For every POST it:
//! 1. recomputes `sha256=<hex>` = HMAC-SHA256(secret string, raw body) and
//!    compares it with `X-Service-Signature` in constant time (401 if not equal);
//! 2. refuses timestamps more than five minutes off (`webhook-timestamp`),
//!    so a captured request cannot be replayed later (401);
//! 3. answers 200 at once and drops duplicates: the retry of a delivery
//!    carries the same `X-Service-Delivery`, so a seen id is acknowledged but
//!    not processed again.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use actix_web::web::{self, Bytes};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// How far `webhook-timestamp` may be from our clock.
const TOLERANCE_SECS: i64 = 5 * 60;
/// How many delivery ids are remembered for de-duplication.
const REMEMBERED: usize = 100_000;

/// What the receiver knows.
pub struct Receiver {
    secret: String,
    seen: Mutex<(HashSet<String>, VecDeque<String>)>,
    /// Events processed (in a real receiver: a queue to a worker).
    pub processed: Mutex<Vec<serde_json::Value>>,
}

impl Receiver {
    /// A receiver for deliveries signed with `secret` (`whsec_…`).
    pub fn new(secret: String) -> Self {
        Receiver {
            secret,
            seen: Mutex::new((HashSet::new(), VecDeque::new())),
            processed: Mutex::new(Vec::new()),
        }
    }

    /// Whether `signature` is `sha256=` + the hex HMAC of `body`, compared in constant time.
    pub fn signature_valid(&self, body: &[u8], signature: &str) -> bool {
        let Some(hex) = signature.strip_prefix("sha256=") else {
            return false;
        };
        let Some(expected) = decode_hex(hex) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.secret.as_bytes()) else {
            return false;
        };
        mac.update(body);
        mac.verify_slice(&expected).is_ok()
    }

    /// True the first time `delivery_id` is seen.
    fn first_time(&self, delivery_id: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (set, order) = &mut *seen;
        if !set.insert(delivery_id.to_owned()) {
            return false;
        }
        order.push_back(delivery_id.to_owned());
        if order.len() > REMEMBERED {
            if let Some(oldest) = order.pop_front() {
                set.remove(&oldest);
            }
        }
        true
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn header<'a>(req: &'a HttpRequest, name: &str) -> &'a str {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The webhook handler.
pub async fn receive(req: HttpRequest, body: Bytes, receiver: web::Data<Receiver>) -> HttpResponse {
    if !receiver.signature_valid(&body, header(&req, "X-Service-Signature")) {
        return HttpResponse::Unauthorized().body("bad signature");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    match header(&req, "webhook-timestamp").parse::<i64>() {
        Ok(ts) if (now - ts).abs() <= TOLERANCE_SECS => {}
        _ => return HttpResponse::Unauthorized().body("stale or missing timestamp"),
    }
    let delivery_id = header(&req, "X-Service-Delivery");
    if delivery_id.is_empty() {
        return HttpResponse::BadRequest().body("missing X-Service-Delivery");
    }
    if receiver.first_time(delivery_id) {
        // Hand off and answer quickly; do the real work asynchronously.
        let event = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        receiver
            .processed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
        HttpResponse::Ok().body("processed")
    } else {
        HttpResponse::Ok().body("duplicate ignored")
    }
}

/// The receiver's HTTP server on `address`; returns it and the bound port.
pub fn server(
    receiver: web::Data<Receiver>,
    address: &str,
) -> std::io::Result<(actix_web::dev::Server, u16)> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(receiver.clone())
            .route("/{tail:.*}", web::post().to(receive))
    })
    .workers(1)
    .bind(address)?;
    let port = server.addrs().first().map(|a| a.port()).unwrap_or(0);
    Ok((server.run(), port))
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let secret =
        std::env::var("WEBHOOK_SECRET").map_err(|_| std::io::Error::other("set WEBHOOK_SECRET"))?;
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into());
    let (server, port) = server(web::Data::new(Receiver::new(secret)), &address)?;
    println!("receiving webhooks on port {port}");
    server.await
}
