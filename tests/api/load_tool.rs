//! `rolecall load` end to end: the real binary starts its own server (a
//! child process) and sink, runs every scenario at a small size, and its
//! JSON reports that every accepted event reached the sink once, signed.
//! Throughput and latency are not asserted: they belong to BENCHMARKS.md.

use std::process::Command;

use serde_json::Value;

/// Runs `rolecall load <args> --json <file>` (no `ROLECALL_*` settings of
/// this environment) and answers the JSON report.
async fn load(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("load.json");
    let mut command = Command::new(env!("CARGO_BIN_EXE_rolecall"));
    command.arg("load").args(args).arg("--json").arg(&report);
    for (key, _) in std::env::vars() {
        if key.starts_with("ROLECALL_") {
            command.env_remove(key);
        }
    }
    let output = actix_web::rt::task::spawn_blocking(move || command.output().expect("runs"))
        .await
        .expect("joined");
    assert!(
        output.status.success(),
        "load failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(&report).expect("report written")).expect("JSON")
}

#[actix_web::test]
async fn the_load_tool_runs_every_scenario_and_loses_nothing() {
    let results = load(&[
        "--scenario",
        "all",
        "--events",
        "300",
        "--orgs",
        "3",
        "--concurrency",
        "8",
        "--duration-secs",
        "1",
    ])
    .await;

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
        assert_eq!(burst["bad_signatures"], 0, "{scenario}: {burst}");
    }
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
