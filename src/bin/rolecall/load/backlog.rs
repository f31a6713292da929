//! The `backlog` scenario (CONTRACT §9: memory does not grow with the
//! backlog): one organization's endpoint never answers in time while
//! `--backlog` events are created for it. The server's resident memory is
//! read as the backlog grows; then the server is killed and started again
//! on it, and the time until it serves and its memory are read.
//!
//! The events are status moves of a fixed set of tasks by default, so that
//! nothing but the backlog grows in the database; `--backlog-traffic
//! creates` makes a new task per event instead, whose rows grow memory with
//! or without a backlog. Memory also grows as the database's page cache
//! fills up to `storage.cache_mb`, so a control server gets the same
//! traffic at the same pace with a subscriber that keeps up: the difference
//! at each size is what the backlog costs. Before either, `--events`
//! deliveries warm the page cache.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::Method;
use indicatif::ProgressBar;
use serde::Serialize;
use serde_json::{json, Value};

use crate::load::scenarios::{burst, create_tasks, on_client_threads, BurstPlan};
use crate::load::server::ServerProcess;
use crate::load::sink::SinkState;
use crate::load::stats::table;
use crate::load::target::{Fixture, Target};

/// What makes the scenario's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Traffic {
    /// Status moves (open ↔ in-progress) of one task per concurrent
    /// request: the database keeps nothing new but the queued events.
    StatusMoves,
    /// A new task per event: the tasks are stored as well.
    Creates,
}

/// The servers' memory at one size of the backlog.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// Events queued for the endpoint that never answers.
    pub queued: usize,
    /// Resident memory, MiB.
    pub resident_mb: f64,
    /// Growth over the warmed-up server with no backlog, MiB.
    pub growth_mb: f64,
    /// The control server's growth after as many events, delivered, MiB.
    pub control_growth_mb: f64,
    /// What the backlog costs: `growth_mb - control_growth_mb`.
    pub backlog_mb: f64,
}

/// What the scenario measured.
#[derive(Clone, Debug, Serialize)]
pub struct BacklogResult {
    /// What made the events.
    pub traffic: Traffic,
    /// Resident memory with no backlog, after the warm-up, MiB.
    pub baseline_mb: f64,
    /// The control server's, MiB.
    pub control_baseline_mb: f64,
    /// Memory as the backlog grew.
    pub points: Vec<Point>,
    /// Events per second sent to both servers.
    pub rate: f64,
    /// From the restart on the whole backlog to the first 200 of `/healthz`.
    pub restart_serving_after_ms: u128,
    /// Resident memory once serving again, MiB.
    pub restart_resident_mb: f64,
    /// Resident memory 5 s later (windows read, attempts under way), MiB.
    pub restart_resident_after_5s_mb: f64,
}

/// The sizes at which memory is read, up to `total`.
fn milestones(total: usize) -> Vec<usize> {
    let mut points: Vec<usize> = [10_000, 100_000, 250_000, 500_000, 1_000_000]
        .into_iter()
        .filter(|&n| n < total)
        .collect();
    points.push(total);
    points
}

/// The servers the scenario starts.
pub struct Server<'a> {
    /// The data directory of the server with the backlog.
    pub dir: &'a Path,
    /// The control server's.
    pub control_dir: &'a Path,
    /// Their `ROLECALL_*` settings.
    pub env: &'a [(String, String)],
    /// Their admin token.
    pub admin: &'a str,
}

/// How much load.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Events queued for the endpoint that never answers.
    pub backlog: usize,
    /// Deliveries to a healthy endpoint first, warming the page cache.
    pub warmup: usize,
    /// Events per second, the same for both servers: below what the control
    /// delivers, so that its subscriber keeps up.
    pub rate: f64,
    /// Concurrent requests.
    pub concurrency: usize,
    /// Client threads they are spread over.
    pub client_threads: usize,
    /// What makes the events.
    pub traffic: Traffic,
}

/// Memory after each milestone on one server.
struct Curve {
    baseline_mb: f64,
    /// (events sent, resident MiB).
    points: Vec<(usize, f64)>,
}

