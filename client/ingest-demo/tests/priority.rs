//! Phase 4 against real processes, at a smaller scale (6 000 records: about 2 s of each run
//! past the bucket's burst, 110 interactive queries): a private Redis with the module
//! (built: `cargo build -p redis-throttle-module`), the mock database and 3 backlog workers,
//! through the `ingest-demo` binary and its `--json` summary. The bulk load drains the
//! backlog beside 50 queries/s on one bucket, without priority, then with a floor.
//!
//! The server decides the counts, so they are exact: nothing refused, every record stored
//! exactly once, and, with the floor, no query made to wait for tokens unless a burst of
//! them outran the refill. The machine decides the round trips, so the queries' waits are
//! bounded by the round trips measured in the same run.

use std::time::Duration;

#[path = "../../demo-support/tests/scenario_tests/mod.rs"]
#[macro_use]
mod scenario_tests;

use scenario_tests::{int, secs, turn, Demo};
use serde_json::Value;

const INGEST_DEMO: Demo = demo_binary!("ingest-demo", Duration::from_secs(180));

const RECORDS: u64 = 6_000;
const RU: u64 = 10;
/// The database's rate, and the shared bucket's burst (the database's less the default
/// margin of 200 RU).
const RATE_RU: u64 = 20_000;
const BUCKET_RU: u64 = 19_800;
/// The demo's default floor.
const FLOOR_RU: u64 = 100;
/// The target: the queries' p99 wait at most this much over a round trip.
const OVER_ROUND_TRIP_MS: f64 = 2.0;

#[test]
fn with_a_floor_the_queries_do_not_wait_behind_the_bulk_load() {
    let _turn = turn();
    let summary = INGEST_DEMO.run(
        "priority",
        &["--phase", "4", "--records", &RECORDS.to_string()],
    );
    let phase = &summary["priority"];
    assert!(summary["backlog"].is_null() && summary["retry"].is_null());
    assert_eq!(int(&phase["bucket_capacity_ru"]), BUCKET_RU);
    let runs = phase["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{phase}");
    let (shared, floored) = (&runs[0], &runs[1]);
    assert!(shared["floor_ru"].is_null(), "{shared}");
    assert_eq!(int(&floored["floor_ru"]), FLOOR_RU);
    for run in runs {
        assert_exact_counts(run);
    }
    assert_floor_serves_queries_at_once(floored);
    assert_shared_bucket_makes_queries_wait(shared, floored);

    let chart = std::fs::read_to_string(INGEST_DEMO.chart_path("priority")).expect("the chart");
    assert!(chart.contains("phase 4, no priority") && chart.contains("phase 4, floor 100 RU"));
    assert!(chart.contains("query wait, ms") && chart.contains("query answered (200)"));
}

/// Both runs: the database refused nothing (neither a write nor a query), every record was
/// stored exactly once, every query answered; and the bulk load could not have finished
/// before the bucket's burst and full rate allow.
#[track_caller]
fn assert_exact_counts(run: &Value) {
    let (bulk, queries) = (&run["bulk"], &run["interactive"]);
    assert_eq!(int(&bulk["records"]), RECORDS);
    assert_eq!(
        (int(&bulk["refused"]), int(&queries["refused"])),
        (0, 0),
        "{run}"
    );
    assert_eq!(int(&bulk["stored"]), RECORDS, "{run}");
    assert_eq!(
        (
            int(&bulk["duplicates"]),
            int(&bulk["lost"]),
            int(&bulk["unexpected"]),
            int(&bulk["errors"])
        ),
        (0, 0, 0, 0),
        "{run}"
    );
    assert_eq!(bulk["stored_once"], true, "{run}");
    assert_eq!(int(&bulk["sent"]), RECORDS, "{run}");
    assert_eq!(int(&queries["answered"]), int(&queries["queries"]), "{run}");
    // 50 a second for about 2 s, whatever the machine: at least a second's worth.
    assert!(int(&queries["queries"]) >= 50, "{run}");
    // The whole bucket at once, then the whole rate, queries or not (1 ms: the server's
    // clock in whole ms on Redis 7.0, 1 ms: the clocks meet through the wall clock).
    let soonest = (RECORDS * RU - BUCKET_RU) as f64 / RATE_RU as f64;
    assert!(secs(&bulk["finish_s"]) >= soonest - 0.002, "{run}");
    assert!(secs(&bulk["round_trips_per_record"]) >= 1.0, "{run}");
}

