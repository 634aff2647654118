//! The ingestion scenario against real processes: a private Redis with the module (built:
//! `cargo build -p redis-throttle-module`), the mock database, and 3 worker processes per
//! phase, through the `ingest-demo` binary and its `--json` summary. Full size (10 000
//! records of 10 RU, 20 000 RU/s); a worker is SIGKILLed on every run.
//!
//! The server decides the counts, so they are exact: every record stored exactly once,
//! nothing refused through the backlog. The machine decides the timing, so times are
//! bounded by what was measured: how the retried writes spread out, when the last tokens
//! were granted, how long a write took.
//!
//! The runs take turns (`turn`): each one times a bucket to the millisecond, and two cores
//! shared with parallel runs would make that a test of the scheduler.

use std::process::Command;
use std::time::Duration;

#[path = "../../demo-support/tests/scenario_tests/mod.rs"]
#[macro_use]
mod scenario_tests;

use scenario_tests::{assert_everything_stopped, between, int, secs, turn, Demo};
use serde_json::Value;
use throttle_testkit::Flavor;

const INGEST_DEMO: Demo = demo_binary!("ingest-demo", Duration::from_secs(300));

/// The database's burst and rate, and a write's cost.
const CAPACITY_RU: u64 = 20_000;
const RATE_RU: u64 = 20_000;
const RU: u64 = 10;
const RECORDS: u64 = 10_000;
/// The default margin: the shared bucket's burst is 19 800 RU.
const MARGIN_RU: u64 = 200;

/// The binary of a server the kit knows (tests/install-servers.sh installs them).
fn server(flavor: Flavor) -> String {
    let binary = flavor.binary().unwrap_or_else(|why| panic!("{why}"));
    binary.display().to_string()
}

#[test]
fn full_size_on_redis_8_2_retry_multiplies_the_writes_and_the_backlog_does_not() {
    let _turn = turn();
    let summary = INGEST_DEMO.run("redis-8.2", &["--server", &server(Flavor::Redis82)]);
    assert!(
        summary["redis"].as_str().unwrap().contains("Redis 8.2"),
        "{}",
        summary["redis"]
    );
    assert_retry_phase(&summary["retry"]);
    assert_backlog_phase(&summary["backlog"], false);
    assert_backlog_phase(&summary["kill"], true);

    let chart = std::fs::read_to_string(INGEST_DEMO.chart_path("redis-8.2")).expect("the chart");
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
    assert!(chart.contains("quota: 200 per 100 ms"), "the quota line");
    for title in [
        "phase 1: retry on error",
        "phase 2: backlog",
        "phase 3: backlog",
    ] {
        assert!(chart.contains(title), "no panel {title:?}");
    }
    assert_eq!(
        summary["chart"],
        INGEST_DEMO.chart_path("redis-8.2").display().to_string()
    );
}

#[test]
fn the_backlog_and_the_kill_on_redis_7_0() {
    let _turn = turn();
    let summary = INGEST_DEMO.run(
        "redis-7.0",
        &[
            "--server",
            &server(Flavor::Redis70),
            "--phase",
            "2",
            "--phase",
            "3",
        ],
    );
    assert!(
        summary["redis"].as_str().unwrap().contains("Redis 7.0"),
        "{}",
        summary["redis"]
    );
    assert!(summary["retry"].is_null());
    assert_backlog_phase(&summary["backlog"], false);
    assert_backlog_phase(&summary["kill"], true);
}

