//! `rolecall load`: drives a rolecall server with realistic traffic and
//! reports throughput and latency. It starts its own webhook sink (which
//! verifies every signature and timestamps receipts) and, unless `--url` is
//! given, its own server in a temporary directory.

pub mod backlog;
pub mod cost;
pub mod cpu;
pub mod postgres;
pub mod scenarios;
pub mod server;
pub mod sink;
pub mod startup;
pub mod stats;
pub mod target;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::Method;
use clap::{Args, ValueEnum};
use indicatif::ProgressBar;
use serde_json::{json, Value};

use crate::load::scenarios::{
    baseline_server, burst, create_tasks, print_burst, print_read, read, BurstPlan,
};
use crate::load::server::ServerProcess;
use crate::load::sink::SinkState;
use crate::load::target::Target;
use rolecall::secrets::new_token;

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Authorized role-list reads at --concurrency for --duration-secs.
    Read,
    /// The same reads against a plain handler returning the same JSON (no auth, no storage).
    Baseline,
    /// GETs of tasks picked at random among --events created first, for --duration-secs: reads
    /// that come from the database's pages (through its page cache), not from memory.
    TaskReads,
    /// --events task creations over --orgs organizations, delivered to the sink.
    Burst,
    /// The burst while one more organization's endpoint times out on every attempt.
    Isolation,
    /// Seeds --seed-orgs organizations (10 custom roles, 10 members and a webhook each) and
    /// --seed-pending undelivered jobs, then times `rolecall serve` until it serves and reads its RSS.
    Startup,
    /// Queues --backlog events for an endpoint that never answers (after --events deliveries
    /// that warm the page cache), reading the server's RSS as the backlog grows, against a
    /// control server sent the same events for a subscriber that keeps up (at --rate, default
    /// 5000/s here); restarts the server on its backlog and times it until it serves.
    Backlog,
    /// The read, baseline, burst and isolation scenarios, in that order.
    All,
}

/// How the client spreads requests over several nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Route {
    /// Each request to the next node.
    Turn,
    /// Each organization's requests to one node, organizations dealt in turn.
    Organization,
}

/// The storage engine of the server the tool starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoadBackend {
    /// sled in a temporary directory.
    Sled,
    /// A new database on the PostgreSQL server of --postgres-url, dropped after the run.
    Postgres,
}

/// Options of `rolecall load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Which scenario to run.
    #[arg(long, value_enum, default_value = "all")]
    pub scenario: Scenario,
    /// Base URL of a running server to load (its webhooks must be allowed to reach
    /// 127.0.0.1 over http). Without it, a server is started in a temporary directory.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The admin token of the server given with --url (default: $ROLECALL_ADMIN__TOKEN).
    #[arg(long, value_name = "TOKEN")]
    pub admin_token: Option<String>,
    /// Concurrent requests.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Client threads the concurrent requests are spread over, each with its own
    /// event loop and connections.
    #[arg(long, default_value_t = 2)]
    pub client_threads: usize,
    /// Length of the read and baseline scenarios, in seconds.
    #[arg(long, default_value_t = 10)]
    pub duration_secs: u64,
    /// Task creations in the burst scenarios.
    #[arg(long, default_value_t = 20_000)]
    pub events: usize,
    /// Organizations the burst is spread over.
    #[arg(long, default_value_t = 10)]
    pub orgs: usize,
    /// Events per second to aim at in the burst scenarios (0: as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Organizations seeded by the startup scenario.
    #[arg(long, default_value_t = 10_000)]
    pub seed_orgs: usize,
    /// Pending deliveries seeded by the startup scenario.
    #[arg(long, default_value_t = 100_000)]
    pub seed_pending: usize,
    /// Events queued for the endpoint that never answers, in the backlog scenario.
    #[arg(long, default_value_t = 1_000_000)]
    pub backlog: usize,
    /// What makes the backlog scenario's events: status moves of a fixed set of tasks (only the
    /// backlog grows in the database), or a new task per event (the tasks are stored too).
    #[arg(long, value_enum, default_value = "status-moves")]
    pub backlog_traffic: backlog::Traffic,
    /// The storage engine of the server the tool starts (read, baseline, burst and isolation).
    #[arg(long, value_enum, default_value = "sled")]
    pub backend: LoadBackend,
    /// With --backend postgres: a PostgreSQL server on this machine and a role that may create
    /// databases (postgres://user:password@127.0.0.1/postgres). Each run gets a new database.
    /// Statements per event are counted when the server loads pg_stat_statements.
    #[arg(long, value_name = "URL", required_if_eq("backend", "postgres"))]
    pub postgres_url: Option<String>,
    /// With --backend postgres: nodes to start on the run's database (a cluster); requests
    /// are spread over them as --route says.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// How requests are spread over the nodes: each to the next node, or each
    /// organization's to one node (as a load balancer hashing the path's organization).
    #[arg(long, value_enum, default_value = "turn")]
    pub route: Route,
    /// Send every task creation of the burst scenarios with its own
    /// `Idempotency-Key` (to measure what keys cost).
    #[arg(long)]
    pub idempotency_keys: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// Runs the load tool; returns the results as JSON.