/// With the floor, the server made no query sleep but those a burst put beyond the floor
/// (by when they were issued: 0 unless the demo's process was kept off the CPU for 200 ms,
/// ten queries' worth). So a query's wait is its round trip, which the machine decides.
///
/// Its p99 is bounded by the longest round trip the probe measured in the same run (three
/// probes a query, interleaved with them, on the same connection), plus the target's 2 ms.
/// Not by the probe's own p99, as the demo's table puts the target: on a busy 2-core machine
/// both tails are the two or three samples a scheduler stall caught, and two such handfuls
/// of one distribution differ by more than 2 ms (seen beside two CPU burners: a p99 wait of
/// 12.2 ms against a probe p99 of 9.1 ms, 2 runs in 14). The longest probe is the worst the
/// machine did to a round trip in that run; in those 14 runs the closest call was a p99
/// wait of 2.7 ms against a longest probe of 4.0 ms.
#[track_caller]
fn assert_floor_serves_queries_at_once(floored: &Value) {
    let queries = &floored["interactive"];
    let beyond = int(&queries["beyond_floor"]);
    assert!(int(&queries["slept"]) <= beyond, "{floored}");
    if beyond > 0 {
        eprintln!("a burst of queries outran the floor ({beyond}): their waits include a sleep");
        return;
    }
    assert_eq!(int(&queries["extra_round_trips"]), 0, "{floored}");
    let (p99, longest) = (
        secs(&queries["wait_p99_ms"]),
        secs(&queries["round_trip_max_ms"]),
    );
    assert!(
        p99 <= longest + OVER_ROUND_TRIP_MS,
        "p99 wait {p99} ms with the floor: more than the longest round trip measured \
         ({longest} ms) + {OVER_ROUND_TRIP_MS} ms: {floored}"
    );
    assert!(int(&queries["round_trip_samples"]) >= 2 * int(&queries["queries"]));
}

/// Without the floor, the bulk load's reservations keep the bucket in debt and the server
/// makes many queries sleep behind them: a count the server decides, so it is asserted (a
/// tenth at least: 22% to 75% seen in release builds, the least beside two CPU burners) —
/// but only when the bulk load kept up with the rate (finished within 5% of its ideal). A
/// bulk load slower than the rate (a debug build on 2 cores is, by 60-80%) never reserves
/// ahead, so there is no debt to queue behind. Their p99 waits depend on the machine's tails
/// as much as on the debt, so those are only shown.
#[track_caller]
fn assert_shared_bucket_makes_queries_wait(shared: &Value, floored: &Value) {
    let (s, f) = (&shared["interactive"], &floored["interactive"]);
    let (slept, queries) = (int(&s["slept"]), int(&s["queries"]));
    eprintln!(
        "queries' wait p50/p99: {:.3}/{:.3} ms without priority ({slept} of {queries} slept), \
         {:.3}/{:.3} ms with the floor ({} slept)",
        secs(&s["wait_p50_ms"]),
        secs(&s["wait_p99_ms"]),
        secs(&f["wait_p50_ms"]),
        secs(&f["wait_p99_ms"]),
        int(&f["slept"])
    );
    let late = secs(&shared["bulk"]["late"]);
    if late > 0.05 {
        eprintln!(
            "not asserted that the queries waited without the floor: the bulk load finished \
             {:.0}% after its ideal, slower than the rate, so it never put the bucket in debt",
            late * 100.0
        );
        return;
    }
    assert!(
        slept * 10 >= queries,
        "without the floor only {slept} of {queries} queries waited for tokens: {shared}"
    );
}
