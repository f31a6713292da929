//! The load scenarios: `read`, `baseline`, `task-reads`, `burst` and `isolation`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Failed requests by kind: the status code, or `transport` when no answer came.
pub type Errors = BTreeMap<String, u64>;

/// Results of a `read` or `baseline` run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReadResult {
    /// Completed requests.
    pub requests: u64,
    /// Non-200 answers or failures.
    pub errors: u64,
    /// `errors` by kind.
    pub errors_by_kind: Errors,
    /// Requests per second.
    pub requests_per_s: f64,
    /// Latency percentiles (ms).
    pub latency_ms: Percentiles,
}

/// `concurrency` loops of GET for `duration`, spread over `threads` client
/// threads: each request of one of `paths`, picked at random.
pub async fn read(
    target: &Target,
    paths: &[String],
    token: &str,
    (concurrency, threads): (usize, usize),
    duration: Duration,
    bar: &ProgressBar,
) -> Result<ReadResult, String> {
    if paths.is_empty() {
        return Err("nothing to read".into());
    }
    let started = Instant::now();
    let deadline = started + duration;
    let (paths, token, bar) = (Arc::new(paths.to_vec()), token.to_owned(), bar.clone());
    let parts = on_client_threads(target, concurrency, threads, move |target, share| {
        let (paths, token, bar) = (paths.clone(), token.clone(), bar.clone());
        async move { read_loops(&target, &paths, &token, share, deadline, &bar).await }
    })
    .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let mut samples = Vec::new();
    let mut errors = Errors::new();
    for (part_samples, part_errors) in parts {
        samples.extend(part_samples);
        merge_errors(&mut errors, part_errors);
    }
    let requests = samples.len() as u64;
    Ok(ReadResult {
        requests,
        errors: errors.values().sum(),
        errors_by_kind: errors,
        requests_per_s: requests as f64 / elapsed,
        latency_ms: Percentiles::of(samples),
    })
}

/// One client thread's share of a read run: latencies (ms) and errors.
async fn read_loops(
    target: &Target,
    paths: &[String],
    token: &str,
    concurrency: usize,
    deadline: Instant,
    bar: &ProgressBar,
) -> (Vec<f64>, Errors) {
    let samples = RefCell::new(Vec::new());
    let errors = RefCell::new(Errors::new());
    let loops = (0..concurrency).map(|i| {
        let (samples, errors) = (&samples, &errors);
        async move {
            // xorshift64: a cheap spread over the paths, different per loop.
            let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ ((i as u64 + 1) << 17);
            while Instant::now() < deadline {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let path = &paths[(state % paths.len() as u64) as usize];
                match target.timed(Method::GET, path, token, None).await {
                    Ok((200, _, latency)) => {
                        samples.borrow_mut().push(latency.as_secs_f64() * 1000.0)
                    }
                    other => count_error(errors, &other),
                }
                bar.inc(1);
            }
        }
    });
    futures_util::future::join_all(loops).await;
    (samples.take(), errors.take())
}

/// Creates `count` tasks in `org` as fast as `concurrency` requests go;
/// answers the path of each.
pub async fn create_tasks(
    target: &Target,
    org: &str,
    token: &str,
    count: usize,
    (concurrency, threads): (usize, usize),
) -> Result<Vec<String>, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let collection = format!("/organizations/{org}/tasks");
    let token = token.to_owned();
    let parts = on_client_threads(target, concurrency, threads, move |target, share| {
        let (next, collection, token) = (next.clone(), collection.clone(), token.clone());
        async move {
            let created = RefCell::new(Vec::new());
            let loops = (0..share).map(|_| async {
                while next.fetch_add(1, Ordering::Relaxed) < count {
                    let body = json!({"title": "a task to read"});
                    let (status, task, _) = target
                        .call(Method::POST, &collection, &token, Some(&body))
                        .await?;
                    if status != 201 {
                        return Err(format!("creating a task answered {status}: {task}"));
                    }
                    let id = task["id"].as_str().unwrap_or_default();
                    created.borrow_mut().push(format!("{collection}/{id}"));
                }
                Ok(())
            });
            let outcome: Result<Vec<()>, String> = futures_util::future::join_all(loops)
                .await
                .into_iter()
                .collect();
            outcome.map(|_| created.take())
        }
    })
    .await?;
    let mut paths = Vec::with_capacity(count);
    for part in parts {
        paths.extend(part?);
    }
    Ok(paths)
}