/// Runs the scenario; `sink` (at `sink_url`) is the subscriber.
pub async fn run(
    at: Server<'_>,
    plan: Plan,
    sink_url: &str,
    sink: &Arc<SinkState>,
) -> Result<BacklogResult, String> {
    let (server, _) = ServerProcess::start(at.dir, at.env, false)?;
    let backlog = curve(&server, &at, plan, sink_url, sink, Subscriber::NeverAnswers).await?;
    drop(server);

    let (server, serving) = ServerProcess::start(at.dir, at.env, false)?;
    let restart_resident_mb = server.resident_mb();
    actix_web::rt::time::sleep(Duration::from_secs(5)).await;
    let restart_resident_after_5s_mb = server.resident_mb();
    drop(server);

    let (control_server, _) = ServerProcess::start(at.control_dir, at.env, false)?;
    let control = curve(
        &control_server,
        &at,
        plan,
        sink_url,
        sink,
        Subscriber::KeepsUp,
    )
    .await?;
    drop(control_server);

    let points = backlog
        .points
        .iter()
        .zip(&control.points)
        .map(|(&(queued, resident_mb), &(_, control_mb))| {
            let growth_mb = resident_mb - backlog.baseline_mb;
            let control_growth_mb = control_mb - control.baseline_mb;
            Point {
                queued,
                resident_mb,
                growth_mb,
                control_growth_mb,
                backlog_mb: growth_mb - control_growth_mb,
            }
        })
        .collect();
    Ok(BacklogResult {
        traffic: plan.traffic,
        baseline_mb: backlog.baseline_mb,
        control_baseline_mb: control.baseline_mb,
        points,
        rate: plan.rate,
        restart_serving_after_ms: serving.as_millis(),
        restart_resident_mb,
        restart_resident_after_5s_mb,
    })
}

/// Where the events go.
#[derive(Clone, Copy, PartialEq)]
enum Subscriber {
    /// The organization whose endpoint never answers: they queue up.
    NeverAnswers,
    /// A healthy organization: they are delivered as they come.
    KeepsUp,
}

/// Warms `server` up, then sends it the plan's events and reads its memory
/// at each milestone (once the subscriber that keeps up has them all).
async fn curve(
    server: &ServerProcess,
    at: &Server<'_>,
    plan: Plan,
    sink_url: &str,
    sink: &Arc<SinkState>,
    subscriber: Subscriber,
) -> Result<Curve, String> {
    let target = Target::new(server.base_url(), at.admin.to_owned(), plan.concurrency);
    let fixture = Arc::new(target.setup(1, sink_url, sink).await?);
    let org = match subscriber {
        Subscriber::NeverAnswers => fixture.hanging_org.clone(),
        Subscriber::KeepsUp => fixture.orgs[0].clone(),
    };
    let warm = BurstPlan {
        events: plan.warmup,
        concurrency: plan.concurrency,
        client_threads: plan.client_threads,
        rate: 0.0,
        hanging_every: 0,
        keyed: false,
    };
    burst(&target, &fixture, sink, warm, &ProgressBar::hidden()).await?;
    sink.clear();
    let source = Arc::new(Source::new(&target, &fixture, &org, plan).await?);
    if subscriber == Subscriber::KeepsUp {
        delivered(sink, source.tasks()).await?;
    }
    let baseline_mb = server.resident_mb();
    sink.clear();
    let label = match subscriber {
        Subscriber::NeverAnswers => "backlog",
        Subscriber::KeepsUp => "control",
    };
    let bar = ProgressBar::new(plan.backlog as u64).with_message(label);
    let mut points = Vec::new();
    let mut sent = 0;
    for milestone in milestones(plan.backlog) {
        sent += send(&target, &fixture, &source, milestone - sent, plan, &bar).await?;
        if subscriber == Subscriber::KeepsUp {
            delivered(sink, sent).await?;
        }
        points.push((sent, server.resident_mb()));
    }
    bar.finish_and_clear();
    Ok(Curve {
        baseline_mb,
        points,
    })
}

