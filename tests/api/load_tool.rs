//! `rolecall load` end to end: the real binary starts its own server (a
//! child process) and sink, runs every scenario at a small size, and its
//! JSON reports that every accepted event reached the sink once, signed.
//! Throughput and latency are not asserted: they belong to BENCHMARKS.md.

use std::process::Command;

use serde_json::Value;

/// A run small enough for a test: 300 events over 3 organizations.
const SMALL: &[&str] = &["--events", "300", "--orgs", "3", "--concurrency", "8"];

/// Held by each test that runs the load tool on PostgreSQL: one checks that
/// the tool drops the database it made, by the databases it sees.
static ON_POSTGRES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `rolecall load <args> --json <file>` (no `ROLECALL_*` settings of
/// this environment) and answers the JSON report.
async fn load(args: &[&str]) -> Value {
    load_with(args, &[]).await
}

/// As [`load`], with `settings` (`ROLECALL_*`) for the server it starts.
async fn load_with(args: &[&str], settings: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("load.json");
    let mut with_report: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    with_report.push("--json".into());
    with_report.push(report.display().to_string());
    let output = run_load(with_report, settings).await;
    assert!(
        output.status.success(),
        "load failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(&report).expect("report written")).expect("JSON")
}

/// Runs `rolecall load <args>` without the `ROLECALL_*` settings of this
/// environment, with `settings` instead.
async fn run_load(args: Vec<String>, settings: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rolecall"));
    command.arg("load").args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("ROLECALL_") {
            command.env_remove(key);
        }
    }
    command.envs(settings.iter().copied());
    actix_web::rt::task::spawn_blocking(move || command.output().expect("runs"))
        .await
        .expect("joined")
}

#[actix_web::test]
async fn the_load_tool_runs_every_scenario_and_loses_nothing() {
    let results = load(&[&["--scenario", "all", "--duration-secs", "1"], SMALL].concat()).await;

    for scenario in ["read", "baseline"] {
        let read = &results[scenario];
        assert_eq!(read["errors"], 0, "{scenario}: {read}");
        assert!(
            read["requests"].as_u64().unwrap_or(0) > 0,
            "{scenario}: {read}"
        );
        let p = &read["latency_ms"];
        assert!(p["p50"].as_f64() <= p["p99"].as_f64(), "{scenario}: {read}");
    }
    for scenario in ["burst", "isolation"] {
        let burst = &results[scenario];
        assert_eq!(burst["accepted"], 300, "{scenario}: {burst}");
        assert_eq!(burst["errors"], 0, "{scenario}: {burst}");
        assert_eq!(burst["delivered"], 300, "{scenario}: {burst}");
        assert_eq!(burst["lost"], 0, "{scenario}: {burst}");
        assert_eq!(burst["duplicates"], 0, "{scenario}: {burst}");
        assert_eq!(burst["strays"], 0, "{scenario}: {burst}");
        assert_eq!(burst["retried"], 0, "{scenario}: {burst}");
        assert_eq!(burst["bad_signatures"], 0, "{scenario}: {burst}");
    }
}

#[actix_web::test]
async fn the_task_reads_scenario_reads_tasks_it_created_without_errors() {
    let results =
        load(&[&["--scenario", "task-reads", "--duration-secs", "1"], SMALL].concat()).await;
    let reads = &results["task_reads"];
    assert_eq!(reads["errors"], 0, "{reads}");
    assert!(reads["requests"].as_u64() > Some(0), "{reads}");
    assert_eq!(
        results.as_object().map(|all| all.len()),
        Some(1),
        "task-reads runs alone: {results}"
    );
}

#[actix_web::test]
async fn the_backlog_scenario_measures_the_backlog_against_a_control_and_restarts_on_it() {
    let results = load(&[
        "--scenario",
        "backlog",
        "--backlog",
        "12000",
        "--events",
        "200",
        "--concurrency",
        "8",
        "--rate",
        "20000",
    ])
    .await;
    let backlog = &results["backlog"];
    assert_eq!(backlog["traffic"], "status-moves", "the default: {backlog}");
    let queued: Vec<u64> = backlog["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["queued"].as_u64().expect("queued"))
        .collect();
    assert_eq!(queued, [10_000, 12_000], "{backlog}");
    for point in backlog["points"].as_array().expect("points") {
        let (growth, control, cost) = (
            point["growth_mb"].as_f64().expect("growth"),
            point["control_growth_mb"].as_f64().expect("control"),
            point["backlog_mb"].as_f64().expect("backlog's share"),
        );
        assert!((growth - control - cost).abs() < 1e-6, "{point}");
    }
    assert!(backlog["baseline_mb"].as_f64() > Some(1.0), "{backlog}");
    assert!(
        backlog["control_baseline_mb"].as_f64() > Some(1.0),
        "{backlog}"
    );
    assert_eq!(backlog["rate"], 20000.0);
    assert!(
        backlog["restart_serving_after_ms"].as_u64() > Some(0),
        "{backlog}"
    );
    assert!(backlog["restart_resident_mb"].as_f64() > Some(1.0));
}

#[actix_web::test]
async fn on_two_postgres_nodes_the_burst_loses_nothing_and_reports_its_cost_per_event() {
    let Some(url) = postgres_url("load_tool on two nodes") else {
        return;
    };
    let _alone = ON_POSTGRES.lock().await;
    // Two nodes on the run's database, the requests spread over them.
    let before = load_databases(&url);
    let on_postgres = [
        "--backend",
        "postgres",
        "--postgres-url",
        &url,
        "--nodes",
        "2",
    ];
    let results = load(&[&on_postgres[..], &["--scenario", "burst"], SMALL].concat()).await;
    let burst = &results["burst"];
    assert_eq!(burst["accepted"], 300, "{burst}");
    assert_eq!(burst["delivered"], 300, "{burst}");
    assert_eq!(burst["lost"], 0, "{burst}");
    assert_eq!(burst["strays"], 0, "{burst}");
    assert_eq!(burst["bad_signatures"], 0, "{burst}");
    let cost = &results["burst_cost"];
    assert!(
        cost["cpu_per_event"]["server_us"].as_f64() > Some(0.0),
        "{cost}"
    );
    assert!(
        cost["cpu_per_event"]["postgres_us"].as_f64() > Some(0.0),
        "PostgreSQL runs on this machine: {cost}"
    );
    if std::env::var("ROLECALL_REQUIRE_POSTGRES").as_deref() == Ok("1") {
        // CI loads pg_stat_statements (.ci/install.sh).
        let statements = &cost["statements"];
        let total = statements["total"].as_i64().unwrap_or(0);
        assert!(total > 0, "{cost}");
        let queries: Vec<&str> = statements["by_statement"]
            .as_array()
            .map(|all| all.iter().filter_map(|s| s["query"].as_str()).collect())
            .unwrap_or_default();
        assert!(
            queries.iter().any(|q| q.contains("INSERT INTO resources")),
            "{queries:?}"
        );
    }

    // The run's database is gone.
    assert_eq!(
        load_databases(&url),
        before,
        "the load tool drops the database it made"
    );
}

/// Issue 30: a healthy database never answers 503. A burst over 64
/// organizations at 64 connections, on a node with few connections for
/// requests (4, given up after 1 s) and a log retention so short that every
/// organization's log needs upkeep on every pass: background work has its
/// own connections, so every create is answered 201, none after 2.5 s.
#[actix_web::test]
async fn on_postgres_background_work_never_takes_the_connections_requests_need() {
    let Some(url) = postgres_url("load_tool::background_work") else {
        return;
    };
    let _alone = ON_POSTGRES.lock().await;
    let on_postgres = ["--backend", "postgres", "--postgres-url", &url];
    let burst = [
        "--scenario",
        "burst",
        "--events",
        "6000",
        "--orgs",
        "64",
        "--concurrency",
        "64",
    ];
    let settings = [
        ("ROLECALL_STORAGE__POSTGRES_POOL", "4"),
        ("ROLECALL_STORAGE__POSTGRES_BACKGROUND_POOL", "2"),
        ("ROLECALL_STORAGE__POSTGRES_CONNECT_TIMEOUT_MS", "1000"),
        ("ROLECALL_WEBHOOKS__LOG_RETENTION", "20"),
    ];
    let results = load_with(&[&on_postgres[..], &burst[..]].concat(), &settings).await;
    let burst = &results["burst"];
    assert_eq!(burst["errors"], 0, "{burst}");
    assert_eq!(burst["accepted"], 6000, "{burst}");
    assert_eq!(burst["delivered"], 6000, "{burst}");
    assert_eq!(burst["lost"], 0, "{burst}");
    let slowest = burst["request_ms"]["max"].as_f64().unwrap_or(f64::MAX);
    assert!(slowest < 2500.0, "a create took {slowest} ms: {burst}");
}

/// `ROLECALL_TEST_POSTGRES_URL`, or `None` (the test skipped, saying so)
/// unless CI requires PostgreSQL.
fn postgres_url(test: &str) -> Option<String> {
    let url = std::env::var("ROLECALL_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        assert!(
            std::env::var("ROLECALL_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "ROLECALL_REQUIRE_POSTGRES=1 but ROLECALL_TEST_POSTGRES_URL is not set"
        );
        eprintln!("skipped {test} on PostgreSQL: set ROLECALL_TEST_POSTGRES_URL (see README)");
    }
    url
}

/// The load tool's databases on the server of `url`.
fn load_databases(url: &str) -> Vec<String> {
    crate::engines::on_database(url, |client| async move {
        let rows = client
            .query(
                "SELECT datname FROM pg_database WHERE datname LIKE 'rolecall_load_%' ORDER BY 1",
                &[],
            )
            .await
            .expect("databases");
        rows.iter().map(|row| row.get::<_, String>(0)).collect()
    })
}

#[actix_web::test]
async fn the_load_tool_refuses_a_remote_database_and_sled_only_scenarios_on_postgres() {
    let refusal = |args: &[&str]| {
        let args = args.iter().map(|a| a.to_string()).collect();
        async move {
            let output = run_load(args, &[]).await;
            assert!(!output.status.success());
            String::from_utf8_lossy(&output.stderr).into_owned()
        }
    };
    let remote = refusal(&[
        "--backend",
        "postgres",
        "--postgres-url",
        "postgres://u@10.1.2.3/postgres",
        "--scenario",
        "burst",
    ])
    .await;
    assert!(remote.contains("on this machine"), "{remote}");
    let backlog = refusal(&[
        "--backend",
        "postgres",
        "--postgres-url",
        "postgres://u@127.0.0.1/postgres",
        "--scenario",
        "backlog",
    ])
    .await;
    assert!(
        backlog.contains("run them with --backend sled"),
        "{backlog}"
    );
    let missing = refusal(&["--backend", "postgres", "--scenario", "burst"]).await;
    assert!(missing.contains("--postgres-url"), "{missing}");
}
