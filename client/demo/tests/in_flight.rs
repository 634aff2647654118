//! The cap on calls in flight against a supplier that refuses calls above 4 open at once and
//! answers slowly (400-800 ms a call) for the first 2 s of each phase: through the `pix-demo`
//! binary, its private Redis with the module (built first: `cargo build -p
//! redis-throttle-module`), the mock API and the replicas as separate processes, read from
//! its `--json` summary. 2 replicas x 10 calls, a few seconds a run.
//!
//! What the supplier decides (its count of open calls, its refusals) is asserted exactly; how
//! together the calls reach it is the machine's, and only bounds it.

use std::time::Duration;

#[path = "../../demo-support/tests/scenario_tests/mod.rs"]
#[macro_use]
mod scenario_tests;

use scenario_tests::{int, phase, turn, Demo};
use serde_json::Value;

const PIX_DEMO: Demo = demo_binary!("pix-demo", Duration::from_secs(120));

/// The supplier's limit on calls open at once, and the cap that matches it.
const LIMIT: u64 = 4;

/// 2 x 10 calls, the supplier at most 4 open and slow from 0 s to 2 s.
const SLOW_SUPPLIER: [&str; 8] = [
    "--calls",
    "10",
    "--supplier-max-open",
    "4",
    "--slow-from",
    "0",
    "--slow-until",
    "2",
];

/// What holds whatever the cap: the supplier never had more than its limit open, counted
/// every call out that it counted in, and its figures add up.
#[track_caller]
fn assert_the_supplier_counts(phase: &Value) {
    let open = &phase["open_calls"];
    assert_eq!(int(&open["supplier_max_open"]), LIMIT, "{open}");
    assert!(int(&open["most_open"]) <= LIMIT, "{open}");
    let bins = open["open_per_bin"].as_array().expect("open_per_bin");
    assert!(bins.iter().all(|b| int(b) <= LIMIT), "{open}");
    assert_eq!(
        int(&open["open_at_end"]),
        0,
        "every call counted out: {open}"
    );
    assert_eq!(
        int(&open["refused_for_concurrency"]),
        int(&phase["refused_for_concurrency"]),
        "{phase}"
    );
    assert_eq!(
        int(&open["refused_for_concurrency"]) + int(&open["refused_for_rate"]),
        int(&phase["refused"]),
        "{phase}"
    );
    let seconds = open["seconds"].as_array().expect("seconds");
    let served: u64 = seconds.iter().map(|s| int(&s["fleet_served"])).sum();
    assert_eq!(served, int(&phase["served"]), "{open}");
    // The spell covers the first two seconds, and only them.
    for s in seconds {
        assert_eq!(s["slow"] == true, int(&s["t"]) < 2, "{open}");
    }
}

/// The direct phase, with no limiter and so no cap whatever the run's `--max-in-flight`: 20
/// calls at once, 4 held open at least 400 ms, so the other 16 arrive meanwhile and some are
/// refused for concurrency, unless the machine spread them over 400 ms.
#[track_caller]
fn assert_direct_is_refused_for_concurrency(summary: &Value) {
    let direct = phase(summary, "direct");
    assert_the_supplier_counts(direct);
    assert!(int(&direct["refused_for_concurrency"]) > 0, "{direct}");
}

#[test]
fn without_a_cap_the_slow_supplier_refuses_calls_for_concurrency() {
    let _turn = turn();
    let summary = PIX_DEMO.run("in-flight-uncapped", &SLOW_SUPPLIER);
    assert_direct_is_refused_for_concurrency(&summary);
    // Through the bucket: its burst of 8 reaches the supplier together, and each of the first
    // 4 stays open at least 400 ms.
    let bucket = phase(&summary, "bucket");
    assert_the_supplier_counts(bucket);
    assert!(int(&bucket["refused_for_concurrency"]) > 0, "{bucket}");
    let open = &bucket["open_calls"];
    assert!(open["max_in_flight"].is_null(), "no cap: {open}");
    assert!(open["slot_waits"].is_null(), "no cap: {open}");
    assert_eq!(
        int(&open["most_open"]),
        LIMIT,
        "full before it refused: {open}"
    );
}

#[test]
fn a_cap_equal_to_the_suppliers_limit_is_never_refused_for_concurrency() {
    let _turn = turn();
    let mut args = SLOW_SUPPLIER.to_vec();
    args.extend(["--max-in-flight", "4"]);
    let summary = PIX_DEMO.run("in-flight-capped", &args);
    // Direct has no limiter, so no cap: refused as without one.
    assert_direct_is_refused_for_concurrency(&summary);

    let bucket = phase(&summary, "bucket");
    assert_the_supplier_counts(bucket);
    // A slot is taken with the token and given back only once the answer is read, after the
    // supplier counted the call out: it never sees a fifth.
    assert_eq!(int(&bucket["refused_for_concurrency"]), 0, "{bucket}");
    assert_eq!(
        (
            int(&bucket["served"]),
            int(&bucket["unserved"]),
            int(&bucket["errors"])
        ),
        (20, 0, 0),
        "{bucket}"
    );
    let open = &bucket["open_calls"];
    assert_eq!(int(&open["max_in_flight"]), LIMIT, "{open}");
    // 8 tokens at once, 4 slots, each held 400 ms at least: the other 4 of the burst waited
    // for a slot (and more behind them), unless the machine started them 400 ms late.
    assert!(int(&open["slot_waits"]) >= 1, "{open}");
    // Leases of 10 s, renewed every 3.3 s, on calls under a second: none ran out.
    assert_eq!(int(&open["leases_lost"]), 0, "{open}");

    let chart =
        std::fs::read_to_string(PIX_DEMO.chart_path("in-flight-capped")).expect("the chart");
    assert!(
        chart.contains("calls open at the supplier at once")
            && chart.contains("fleet's cap: 4")
            && chart.contains("slow spell"),
        "no panel of calls open on the chart"
    );
}

#[test]
fn a_slow_spell_that_ends_before_it_starts_is_refused_before_anything_starts() {
    let _turn = turn();
    let output = PIX_DEMO.output_within(
        PIX_DEMO.command(
            "in-flight-bad-spell",
            &["--slow-from", "2", "--slow-until", "1"],
        ),
        Duration::from_secs(30),
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--slow-until 1 must be after --slow-from 2"),
        "{stderr}"
    );
    assert!(!stderr.contains("Redis:"), "nothing started: {stderr}");
}
