//! The `backlog` scenario (CONTRACT §9: memory does not grow with the
//! backlog): one organization's endpoint never answers in time while
//! `--backlog` events are created for it. The server's resident memory is
//! read as the backlog grows; then the server is killed and started again
//! on it, and the time until it serves and its memory are read.
//!
//! Before the backlog, `--events` deliveries to a healthy organization
//! warm the database's page cache (bounded by `storage.cache_mb`), so the
//! growth measured is the backlog's, not the cache filling up.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::Method;
use indicatif::ProgressBar;
use serde::Serialize;
use serde_json::json;

use crate::load::scenarios::{burst, on_client_threads, BurstPlan};
use crate::load::server::ServerProcess;
use crate::load::sink::SinkState;
use crate::load::stats::table;
use crate::load::target::{Fixture, Target};

/// The server's memory at one size of the backlog.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// Events queued for the endpoint that never answers.
    pub queued: usize,
    /// Resident memory, MiB.
    pub resident_mb: f64,
    /// Growth over the warmed-up server with no backlog, MiB.
    pub growth_mb: f64,
}

/// What the scenario measured.
#[derive(Clone, Debug, Serialize)]
pub struct BacklogResult {
    /// Resident memory with no backlog, after the warm-up, MiB.
    pub baseline_mb: f64,
    /// Memory as the backlog grew.
    pub points: Vec<Point>,
    /// Events accepted per second while the backlog grew.
    pub accepted_per_s: f64,
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

/// The server the scenario starts, and starts again.
pub struct Server<'a> {
    /// Its data directory.
    pub dir: &'a Path,
    /// Its `ROLECALL_*` settings.
    pub env: &'a [(String, String)],
    /// Its admin token.
    pub admin: &'a str,
}

/// How much load.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Events queued for the endpoint that never answers.
    pub backlog: usize,
    /// Deliveries to a healthy endpoint first, warming the page cache.
    pub warmup: usize,
    /// Concurrent requests.
    pub concurrency: usize,
    /// Client threads they are spread over.
    pub client_threads: usize,
}

/// Runs the scenario; `sink` (at `sink_url`) is the subscriber.
pub async fn run(
    at: Server<'_>,
    plan: Plan,
    sink_url: &str,
    sink: &Arc<SinkState>,
) -> Result<BacklogResult, String> {
    let Server { dir, env, admin } = at;
    let Plan {
        backlog,
        warmup,
        concurrency,
        client_threads,
    } = plan;
    let (server, _) = ServerProcess::start(dir, env, false)?;
    let target = Target::new(server.base_url(), admin.to_owned(), concurrency);
    let fixture = Arc::new(target.setup(1, sink_url, sink).await?);
    let warm = BurstPlan {
        events: warmup,
        concurrency,
        client_threads,
        rate: 0.0,
        hanging_every: 0,
    };
    burst(&target, &fixture, sink, warm, &ProgressBar::hidden()).await?;
    let baseline_mb = server.resident_mb();

    let bar = ProgressBar::new(backlog as u64).with_message("backlog");
    let started = Instant::now();
    let mut points = Vec::new();
    let mut queued = 0;
    for milestone in milestones(backlog) {
        queued += queue(
            &target,
            &fixture,
            milestone - queued,
            concurrency,
            client_threads,
            &bar,
        )
        .await?;
        let resident_mb = server.resident_mb();
        points.push(Point {
            queued,
            resident_mb,
            growth_mb: resident_mb - baseline_mb,
        });
    }
    let accepted_per_s = queued as f64 / started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    drop(server);

    let (server, serving) = ServerProcess::start(dir, env, false)?;
    let restart_resident_mb = server.resident_mb();
    actix_web::rt::time::sleep(Duration::from_secs(5)).await;
    Ok(BacklogResult {
        baseline_mb,
        points,
        accepted_per_s,
        restart_serving_after_ms: serving.as_millis(),
        restart_resident_mb,
        restart_resident_after_5s_mb: server.resident_mb(),
    })
}

/// Creates `count` tasks in the organization whose endpoint hangs; answers
/// how many were accepted.
async fn queue(
    target: &Target,
    fixture: &Arc<Fixture>,
    count: usize,
    concurrency: usize,
    client_threads: usize,
    bar: &ProgressBar,
) -> Result<usize, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let (fixture, bar) = (fixture.clone(), bar.clone());
    let accepted = on_client_threads(target, concurrency, client_threads, move |target, share| {
        let (fixture, next, bar) = (fixture.clone(), next.clone(), bar.clone());
        async move {
            let loops = (0..share).map(|_| async {
                let mut accepted = 0;
                while next.fetch_add(1, Ordering::Relaxed) < count {
                    let body = json!({"title": "queued for an endpoint that never answers"});
                    let path = format!("/organizations/{}/tasks", fixture.hanging_org);
                    let result = target
                        .call(Method::POST, &path, &fixture.owner_token, Some(&body))
                        .await;
                    if matches!(result, Ok((201, _, _))) {
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
    })
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

/// Prints the result.
pub fn print(result: &BacklogResult) {
    let mut rows = vec![(
        "no backlog (MiB)".to_owned(),
        format!("{:.1}", result.baseline_mb),
    )];
    for point in &result.points {
        rows.push((
            format!("{} queued (MiB, growth)", point.queued),
            format!("{:.1} (+{:.1})", point.resident_mb, point.growth_mb),
        ));
    }
    rows.push((
        "accepted/s while queueing".into(),
        format!("{:.0}", result.accepted_per_s),
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
    table("backlog: an endpoint that never answers", &rows);
}
