//! A fleet on one bucket (capacity 8, 9 per second), against a real server: 40 calls from
//! two connections, and from two OS processes. Every call is granted, the grants never run
//! ahead of the bucket, and a reservation costs exactly one THROTTLE.TAKE.
//!
//! Timing on a shared machine: the bucket's bound is checked strictly (a grant is never
//! early), lateness only loosely.

use redis_throttle::prelude::*;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionLike;
use redis_throttle::{Announcements, Grant, Limiter, Quota, Strategy};
use throttle_e2e::{calls, manager, multiplexed};
use throttle_testkit::{Flavor, Server};
use tokio::task::JoinHandle;
use tokio::time::Instant;

const CAPACITY: u64 = 8;
const RATE: u64 = 9;
const TASKS: usize = 20;
const KEY: &str = "fleet:bucket";
/// Ideal time for the last of 40 grants: (40 - 8) / 9 s = 3.6 s. Lateness is allowed up to
/// this bound only, for a loaded machine.
const LOOSE_BOUND: Duration = Duration::from_secs(30);

fn quota() -> Quota {
    Quota::new(CAPACITY, RATE).unwrap()
}

/// Checks that grants at these offsets from the moment the bucket was full (and nothing had
/// been taken) never exceed the bucket: the k-th grant (from 1) at time t needs
/// `k <= capacity + rate * t`. Returns the smallest margin (how much later than the earliest
/// allowed instant a grant came), for the test's output.
fn assert_within_bucket(grants: &[Duration], capacity: u64, rate_per_s: u64) -> Duration {
    let mut sorted = grants.to_vec();
    sorted.sort();
    let mut least = Duration::MAX;
    for (index, at) in sorted.iter().enumerate() {
        let k = index as u64 + 1;
        // The earliest instant the k-th token can be there.
        let earliest =
            Duration::from_secs_f64(k.saturating_sub(capacity) as f64 / rate_per_s as f64);
        let earliest_ns =
            (k.saturating_sub(capacity) as u128 * 1_000_000_000).div_ceil(rate_per_s as u128);
        assert!(
            at.as_nanos() >= earliest_ns,
            "grant {k} came at {at:?}, before the bucket allows ({earliest:?}); all grants: {sorted:?}"
        );
        least = least.min(*at - Duration::from_nanos(earliest_ns as u64));
    }
    least
}

fn spawn_tasks<C>(limiter: &Limiter<C>, start: Instant) -> Vec<JoinHandle<(Duration, Grant)>>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    (0..TASKS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let grant = limiter.acquire().await.expect("acquire");
                (start.elapsed(), grant)
            })
        })
        .collect()
}

/// 20 tasks on a ConnectionManager and 20 on a plain MultiplexedConnection: two
/// independent connections, each with a subscription of its own to the pause announcements
/// when `listen` (two processes). Returns the grant offsets and the round trips, THROTTLE.TAKE
/// and THROTTLE.PEEK.
async fn two_connections(strategy: Strategy, listen: bool) -> (Vec<Duration>, u64) {
    let server = Server::start(Flavor::Redis82);
    let url = server.url();
    let mut a = Limiter::builder(KEY, quota()).strategy(strategy);
    let mut b = Limiter::builder(KEY, quota()).strategy(strategy);
    let mut subscriptions = Vec::new();
    if listen {
        for _ in 0..2 {
            let client = redis::Client::open(url.as_str()).unwrap();
            subscriptions.push(Announcements::new(client).unwrap());
        }
        a = a.listen(&subscriptions[0]);
        b = b.listen(&subscriptions[1]);
    }
    let a = a.build(manager(&url).await).unwrap();
    let b = b.build(multiplexed(&url).await).unwrap();
    for subscription in &subscriptions {
        assert!(
            subscription.ready(Duration::from_secs(10)).await,
            "subscribed"
        );
    }
    let takes_before = calls(&mut server.conn(), "throttle.take");
    let peeks_before = calls(&mut server.conn(), "throttle.peek");

    let start = Instant::now();
    let mut tasks = spawn_tasks(&a, start);
    tasks.extend(spawn_tasks(&b, start));
    let joined = tokio::time::timeout(LOOSE_BOUND, async {
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.expect("task"));
        }
        results
    })
    .await
    .expect("40 grants within the loose bound");

    let offsets: Vec<Duration> = joined.iter().map(|(offset, _)| *offset).collect();
    let round_trips: u32 = joined.iter().map(|(_, grant)| grant.round_trips).sum();
    // Each grant's round trips: its take, and its look before sending when it slept.
    let takes = calls(&mut server.conn(), "throttle.take") - takes_before;
    let peeks = calls(&mut server.conn(), "throttle.peek") - peeks_before;
    let slept = joined.iter().filter(|(_, g)| !g.slept.is_zero()).count() as u64;
    assert_eq!(joined.len(), 2 * TASKS);
    assert_eq!(
        u64::from(round_trips),
        takes + peeks,
        "the server counts what the grants report"
    );
    let checks = a.metrics().pushback.pause_checks + b.metrics().pushback.pause_checks;
    assert_eq!(
        peeks, checks,
        "the server counts the checks the limiters report"
    );
    if strategy == Strategy::Reserve {
        assert_eq!(
            takes, 40,
            "with reservations each grant costs one THROTTLE.TAKE"
        );
    }
    if strategy == Strategy::Reserve && !listen {
        assert_eq!(peeks, slept, "one look before sending per grant that slept");
    }
    let calls = takes;
    for limiter_metrics in [a.metrics(), b.metrics()] {
        assert_eq!(limiter_metrics.granted, TASKS as u64);
        assert_eq!(limiter_metrics.gave_up + limiter_metrics.errors, 0);
    }
    let margin = assert_within_bucket(&offsets, CAPACITY, RATE);
    let last = offsets.iter().max().unwrap();
    let listening = if listen { "listening" } else { "asking" };
    println!(
        "{strategy:?}, {listening}: 40 grants, {calls} THROTTLE.TAKE and {peeks} THROTTLE.PEEK calls \
         ({} round trips per grant), {slept} slept, last grant at {last:?} (ideal 3.556 s), \
         smallest margin to the bucket {margin:?}",
        (calls + peeks) as f64 / 40.0
    );
    (offsets, calls + peeks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_reserve_one_take_per_grant_and_a_look_per_sleep() {
    let (offsets, round_trips) = two_connections(Strategy::Reserve, false).await;
    assert_eq!(offsets.len(), 40);
    // Exactly one THROTTLE.TAKE per grant is checked inside; a look per grant that slept.
    assert!(round_trips > 40, "{round_trips}");
}

/// Listening instead of asking: one round trip per grant again. A look is made only when a
/// call cannot count on the subscription (it answered no ping for 1.5 s on a stalled
/// machine): at most two of them, the target of 42 round trips for 40 grants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_reserve_listening_one_round_trip_per_grant() {
    let (offsets, round_trips) = two_connections(Strategy::Reserve, true).await;
    assert_eq!(offsets.len(), 40);
    assert!(round_trips <= 42, "{round_trips} round trips for 40 grants");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_poll() {
    let (offsets, calls) = two_connections(Strategy::poll(), false).await;
    assert_eq!(offsets.len(), 40);
    assert!(calls >= 40, "{calls}");
    println!("Poll: THROTTLE.TAKE calls for 40 grants = {calls}");
}

// --- Two OS processes ------------------------------------------------------------------

/// Set in a child process: the server URL. The child then runs [`worker_process`] for real.
const WORKER_URL: &str = "THROTTLE_FLEET_WORKER_URL";
/// Set in a child process: when to start, in ms since the Unix epoch, so both overlap.
const WORKER_GO_AT: &str = "THROTTLE_FLEET_WORKER_GO_AT_MS";
/// Longest a child may run.
const WORKER_TIMEOUT: Duration = Duration::from_secs(60);

fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64
}

