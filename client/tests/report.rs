//! The fleet's counters in Redis ([`FleetReport`]) on a real server: two processes' limiters
//! of one quota each write their report under a key of their own, with the counts the limiter
//! holds and those of the last period; the key's TTL is three periods, so a process that stops
//! drops out by itself; a partitioned limiter reports under its quota's name.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test report -- --nocapture
//! ```
//!
//! What the limiter counted is exact; when a report lands is the machine's (the task writes
//! once a period): waited for, bounded.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::AsyncCommands;
use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::report::{report_key, Counter, FleetReport, Report, REPORT_PATTERN};
use redis_throttle::{Limiter, Quota};
use throttle_e2e::multiplexed;
use throttle_testkit::{Flavor, Server};
use tokio::time::Instant;

const PERIOD: Duration = Duration::from_millis(500);
/// Bound on every wait for a report to land or go.
const BOUND: Duration = Duration::from_secs(10);

/// Waits, bounded, until `key` holds a report that `done` accepts; returns it.
async fn report_until(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    done: impl Fn(&Report) -> bool,
) -> Report {
    let start = Instant::now();
    loop {
        let line: Option<String> = con.get(key).await.unwrap();
        if let Some(report) = line.as_deref().and_then(Report::parse) {
            if done(&report) {
                return report;
            }
        }
        assert!(
            start.elapsed() < BOUND,
            "{key}: no such report within {BOUND:?}: {line:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_process_reports_its_counts_and_drops_out_when_it_stops() {
    let server = Server::builder(Flavor::Redis82).start();
    let url = server.url();
    let mut con = multiplexed(&url).await;
    let quota = Quota::new(100, 100u64).unwrap();
    let (fleet_a, fleet_b) = (
        FleetReport::every(multiplexed(&url).await, PERIOD).unwrap(),
        FleetReport::every(multiplexed(&url).await, PERIOD).unwrap(),
    );
    assert_ne!(fleet_a.process(), fleet_b.process());
    let a = Limiter::builder("quota:reported", quota.clone())
        .report(&fleet_a)
        .build(multiplexed(&url).await)
        .unwrap();
    let b = Limiter::builder("quota:reported", quota)
        .report(&fleet_b)
        .build(multiplexed(&url).await)
        .unwrap();
    for _ in 0..5 {
        a.acquire().await.unwrap();
    }
    b.acquire().await.unwrap();

    let key_a = report_key("quota:reported", fleet_a.process());
    let key_b = report_key("quota:reported", fleet_b.process());
    let report = report_until(&mut con, &key_a, |r| r.total.get(Counter::Granted) == 5).await;
    assert_eq!(report.key, "quota:reported");
    assert_eq!(report.process, fleet_a.process());
    assert_eq!(report.period_ms, 500);
    assert_eq!(
        (report.capacity, report.rate.as_str()),
        (100, "100"),
        "the limiter's quota"
    );
    assert_eq!(report.total.get(Counter::RoundTrips), 5);
    assert_eq!(report.total.waits.count(), 5);
    let other = report_until(&mut con, &key_b, |r| r.total.get(Counter::Granted) == 1).await;
    assert_eq!(other.key, report.key, "one quota, two processes");
    // A period later the grants are behind: the period's own counts are 0, the totals stay.
    let quiet = report_until(&mut con, &key_a, |r| r.period.get(Counter::Granted) == 0).await;
    assert_eq!(quiet.total.get(Counter::Granted), 5);
    // The next grant is in the one period's count (the report of that period lives a whole
    // period: a look every 20 ms sees it unless the machine stalls this task that long).
    a.acquire().await.unwrap();
    let busy = report_until(&mut con, &key_a, |r| r.total.get(Counter::Granted) == 6).await;
    assert_eq!(
        busy.period.get(Counter::Granted),
        1,
        "the last period's own grant: {busy:?}"
    );

    // Found by the pattern, kept three periods.
    let mut keys: Vec<String> = con.keys(REPORT_PATTERN).await.unwrap();
    keys.sort();
    let mut expected = vec![key_a.clone(), key_b.clone()];
    expected.sort();
    assert_eq!(keys, expected);
    let ttl: i64 = con.pttl(&key_a).await.unwrap();
    assert!(
        (1..=1500).contains(&ttl),
        "a report lives three periods: {ttl} ms"
    );
    let bytes: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key_a)
        .query_async(&mut con)
        .await
        .unwrap();
    let line: String = con.get(&key_a).await.unwrap();
    println!(
        "a report: {} bytes of line, {} bytes in memory: {line}",
        line.len(),
        bytes.unwrap_or(0)
    );
    assert!(
        fleet_a.writes() >= 3 && fleet_a.failures() == 0,
        "{fleet_a:?}"
    );

    // Process A stops: its report goes within three periods; B's stays.
    drop(a);
    drop(fleet_a);
    let gone = Instant::now();
    loop {
        let exists: bool = con.exists(&key_a).await.unwrap();
        if !exists {
            break;
        }
        assert!(gone.elapsed() < BOUND, "A's report outlived it");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let exists: bool = con.exists(&key_b).await.unwrap();
    assert!(exists, "B still reports");
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_limiter_reports_under_its_quota_name() {
    let server = Server::builder(Flavor::Redis82).module(false).start();
    let url = server.url();
    let mut con = multiplexed(&url).await;
    let fleet = FleetReport::every(multiplexed(&url).await, PERIOD).unwrap();
    let quota = PartitionedQuota::builder("parts", Quota::new(8, 20u64).unwrap())
        .partitions(4)
        .lease(Duration::from_secs(2))
        .build()
        .unwrap();
    let limiter = PartitionedLimiter::builder(quota)
        .report(&fleet)
        .build(multiplexed(&url).await)
        .unwrap();
    tokio::time::timeout(BOUND, limiter.acquire())
        .await
        .unwrap()
        .unwrap();
    let report = report_until(&mut con, &report_key("parts", fleet.process()), |r| {
        r.total.get(Counter::Granted) == 1
    })
    .await;
    assert_eq!(report.key, "parts");
    assert_eq!(
        (report.capacity, report.rate.as_str()),
        (8, "20"),
        "the whole quota's"
    );
    assert!(
        report.total.get(Counter::RoundTrips) >= 1,
        "its lease requests: {report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_limiter_reports_its_calls_in_flight() {
    let server = Server::builder(Flavor::Redis82).start();
    let url = server.url();
    let mut con = multiplexed(&url).await;
    let fleet = FleetReport::every(multiplexed(&url).await, PERIOD).unwrap();
    let limiter = Limiter::builder("quota:capped", Quota::new(100, 100u64).unwrap())
        .max_in_flight(2)
        .report(&fleet)
        .build(multiplexed(&url).await)
        .unwrap();
    let held = [
        limiter.acquire().await.unwrap(),
        limiter.acquire().await.unwrap(),
    ];
    let waiting = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.acquire().await })
    };
    let key = report_key("quota:capped", fleet.process());
    let report = report_until(&mut con, &key, |r| r.total.get(Counter::SlotWaits) == 1).await;
    assert_eq!(report.in_flight, 2, "{report:?}");
    drop(held);
    let third = waiting.await.unwrap().unwrap();
    let report = report_until(&mut con, &key, |r| r.in_flight == 1).await;
    assert_eq!(report.total.get(Counter::Granted), 3);
    assert_eq!(report.total.get(Counter::LeasesLost), 0);
    drop(third);
}