/// Runs `work` on `threads` client threads, each with its own actix system
/// and HTTP client holding its share of `concurrency` connections, and
/// collects what each returns; a thread that panicked fails the run rather
/// than leaving its share out of the figures. One client thread saturates
/// before a server does: on 2 cores its queueing alone put the p99 of a
/// trivial handler near 20 ms.
pub async fn on_client_threads<R, F, Fut>(
    target: &Target,
    concurrency: usize,
    threads: usize,
    work: F,
) -> Result<Vec<R>, String>
where
    R: Send + 'static,
    F: Fn(Rc<Target>, usize) -> Fut + Send + Clone + 'static,
    Fut: std::future::Future<Output = R> + 'static,
{
    let (base, admin, routes) = target.address();
    let concurrency = concurrency.max(1);
    let threads = threads.clamp(1, concurrency);
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let share = concurrency / threads + usize::from(i < concurrency % threads);
            let (base, admin, routes, work) =
                (base.clone(), admin.clone(), routes.clone(), work.clone());
            std::thread::spawn(move || {
                actix_web::rt::System::new().block_on(async move {
                    let target = Rc::new(Target::spread(base, admin, routes, share));
                    work(target, share).await
                })
            })
        })
        .collect();
    let joined = actix_web::rt::task::spawn_blocking(move || {
        handles
            .into_iter()
            .map(|handle| handle.join())
            .collect::<Result<Vec<R>, _>>()
    })
    .await;
    match joined {
        Ok(Ok(results)) => Ok(results),
        _ => Err("a load client thread panicked; its share of the run is missing".into()),
    }
}

fn count_error<B, T>(errors: &RefCell<Errors>, result: &Result<(u16, B, T), String>) {
    let kind = match result {
        Ok((status, _, _)) => status.to_string(),
        Err(_) => "transport".to_owned(),
    };
    *errors.borrow_mut().entry(kind).or_default() += 1;
}