pub fn run(args: LoadArgs) -> Result<Value, String> {
    let postgres = args.backend == LoadBackend::Postgres;
    if postgres && matches!(args.scenario, Scenario::Startup | Scenario::Backlog) {
        return Err(
            "the startup and backlog scenarios seed a sled data directory: run them \
                    with --backend sled"
                .into(),
        );
    }
    if args.nodes != 1 && !postgres {
        return Err(
            "--nodes starts several nodes on one database: it needs --backend postgres".into(),
        );
    }
    if postgres && args.url.is_some() {
        return Err(
            "--backend sets up the server the tool starts, not one given with --url".into(),
        );
    }
    if args.scenario == Scenario::Startup {
        return run_startup(&args);
    }
    if args.scenario == Scenario::Backlog {
        return run_backlog(&args);
    }
    actix_web::rt::System::new().block_on(async move {
        let database = match (&args.backend, &args.postgres_url) {
            (LoadBackend::Postgres, Some(url)) => Some(postgres::RunDatabase::create(url).await?),
            _ => None,
        };
        let outcome = run_scenarios(&args, database.as_ref()).await;
        if let Some(database) = database {
            database.drop_now().await?;
        }
        outcome
    })
}

/// The read, baseline, burst and isolation scenarios, against the server
/// of --url or one the tool starts (on `database`, when given).
async fn run_scenarios(
    args: &LoadArgs,
    database: Option<&postgres::RunDatabase>,
) -> Result<Value, String> {
    let mut _servers = Vec::new();
    let mut meter = cost::Meter {
        servers: Vec::new(),
        database: database.map(|database| database.url.clone()),
    };
    let (base, admin) = match &args.url {
        Some(url) => {
            let admin = args
                .admin_token
                .clone()
                .or_else(|| std::env::var("ROLECALL_ADMIN__TOKEN").ok());
            (
                vec![url.trim_end_matches('/').to_owned()],
                admin.ok_or("--admin-token (or ROLECALL_ADMIN__TOKEN) is required with --url")?,
            )
        }
        None => {
            if let Some(database) = database {
                if let Err(why) = postgres::enable_statements(&database.url).await {
                    println!("statements will not be counted: {why}");
                }
            }
            let (servers, admin) =
                start_servers(args.nodes.max(1), database.map(|d| d.url.as_str()))?;
            let bases = servers.iter().map(ServerProcess::base_url).collect();
            meter.servers = servers.iter().map(ServerProcess::pid).collect();
            _servers = servers;
            (bases, admin)
        }
    };
    let sink = Arc::new(SinkState::default());
    let (sink_url, _sink) =
        sink::start(sink.clone(), Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let mut target = Target::spread(base, admin, Default::default(), args.concurrency);
    let fixture = Arc::new(target.setup(args.orgs, &sink_url, &sink).await?);
    if args.route == Route::Organization {
        // The setup queued no event (the webhooks take task events only), so
        // no lease is held yet: each organization's first event claims its
        // lease on the node its requests go to.
        let mut orgs = fixture.orgs.clone();
        orgs.push(fixture.hanging_org.clone());
        target.route_by_organization(&orgs);
    }
    let clients = (args.concurrency, args.client_threads);
    let mut results = serde_json::Map::new();
    let runs = |s: Scenario| args.scenario == s || args.scenario == Scenario::All;
    let duration = Duration::from_secs(args.duration_secs);
    let roles_path = vec![format!("/organizations/{}/roles", fixture.orgs[0])];

    if runs(Scenario::Read) {
        let bar = ProgressBar::new_spinner().with_message("read");
        let result = read(
            &target,
            &roles_path,
            &fixture.reader_token,
            clients,
            duration,
            &bar,
        )
        .await?;
        bar.finish_and_clear();
        print_read(
            &format!("read: GET roles, {} connections", args.concurrency),
            &result,
        );
        results.insert("read".into(), json!(result));
    }
    if runs(Scenario::Baseline) {
        let (_, body, _) = target
            .call(Method::GET, &roles_path[0], &fixture.reader_token, None)
            .await?;
        let (url, handle) = baseline_server(body).map_err(|e| e.to_string())?;
        let plain = Target::new(url, String::new(), args.concurrency);
        let bar = ProgressBar::new_spinner().with_message("baseline");
        let result = read(&plain, &["/".to_owned()], "", clients, duration, &bar).await?;
        bar.finish_and_clear();
        handle.stop(false).await;
        print_read(
            &format!("baseline: plain handler, {} connections", args.concurrency),
            &result,
        );
        results.insert("baseline".into(), json!(result));
    }
    if args.scenario == Scenario::TaskReads {
        let bar = ProgressBar::new_spinner().with_message("task reads");
        let org = &fixture.orgs[0];
        let paths = create_tasks(&target, org, &fixture.owner_token, args.events, clients).await?;
        let result = read(
            &target,
            &paths,
            &fixture.owner_token,
            clients,
            duration,
            &bar,
        )
        .await?;
        bar.finish_and_clear();
        print_read(
            &format!(
                "task reads: GET one of {} tasks, {} connections",
                paths.len(),
                args.concurrency
            ),
            &result,
        );
        results.insert("task_reads".into(), json!(result));
    }
    let plan = BurstPlan {
        events: args.events,
        concurrency: args.concurrency,
        client_threads: args.client_threads,
        rate: args.rate,
        hanging_every: 0,
        keyed: args.idempotency_keys,
    };
    if runs(Scenario::Burst) || runs(Scenario::Isolation) {
        let bar = ProgressBar::new(plan.events as u64);
        let start = meter.start().await;
        let result = burst(&target, &fixture, &sink, plan, &bar).await?;
        let spent = meter.finish(start, result.accepted).await;
        bar.finish_and_clear();
        print_burst(
            &format!(
                "burst: {} task creations over {} orgs",
                plan.events,
                fixture.orgs.len()
            ),
            &result,
        );
        cost::print("burst: cost per event", &spent);
        results.insert("burst".into(), json!(result));
        results.insert("burst_cost".into(), json!(spent));
    }
    if runs(Scenario::Isolation) {
        let plan = BurstPlan {
            hanging_every: 10,
            ..plan
        };
        let bar = ProgressBar::new((plan.events + plan.events / 10) as u64);
        let result = burst(&target, &fixture, &sink, plan, &bar).await?;
        bar.finish_and_clear();
        print_burst(
            "isolation: the same burst, one more org's endpoint timing out",
            &result,
        );
        results.insert("isolation".into(), json!(result));
    }
    let results = Value::Object(results);
    if let Some(path) = &args.json {
        std::fs::write(
            path,
            serde_json::to_vec_pretty(&results).unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
    }
    println!("\n{}", serde_json::to_string(&results).unwrap_or_default());
    Ok(results)
}

fn run_startup(args: &LoadArgs) -> Result<Value, String> {
    let dir = std::env::temp_dir().join(format!(
        "rolecall-startup-{}",
        rolecall::ids::new_v7().simple()
    ));
    let seeding = std::time::Instant::now();
    startup::seed(&dir, args.seed_orgs, args.seed_pending)?;
    println!(
        "seeded {} orgs and {} pending deliveries in {:?}",
        args.seed_orgs,
        args.seed_pending,
        seeding.elapsed()
    );
    let result = startup::measure(&dir, args.seed_orgs, args.seed_pending);
    let _ = std::fs::remove_dir_all(&dir);
    let result = result?;
    stats::table(
        "startup",
        &[
            ("organizations", result.organizations.to_string()),
            ("pending deliveries", result.pending_deliveries.to_string()),
            ("serving after (ms)", result.serving_after_ms.to_string()),
            ("resident memory (MB)", format!("{:.1}", result.resident_mb)),
        ],
    );
    let value = json!({ "startup": result });
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap_or_default())
            .map_err(|e| e.to_string())?;
    }
    Ok(value)
}