/// Phase 1: every record arrives at once (as fast as the machine fires them) and is retried
/// after Retry-After. The database's bucket decides; the machine decides when the writes
/// arrive. So: the counts add up exactly, and each try stored at most what a full bucket
/// plus the refill over that try's measured arrival span holds.
#[track_caller]
fn assert_retry_phase(retry: &Value) {
    let (sent, refused, stored) = (
        int(&retry["sent"]),
        int(&retry["refused"]),
        int(&retry["stored"]),
    );
    assert_eq!(stored, RECORDS, "{retry}");
    assert_eq!(
        (int(&retry["duplicates"]), int(&retry["errors"])),
        (0, 0),
        "{retry}"
    );
    assert_eq!(retry["stored_once"], true, "{retry}");
    assert_eq!(
        (
            int(&retry["records"]),
            int(&retry["lost"]),
            int(&retry["unexpected"])
        ),
        (RECORDS, 0, 0),
        "{retry}"
    );
    assert_eq!(
        sent,
        RECORDS + refused,
        "every refusal was sent again: {retry}"
    );
    // The document's arithmetic, exact.
    assert_eq!(
        (
            int(&retry["document_sent"]),
            int(&retry["document_refused"])
        ),
        (30_000, 20_000)
    );

    let waves = retry["waves"].as_array().expect("waves");
    let burst = CAPACITY_RU / RU;
    let (mut sent_by_waves, mut least_refused) = (0, 0);
    for wave in waves {
        let (w_sent, w_stored, w_refused) = (
            int(&wave["sent"]),
            int(&wave["stored"]),
            int(&wave["refused"]),
        );
        assert_eq!(w_sent, w_stored + w_refused, "{wave}");
        // A full bucket at the try's first arrival plus the refill over its span; +1 as the
        // span is a decimal in the JSON.
        let span = secs(&wave["span_s"]);
        let most = burst + (span * (RATE_RU / RU) as f64).floor() as u64 + 1;
        assert!(
            w_stored <= most && w_stored <= int(&wave["most_stored"]),
            "try {} stored {w_stored} of {w_sent} arriving over {span} s: at most {most}: {retry}",
            wave["attempt"]
        );
        assert!(int(&wave["most_stored"]) <= most, "{wave}");
        sent_by_waves += w_sent;
        least_refused += w_sent - int(&wave["most_stored"]);
    }
    assert_eq!(sent_by_waves, sent, "{retry}");
    assert_eq!(least_refused, int(&retry["least_refused"]), "{retry}");
    assert!(refused >= least_refused, "{retry}");
    // The first try alone overflows the bucket unless the machine took 4 s to fire it.
    if secs(&waves[0]["span_s"]) < 4.0 {
        assert!(refused > 0, "{retry}");
    }
    // The database stores at most its burst plus 2 000 a second: all of them take 4 s.
    assert!((secs(&retry["min_time_s"]) - 4.0).abs() < 1e-9, "{retry}");
    assert!(secs(&retry["finish_s"]) >= 4.0, "{retry}");
}

