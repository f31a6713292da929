//! `rolecall load` end to end: the real binary starts its own server (a
//! child process) and sink, runs every scenario at a small size, and its
//! JSON reports that every accepted event reached the sink once, signed.
//! Throughput and latency are not asserted: they belong to BENCHMARKS.md.

use std::process::Command;

use serde_json::Value;

#[actix_web::test]
async fn the_load_tool_runs_every_scenario_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("load.json");
    let mut command = Command::new(env!("CARGO_BIN_EXE_rolecall"));
    command
        .arg("load")
        .args(["--scenario", "all", "--events", "300", "--orgs", "3"])
        .args(["--concurrency", "8", "--duration-secs", "1"])
        .arg("--json")
        .arg(&report);
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
    let results: Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report written")).expect("JSON");

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