fn run_backlog(args: &LoadArgs) -> Result<Value, String> {
    let tag = rolecall::ids::new_v7().simple().to_string();
    let dir = std::env::temp_dir().join(format!("rolecall-backlog-{tag}"));
    let control_dir = std::env::temp_dir().join(format!("rolecall-backlog-control-{tag}"));
    let admin = new_token().expose().to_owned();
    let env = server_env(&admin);
    let result = actix_web::rt::System::new().block_on(async {
        let sink = Arc::new(SinkState::default());
        let (sink_url, _sink) =
            sink::start(sink.clone(), Duration::from_secs(30)).map_err(|e| e.to_string())?;
        let server = backlog::Server {
            dir: &dir,
            control_dir: &control_dir,
            env: &env,
            admin: &admin,
        };
        let plan = backlog::Plan {
            backlog: args.backlog,
            warmup: args.events,
            rate: if args.rate > 0.0 { args.rate } else { 5000.0 },
            concurrency: args.concurrency,
            client_threads: args.client_threads,
            traffic: args.backlog_traffic,
        };
        backlog::run(server, plan, &sink_url, &sink).await
    });
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&control_dir);
    let result = result?;
    backlog::print(&result);
    let value = json!({ "backlog": result });
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap_or_default())
            .map_err(|e| e.to_string())?;
    }
    println!("\n{}", serde_json::to_string(&value).unwrap_or_default());
    Ok(value)
}

