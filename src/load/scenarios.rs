//! The load scenarios: `read`, `baseline`, `burst` and `isolation`.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::Method;
use actix_web::{web, App, HttpResponse, HttpServer};
use indicatif::ProgressBar;
use serde::Serialize;
use serde_json::{json, Value};

use crate::load::sink::SinkState;
use crate::load::stats::{table, Percentiles};
use crate::load::target::{Fixture, Target};

/// Results of a `read` or `baseline` run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReadResult {
    /// Completed requests.
    pub requests: u64,
    /// Non-200 answers or failures.
    pub errors: u64,
    /// Requests per second.
    pub requests_per_s: f64,
    /// Latency percentiles (ms).
    pub latency_ms: Percentiles,
}

/// `concurrency` loops of GET `path` for `duration`.
pub async fn read(
    target: &Target,
    path: &str,
    token: &str,
    concurrency: usize,
    duration: Duration,
    bar: &ProgressBar,
) -> ReadResult {
    let started = Instant::now();
    let deadline = started + duration;
    let samples = Rc::new(RefCell::new(Vec::new()));
    let errors = Rc::new(RefCell::new(0u64));
    let workers = (0..concurrency).map(|_| {
        let (samples, errors) = (samples.clone(), errors.clone());
        async move {
            while Instant::now() < deadline {
                match target.call(Method::GET, path, token, None).await {
                    Ok((200, _, latency)) => {
                        samples.borrow_mut().push(latency.as_secs_f64() * 1000.0)
                    }
                    _ => *errors.borrow_mut() += 1,
                }
                bar.inc(1);
            }
        }
    });
    futures_util::future::join_all(workers).await;
    let elapsed = started.elapsed().as_secs_f64();
    let samples = samples.take();
    let requests = samples.len() as u64;
    let errors = *errors.borrow();
    ReadResult {
        requests,
        errors,
        requests_per_s: requests as f64 / elapsed,
        latency_ms: Percentiles::of(samples),
    }
}

/// A plain actix-web server answering `body` on every GET, no auth, no storage.
pub fn baseline_server(body: Value) -> std::io::Result<(String, actix_web::dev::ServerHandle)> {
    let body = web::Data::new(body.to_string());
    let server = HttpServer::new(move || {
        App::new().app_data(body.clone()).default_service(web::to(
            |body: web::Data<String>| async move {
                HttpResponse::Ok()
                    .content_type("application/json")
                    .body(body.get_ref().clone())
            },
        ))
    })
    .disable_signals()
    .bind(("127.0.0.1", 0))?;
    let port = server.addrs().first().map(|a| a.port()).unwrap_or(0);
    let server = server.run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    Ok((format!("http://127.0.0.1:{port}"), handle))
}

/// Results of a `burst` run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BurstResult {
    /// Task creations answered 201.
    pub accepted: u64,
    /// Requests refused or failed.
    pub errors: u64,
    /// Accepted events per second (while sending).
    pub accepted_per_s: f64,
    /// Distinct events delivered to the healthy sink.
    pub delivered: u64,
    /// Delivered events per second, first request to last receipt.
    pub delivered_per_s: f64,
    /// Event → sink latency of the healthy orgs (ms).
    pub latency_ms: Percentiles,
    /// Accepted events never delivered (within the wait).
    pub lost: u64,
    /// Receipts of a delivery id already received.
    pub duplicates: u64,
    /// Deliveries whose signature did not verify.
    pub bad_signatures: u64,
}

/// How a burst is shaped.
pub struct BurstPlan {
    /// Task creations to the healthy orgs.
    pub events: usize,
    /// Concurrent requests.
    pub concurrency: usize,
    /// Events per second to aim at; 0 for as fast as possible.
    pub rate: f64,
    /// Every n-th request goes to the hanging org instead (0: none).
    pub hanging_every: usize,
}