/// Waits (a while) until the sink has received `count` deliveries.
async fn delivered(sink: &SinkState, count: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while sink.received() < count {
        if Instant::now() > deadline {
            return Err(format!(
                "the control's subscriber received {} of {count} deliveries",
                sink.received()
            ));
        }
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The requests that make the events, in one organization.
enum Source {
    /// `POST` to this path: a new task each.
    Creates(String),
    /// `PATCH` of these tasks, each moved by one concurrent request at a
    /// time: how many moves each has had says where it stands.
    StatusMoves(Vec<(String, AtomicUsize)>),
}

impl Source {
    /// The source of `plan`'s traffic in `org`, with its tasks created.
    async fn new(
        target: &Target,
        fixture: &Fixture,
        org: &str,
        plan: Plan,
    ) -> Result<Source, String> {
        if plan.traffic == Traffic::Creates {
            return Ok(Source::Creates(format!("/organizations/{org}/tasks")));
        }
        let tasks = create_tasks(
            target,
            org,
            &fixture.owner_token,
            plan.concurrency.max(1),
            (plan.concurrency, plan.client_threads),
        )
        .await?;
        let tasks = tasks
            .into_iter()
            .map(|task| (task, AtomicUsize::new(0)))
            .collect();
        Ok(Source::StatusMoves(tasks))
    }

    /// Tasks created up front.
    fn tasks(&self) -> usize {
        match self {
            Source::Creates(_) => 0,
            Source::StatusMoves(tasks) => tasks.len(),
        }
    }

    /// The request of the concurrent loop `slot` for its next event, and
    /// the status that accepts it.
    fn request(&self, slot: usize) -> (Method, &str, Value, u16) {
        match self {
            Source::Creates(path) => (
                Method::POST,
                path,
                json!({"title": "an event for the backlog scenario"}),
                201,
            ),
            Source::StatusMoves(tasks) => {
                let (path, moves) = &tasks[slot % tasks.len()];
                let status = if moves.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
                    "in-progress"
                } else {
                    "open"
                };
                (Method::PATCH, path, json!({"status": status}), 200)
            }
        }
    }
}

/// Sends `count` events from `source` at the plan's rate; answers how many
/// were accepted (all, or an error).
async fn send(
    target: &Target,
    fixture: &Arc<Fixture>,
    source: &Arc<Source>,
    count: usize,
    plan: Plan,
    bar: &ProgressBar,
) -> Result<usize, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let slots = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let (fixture, bar, source) = (fixture.clone(), bar.clone(), source.clone());
    let accepted = on_client_threads(
        target,
        plan.concurrency,
        plan.client_threads,
        move |target, share| {
            let (fixture, next, slots, bar, source) = (
                fixture.clone(),
                next.clone(),
                slots.clone(),
                bar.clone(),
                source.clone(),
            );
            async move {
                let loops = (0..share).map(|_| async {
                    // One slot per loop, so that no task is moved by two at once.
                    let slot = slots.fetch_add(1, Ordering::Relaxed);
                    let mut accepted = 0;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            break;
                        }
                        if plan.rate > 0.0 {
                            let due = started + Duration::from_secs_f64(i as f64 / plan.rate);
                            actix_web::rt::time::sleep_until(due.into()).await;
                        }
                        let (method, path, body, expected) = source.request(slot);
                        let result = target
                            .call(method, path, &fixture.owner_token, Some(&body))
                            .await;
                        if matches!(result, Ok((status, _, _)) if status == expected) {
                            accepted += 1;
                        }
                        bar.inc(1);
                    }
                    accepted
                });
                futures_util::future::join_all(loops)
                    .await
                    .into_iter()
                    .sum::<usize>()
            }
        },
    )
    .await?;
    let accepted: usize = accepted.into_iter().sum();
    if accepted < count {
        return Err(format!(
            "{} of {count} events were refused",
            count - accepted
        ));
    }
    Ok(accepted)
}

pub fn print(result: &BacklogResult) {
    let mut rows = vec![(
        "no backlog (MiB; control)".to_owned(),
        format!(
            "{:.1}; {:.1}",
            result.baseline_mb, result.control_baseline_mb
        ),
    )];
    for point in &result.points {
        rows.push((
            format!(
                "{} queued (MiB: growth, control's, backlog's)",
                point.queued
            ),
            format!(
                "{:.1}: +{:.1}, +{:.1}, {:+.1}",
                point.resident_mb, point.growth_mb, point.control_growth_mb, point.backlog_mb
            ),
        ));
    }
    rows.push((
        "events/s sent to both".into(),
        format!("{:.0}", result.rate),
    ));
    rows.push((
        "restart: serving after (ms)".into(),
        result.restart_serving_after_ms.to_string(),
    ));
    rows.push((
        "restart: resident (MiB)".into(),
        format!("{:.1}", result.restart_resident_mb),
    ));
    rows.push((
        "restart: resident 5 s later (MiB)".into(),
        format!("{:.1}", result.restart_resident_after_5s_mb),
    ));
    let rows: Vec<(&str, String)> = rows.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let title = match result.traffic {
        Traffic::StatusMoves => {
            "backlog: an endpoint that never answers (events: task status moves)"
        }
        Traffic::Creates => "backlog: an endpoint that never answers (events: task creations)",
    };
    table(title, &rows);
}