fn merge_errors(into: &mut Errors, from: Errors) {
    for (kind, count) in from {
        *into.entry(kind).or_default() += count;
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
    /// `errors` by kind.
    pub errors_by_kind: Errors,
    /// Accepted events per second (while sending).
    pub accepted_per_s: f64,
    /// Distinct events delivered to the healthy sink.
    pub delivered: u64,
    /// Delivered events per second, first request to last receipt.
    pub delivered_per_s: f64,
    /// Event → sink latency of the healthy orgs (ms): from the envelope's
    /// `occurred_at`, so in whole milliseconds.
    pub latency_ms: Percentiles,
    /// From sending a creation (its first try) to the sink's receipt of its
    /// event (ms, to the microsecond): the client's view of event → sink,
    /// the request's own path included, fine enough to compare runs whose
    /// `latency_ms` differ by a millisecond or two.
    pub sent_to_sink_ms: Percentiles,
    /// How long each task creation took to answer, whatever the answer (ms).
    pub request_ms: Percentiles,
    /// Accepted events never delivered (within the wait).
    pub lost: u64,
    /// Receipts of a delivery id already received.
    pub duplicates: u64,
    /// Distinct events delivered of tasks no creation was answered 201
    /// for: a creation that failed (or was given up) after its change was
    /// made, which a keyed client's retry would have had replayed.
    pub strays: u64,
    /// Keyed creations sent again with their key after a 409, a 503 or a
    /// failed connection (see [`BurstPlan::keyed`]).
    pub retried: u64,
    /// Deliveries whose signature did not verify.
    pub bad_signatures: u64,
}

/// How a burst is shaped.
#[derive(Clone, Copy, Debug)]
pub struct BurstPlan {
    /// Task creations to the healthy orgs.
    pub events: usize,
    /// Concurrent requests.
    pub concurrency: usize,
    /// Client threads the requests are spread over.
    pub client_threads: usize,
    /// Events per second to aim at; 0 for as fast as possible.
    pub rate: f64,
    /// Every n-th request goes to the hanging org instead (0: none).
    pub hanging_every: usize,
    /// Each creation carries an `Idempotency-Key` of its own, and is sent
    /// again with it, as a client would, after a 409 (its first try still
    /// running), a 503 or a failed connection: every second for up to
    /// [`KEYED_RETRIES_FOR`].
    pub keyed: bool,
}

/// How long a keyed creation is tried again before it counts as an error:
/// longer than a claim's minute, so that a claim left behind shows as
/// slow requests, not errors.
const KEYED_RETRIES_FOR: Duration = Duration::from_secs(90);

/// Whether a keyed creation's answer asks for a retry with the same key.
fn retry_keyed<B, T>(result: &Result<(u16, B, T), String>) -> bool {
    matches!(result, Ok((409 | 503, _, _)) | Err(_))
}

/// Creates tasks over the fixture's orgs and waits for their deliveries.
pub async fn burst(
    target: &Target,
    fixture: &Arc<Fixture>,
    sink: &Arc<SinkState>,
    plan: BurstPlan,
    bar: &ProgressBar,
) -> Result<BurstResult, String> {
    sink.clear();
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let (fixture, bar) = (fixture.clone(), bar.clone());
    let parts = on_client_threads(
        target,
        plan.concurrency,
        plan.client_threads,
        move |target, share| {
            let (fixture, next, bar) = (fixture.clone(), next.clone(), bar.clone());
            async move { create_loops(&target, &fixture, plan, share, &next, started, &bar).await }
        },
    )
    .await?;
    let sending = started.elapsed();
    let mut created = HashMap::new();
    let mut errors = Errors::new();
    let mut answered = Vec::new();
    let mut retried = 0;
    for (part_created, part_errors, part_answered, part_retried) in parts {
        created.extend(part_created);
        merge_errors(&mut errors, part_errors);
        answered.extend(part_answered);
        retried += part_retried;
    }
    let wait_until = Instant::now() + Duration::from_secs(30 + created.len() as u64 / 500);
    while Instant::now() < wait_until && delivered_ids(sink, &created) < created.len() {
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    let mut result = summarize(sink, &created, errors, sending, started);
    result.request_ms = Percentiles::of(answered);
    result.retried = retried;
    Ok(result)
}

/// One client thread's share of a burst: `concurrency` loops taking the
/// next event number from `next` until the plan is done. Answers the ids of
/// the healthy orgs' created tasks with when each was first sent, the
/// errors, how long each creation took (ms; a keyed one's retries
/// included), and how many keyed retries were sent.
async fn create_loops(
    target: &Target,
    fixture: &Fixture,
    plan: BurstPlan,
    concurrency: usize,
    next: &AtomicUsize,
    started: Instant,
    bar: &ProgressBar,
) -> (HashMap<String, Instant>, Errors, Vec<f64>, u64) {
    let total = plan.events + plan.events.checked_div(plan.hanging_every).unwrap_or(0);
    let created = RefCell::new(HashMap::new());
    let errors = RefCell::new(Errors::new());
    let answered = RefCell::new(Vec::new());
    let retried = RefCell::new(0);
    let loops = (0..concurrency).map(|_| async {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
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
            let asked = Instant::now();
            let path = format!("/organizations/{org}/tasks");
            let key = plan.keyed.then(|| format!("load-{i}"));
            let send = || {
                let (path, body, key) = (&path, &body, key.as_deref());
                target.call_keyed(Method::POST, path, &fixture.owner_token, Some(body), key)
            };
            let mut result = send().await;
            while key.is_some() && retry_keyed(&result) && asked.elapsed() < KEYED_RETRIES_FOR {
                actix_web::rt::time::sleep(Duration::from_secs(1)).await;
                *retried.borrow_mut() += 1;
                result = send().await;
            }
            answered
                .borrow_mut()
                .push(asked.elapsed().as_secs_f64() * 1000.0);
            match &result {
                Ok((201, task, _)) if !hanging => {
                    created
                        .borrow_mut()
                        .insert(task["id"].as_str().unwrap_or_default().to_owned(), asked);
                }
                Ok((201, _, _)) => {}
                _ => count_error(&errors, &result),
            }
            bar.inc(1);
        }
    });
    futures_util::future::join_all(loops).await;
    (
        created.take(),
        errors.take(),
        answered.take(),
        retried.take(),
    )
}

fn delivered_ids(sink: &SinkState, created: &HashMap<String, Instant>) -> usize {
    let ids: HashSet<String> = sink
        .receipts()
        .into_iter()
        .filter_map(|r| r.resource_id)
        .collect();
    created.keys().filter(|id| ids.contains(*id)).count()
}

fn summarize(
    sink: &SinkState,
    created: &HashMap<String, Instant>,
    errors: Errors,
    sending: Duration,
    started: Instant,
) -> BurstResult {
    let receipts = sink.receipts();
    let mut seen_deliveries = HashSet::new();
    let mut first_receipt: HashMap<String, (f64, f64)> = HashMap::new();
    let mut duplicates = 0;
    let mut strays = HashSet::new();
    let mut last = started;
    for receipt in &receipts {
        if !seen_deliveries.insert(receipt.delivery_id.clone()) {
            duplicates += 1;
            continue;
        }
        let Some(id) = receipt.resource_id.as_ref() else {
            continue;
        };
        if let Some(sent) = created.get(id) {
            let sent_to_sink = receipt.at.saturating_duration_since(*sent);
            first_receipt.entry(id.clone()).or_insert((
                receipt.latency_ms as f64,
                sent_to_sink.as_secs_f64() * 1000.0,
            ));
            last = last.max(receipt.at);
        } else {
            strays.insert(id.clone());
        }
    }
    let delivered = first_receipt.len() as u64;
    let (event_to_sink, sent_to_sink) = first_receipt.into_values().unzip();
    BurstResult {
        accepted: created.len() as u64,
        errors: errors.values().sum(),
        errors_by_kind: errors,
        accepted_per_s: created.len() as f64 / sending.as_secs_f64(),
        delivered,
        delivered_per_s: delivered as f64
            / last.duration_since(started).as_secs_f64().max(f64::EPSILON),
        latency_ms: Percentiles::of(event_to_sink),
        sent_to_sink_ms: Percentiles::of(sent_to_sink),
        request_ms: Percentiles::default(),
        lost: created.len() as u64 - delivered,
        duplicates,
        strays: strays.len() as u64,
        retried: 0,
        bad_signatures: sink.bad_signatures(),
    }
}

/// Prints a read result.
pub fn print_read(title: &str, result: &ReadResult) {
    table(
        title,
        &[
            ("requests", result.requests.to_string()),
            ("errors", errors_text(result.errors, &result.errors_by_kind)),
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
            ("errors", errors_text(result.errors, &result.errors_by_kind)),
            ("accepted/s", format!("{:.0}", result.accepted_per_s)),
            ("delivered", result.delivered.to_string()),
            ("delivered/s", format!("{:.0}", result.delivered_per_s)),
            (
                "event→sink p50 / p90 / p99 / max (ms)",
                format!("{:.0} / {:.0} / {:.0} / {:.0}", l.p50, l.p90, l.p99, l.max),
            ),
            (
                "sent→sink p50 / p90 / p99 (ms)",
                format!(
                    "{:.2} / {:.2} / {:.2}",
                    result.sent_to_sink_ms.p50,
                    result.sent_to_sink_ms.p90,
                    result.sent_to_sink_ms.p99
                ),
            ),
            (
                "request p50 / p99 / max (ms)",
                format!(
                    "{:.1} / {:.1} / {:.0}",
                    result.request_ms.p50, result.request_ms.p99, result.request_ms.max
                ),
            ),
            ("lost", result.lost.to_string()),
            ("duplicates", result.duplicates.to_string()),
            (
                "strays (events of creations not answered 201)",
                result.strays.to_string(),
            ),
            ("keyed retries", result.retried.to_string()),
            ("bad signatures", result.bad_signatures.to_string()),
        ],
    );
}

/// `0`, or the total with its kinds: `3 (500: 1, transport: 2)`.
fn errors_text(total: u64, kinds: &Errors) -> String {
    if kinds.is_empty() {
        return total.to_string();
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    format!("{total} ({})", kinds.join(", "))
}