/// Creates tasks over the fixture's orgs and waits for their deliveries.
pub async fn burst(
    target: &Target,
    fixture: &Fixture,
    sink: &Arc<SinkState>,
    plan: &BurstPlan,
    bar: &ProgressBar,
) -> BurstResult {
    sink.clear();
    let started = Instant::now();
    let next = Rc::new(RefCell::new(0usize));
    let created = Rc::new(RefCell::new(HashSet::new()));
    let errors = Rc::new(RefCell::new(0u64));
    let total = plan.events + plan.events.checked_div(plan.hanging_every).unwrap_or(0);
    let workers = (0..plan.concurrency).map(|_| {
        let (next, created, errors) = (next.clone(), created.clone(), errors.clone());
        async move {
            loop {
                let i = {
                    let mut next = next.borrow_mut();
                    *next += 1;
                    *next - 1
                };
                if i >= total {
                    break;
                }
                if plan.rate > 0.0 {
                    let due = started + Duration::from_secs_f64(i as f64 / plan.rate);
                    actix_web::rt::time::sleep_until(due.into()).await;
                }
                let hanging =
                    plan.hanging_every > 0 && i % (plan.hanging_every + 1) == plan.hanging_every;
                let org = if hanging {
                    &fixture.hanging_org
                } else {
                    &fixture.orgs[i % fixture.orgs.len()]
                };
                let body = json!({"title": format!("load task {i}")});
                match target
                    .call(
                        Method::POST,
                        &format!("/organizations/{org}/tasks"),
                        &fixture.owner_token,
                        Some(&body),
                    )
                    .await
                {
                    Ok((201, task, _)) if !hanging => {
                        created
                            .borrow_mut()
                            .insert(task["id"].as_str().unwrap_or_default().to_owned());
                    }
                    Ok((201, _, _)) => {}
                    _ => *errors.borrow_mut() += 1,
                }
                bar.inc(1);
            }
        }
    });
    futures_util::future::join_all(workers).await;
    let sending = started.elapsed();
    let created = created.take();
    let wait_until = Instant::now() + Duration::from_secs(30 + created.len() as u64 / 500);
    while Instant::now() < wait_until && delivered_ids(sink, &created) < created.len() {
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    let errors = *errors.borrow();
    summarize(sink, &created, errors, sending, started)
}

fn delivered_ids(sink: &SinkState, created: &HashSet<String>) -> usize {
    let ids: HashSet<String> = sink
        .receipts()
        .into_iter()
        .filter_map(|r| r.resource_id)
        .collect();
    created.iter().filter(|id| ids.contains(*id)).count()
}

fn summarize(
    sink: &SinkState,
    created: &HashSet<String>,
    errors: u64,
    sending: Duration,
    started: Instant,
) -> BurstResult {
    let receipts = sink.receipts();
    let mut seen_deliveries = HashSet::new();
    let mut first_receipt: HashMap<String, f64> = HashMap::new();
    let mut duplicates = 0;
    let mut last = started;
    for receipt in &receipts {
        if !seen_deliveries.insert(receipt.delivery_id.clone()) {
            duplicates += 1;
            continue;
        }
        if let Some(id) = receipt
            .resource_id
            .as_ref()
            .filter(|id| created.contains(*id))
        {
            first_receipt
                .entry(id.clone())
                .or_insert(receipt.latency_ms as f64);
            last = last.max(receipt.at);
        }
    }
    let delivered = first_receipt.len() as u64;
    BurstResult {
        accepted: created.len() as u64,
        errors,
        accepted_per_s: created.len() as f64 / sending.as_secs_f64(),
        delivered,
        delivered_per_s: delivered as f64
            / last.duration_since(started).as_secs_f64().max(f64::EPSILON),
        latency_ms: Percentiles::of(first_receipt.into_values().collect()),
        lost: created.len() as u64 - delivered,
        duplicates,
        bad_signatures: sink.bad_signatures(),
    }
}

/// Prints a read result.
pub fn print_read(title: &str, result: &ReadResult) {
    table(
        title,
        &[
            ("requests", result.requests.to_string()),
            ("errors", result.errors.to_string()),
            ("requests/s", format!("{:.0}", result.requests_per_s)),
            (
                "latency p50 / p99 (ms)",
                format!(
                    "{:.2} / {:.2}",
                    result.latency_ms.p50, result.latency_ms.p99
                ),
            ),
        ],
    );
}

/// Prints a burst result.
pub fn print_burst(title: &str, result: &BurstResult) {
    let l = &result.latency_ms;
    table(
        title,
        &[
            ("accepted", result.accepted.to_string()),
            ("errors", result.errors.to_string()),
            ("accepted/s", format!("{:.0}", result.accepted_per_s)),
            ("delivered", result.delivered.to_string()),
            ("delivered/s", format!("{:.0}", result.delivered_per_s)),
            (
                "event→sink p50 / p90 / p99 / max (ms)",
                format!("{:.0} / {:.0} / {:.0} / {:.0}", l.p50, l.p90, l.p99, l.max),
            ),
            ("lost", result.lost.to_string()),
            ("duplicates", result.duplicates.to_string()),
            ("bad signatures", result.bad_signatures.to_string()),
        ],
    );
}