/// In a child process (the parent sets the env vars): 20 tasks acquire once each, then
/// print `START <us>` (just before the first request) and `GRANT <us> <round trips>` per
/// grant, times in µs since the Unix epoch. Without the env vars, as a normal test, it
/// does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_process() {
    let Ok(url) = std::env::var(WORKER_URL) else {
        return;
    };
    let go_at_ms: u64 = std::env::var(WORKER_GO_AT).unwrap().parse().unwrap();
    // The reservations alone, one round trip each: the look before sending is tested in
    // pushback.rs and paused.rs.
    let limiter = Limiter::builder(KEY, quota())
        .pause_check(false)
        .build(manager(&url).await)
        .unwrap();
    let wait_us = (go_at_ms * 1000).saturating_sub(epoch_us());
    tokio::time::sleep(Duration::from_micros(wait_us).min(Duration::from_secs(10))).await;

    let start_us = epoch_us();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let grant = limiter.acquire().await.expect("acquire");
                (epoch_us(), grant.round_trips)
            })
        })
        .collect();
    let mut lines = vec![format!("START {start_us}")];
    for task in tasks {
        let (at, round_trips) = task.await.unwrap();
        lines.push(format!("GRANT {at} {round_trips}"));
    }
    // libtest has printed "test worker_process ... " without a newline.
    println!("\n{}", lines.join("\n"));
}

#[test]
fn two_processes_reserve_one_take_per_grant() {
    let server = Server::start(Flavor::Redis82);
    let before = calls(&mut server.conn(), "throttle.take");
    let exe = std::env::current_exe().expect("the test binary");
    let go_at_ms = epoch_us() / 1000 + 1500;

    let mut children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "worker_process",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WORKER_URL, server.url())
                .env(WORKER_GO_AT, go_at_ms.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a worker process")
        })
        .collect();

    let deadline = std::time::Instant::now() + WORKER_TIMEOUT;
    let mut starts = Vec::new();
    let mut grants = Vec::new();
    for child in &mut children {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("a worker process ran longer than {WORKER_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        let mut stderr = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(
            status.success(),
            "worker failed ({status}):\n{stdout}\n{stderr}"
        );
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["START", us] => starts.push(us.parse::<u64>().unwrap()),
                ["GRANT", us, round_trips] => {
                    assert_eq!(*round_trips, "1", "a reservation is one round trip");
                    grants.push(us.parse::<u64>().unwrap());
                }
                _ => {}
            }
        }
    }
    assert_eq!(starts.len(), 2, "both workers report their start");
    assert_eq!(grants.len(), 2 * TASKS, "all 40 granted");

    // The bucket was full before the first request of either process.
    let start = *starts.iter().min().unwrap();
    let offsets: Vec<Duration> = grants
        .iter()
        .map(|us| Duration::from_micros(us.checked_sub(start).expect("a grant before the start")))
        .collect();
    let margin = assert_within_bucket(&offsets, CAPACITY, RATE);
    let calls = calls(&mut server.conn(), "throttle.take") - before;
    println!(
        "two processes: 40 grants, {calls} THROTTLE.TAKE calls, last at {:?}, smallest margin {margin:?}, \
         starts {} µs apart",
        offsets.iter().max().unwrap(),
        starts.iter().max().unwrap() - start
    );
    assert_eq!(calls, 40, "each grant costs exactly one THROTTLE.TAKE");
    assert!(*offsets.iter().max().unwrap() < LOOSE_BOUND);
}