/// Phases 2 and 3: exact counts, the prediction from `stats()` before the start, and a
/// finish time that the bucket bounds below and the measured lateness bounds above.
#[track_caller]
fn assert_backlog_phase(phase: &Value, killed: bool) {
    assert_eq!(int(&phase["records"]), RECORDS);
    assert_eq!(
        (int(&phase["queue_a"]), int(&phase["queue_b"])),
        (5_000, 5_000)
    );
    // Exactly once each, none lost, nothing else; nothing refused, no error, no dead letter.
    assert_eq!(int(&phase["stored"]), RECORDS, "{phase}");
    assert_eq!(
        (int(&phase["lost"]), int(&phase["unexpected"])),
        (0, 0),
        "{phase}"
    );
    assert_eq!(int(&phase["refused"]), 0, "{phase}");
    assert_eq!(
        (
            int(&phase["errors"]),
            int(&phase["throttled"]),
            int(&phase["dead_letters"])
        ),
        (0, 0, 0),
        "{phase}"
    );
    let duplicates = int(&phase["duplicates"]);
    assert_eq!(int(&phase["sent"]), RECORDS + duplicates, "{phase}");

    // Before the start: each queue's stats, and the two through the one bucket.
    let capacity = CAPACITY_RU - MARGIN_RU;
    assert_eq!(int(&phase["bucket_capacity_ru"]), capacity);
    assert_eq!(int(&phase["bucket_remaining"]), capacity, "a fresh bucket");
    for stream in phase["stats"].as_array().expect("stats") {
        assert_eq!(
            (
                int(&stream["depth"]),
                int(&stream["in_flight"]),
                int(&stream["queued_cost"])
            ),
            (5_000, 0, 50_000),
            "{stream}"
        );
        assert!(stream["oldest_age_ms"].is_u64(), "{stream}");
        // One queue alone: (50 000 − 19 800) RU at 20 000 RU/s.
        assert!(
            (secs(&stream["drain_time_s"]) - 1.51).abs() < 1e-9,
            "{stream}"
        );
    }
    // Both: (100 000 − 19 800) RU at 20 000 RU/s, the same as the ideal schedule; the
    // database alone could not be faster than (100 000 − 20 000) / 20 000.
    let ideal = secs(&phase["ideal_s"]);
    assert!((ideal - 4.01).abs() < 1e-9, "{phase}");
    assert!(
        (secs(&phase["predicted_s"]) - ideal).abs() < 1e-9,
        "{phase}"
    );
    assert!(
        (secs(&phase["database_min_s"]) - 4.0).abs() < 1e-9,
        "{phase}"
    );

    // The bucket could not grant the last tokens before the ideal (the server's clock reads
    // in whole ms on Redis 7.0: 1 ms of slack); the last record was stored during the last
    // handler call, which began at `last_grant_s` and took at most `max_trip_s` (the
    // workers' and the database's clocks meet through the wall clock: 2 ms of slack).
    let (finish, last_grant, trip) = (
        secs(&phase["finish_s"]),
        secs(&phase["last_grant_s"]),
        secs(&phase["max_trip_s"]),
    );
    let lateness = last_grant - ideal;
    assert!(
        lateness >= -0.001,
        "granted before the bucket allows: {phase}"
    );
    assert!(
        finish >= ideal - 0.001,
        "finished before the ideal: {phase}"
    );
    assert!(
        finish <= ideal + lateness + trip + 0.002,
        "finished {finish} s: more than the ideal {ideal} s + lateness {lateness} s + the \
         longest write {trip} s: {phase}"
    );
    assert!(secs(&phase["drained_s"]) >= finish - 0.002, "{phase}");

    let kill = &phase["kill"];
    if !killed {
        assert!(kill.is_null(), "{phase}");
        assert_eq!((duplicates, int(&phase["claimed"])), (0, 0), "{phase}");
        return;
    }
    // SIGKILLed with 30% stored; the records it held were taken over once idle for
    // claim_idle. Only those can come back as duplicates.
    assert!(int(&kill["stored_before"]) >= 3_000, "{kill}");
    let held = int(&kill["held"]);
    assert!(int(&kill["claimed"]) >= held, "{kill}");
    assert!(duplicates <= held, "{phase}");
    let claim_idle = secs(&kill["claim_idle_s"]);
    assert!((claim_idle - 1.0).abs() < 1e-9);
    if held > 0 {
        let after = secs(&kill["claimed_after_s"]);
        // Idle counts from the read, before the kill; a worker looks for stranded records
        // every round (a read blocks at most 100 ms).
        assert!(
            after > 0.0 && after <= claim_idle + 1.0,
            "the dead worker's records came back {after} s after the kill: {kill}"
        );
    }
}

#[test]
fn help_lists_the_knobs() {
    let mut help = Command::new(INGEST_DEMO.exe);
    help.arg("--help");
    let output = INGEST_DEMO.output_within(help, Duration::from_secs(30));
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--records",
        "--phase",
        "--server",
        "--json",
        "--chart",
        "--claim-idle-ms",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn ctrl_c_stops_redis_the_database_and_the_workers() {
    let _turn = turn();
    let (status, seen) =
        INGEST_DEMO.signal_midway("ctrl-c", &["--phase", "2"], "workers start", "INT");
    assert_eq!(status.code(), Some(130), "{seen}");
    assert_workers_and_redis_stopped(&seen);
}

#[test]
fn even_a_kill_leaves_nothing_running() {
    let _turn = turn();
    let (_, seen) = INGEST_DEMO.signal_midway("kill", &["--phase", "2"], "workers start", "KILL");
    assert_workers_and_redis_stopped(&seen);
}

/// The private Redis no longer answers, and no worker of this run is left (a worker's command
/// line names the mock database).
fn assert_workers_and_redis_stopped(seen: &str) {
    let database = between(seen, "mock database on ", ": ");
    assert_everything_stopped(seen, "workers", &format!("--db={database}"));
}