/// Starts `nodes` `rolecall serve` child processes, each in a scratch
/// directory (on the PostgreSQL database `postgres_url` when given), with
/// webhooks allowed to reach the sink. `ROLECALL_<SECTION>__<KEY>`
/// variables of the environment reach them too, so server settings can be
/// compared under the same load. Answers the servers and their admin token.
fn start_servers(
    nodes: usize,
    postgres_url: Option<&str>,
) -> Result<(Vec<ServerProcess>, String), String> {
    let admin = new_token().expose().to_owned();
    let mut env = server_env(&admin);
    if let Some(url) = postgres_url {
        env.push(("ROLECALL_STORAGE__BACKEND".into(), "postgres".into()));
        env.push(("ROLECALL_STORAGE__POSTGRES_URL".into(), url.to_owned()));
    }
    let mut servers = Vec::with_capacity(nodes);
    for _ in 0..nodes {
        let dir = std::env::temp_dir().join(format!(
            "rolecall-load-{}",
            rolecall::ids::new_v7().simple()
        ));
        servers.push(ServerProcess::start(&dir, &env, true)?.0);
    }
    Ok((servers, admin))
}

/// The settings of a server the tool starts: webhooks allowed to reach the
/// sink, quiet logs, `admin` as the admin token, and whatever
/// `ROLECALL_<SECTION>__<KEY>` variables the environment sets.
fn server_env(admin: &str) -> Vec<(String, String)> {
    let defaults = [
        ("ROLECALL_WEBHOOKS__ALLOW_HTTP", "true"),
        ("ROLECALL_WEBHOOKS__ALLOW_PRIVATE_NETWORKS", "true"),
        ("ROLECALL_WEBHOOKS__ATTEMPT_TIMEOUT_MS", "2000"),
        ("ROLECALL_LOG__LEVEL", "warn"),
    ];
    let mut env: Vec<(String, String)> = defaults
        .iter()
        .filter(|(key, _)| std::env::var_os(key).is_none())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.push(("ROLECALL_ADMIN__TOKEN".into(), admin.to_owned()));
    env
}
