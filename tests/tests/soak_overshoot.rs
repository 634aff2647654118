//! Overshoot soak: 4 OS processes x 16 tasks acquire (the client's `Strategy::Reserve`) on ONE
//! key for 5 s (30 s with `THROTTLE_LONG=1`). Every grant's instant is logged, and in every
//! window `[t0, t1]` the grants never exceed `capacity + rate * (t1 - t0)` plus a tolerance
//! derived below from the lateness measured in the run itself.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p throttle-e2e --test soak_overshoot -- --nocapture                   # 5 s, Redis 8.2
//! THROTTLE_LONG=1 cargo test -p throttle-e2e --test soak_overshoot -- --nocapture   # 30 s, all four servers
//! THROTTLE_SOAK_FLAVOR=valkey-9.1 cargo test -p throttle-e2e --test soak_overshoot  # one chosen server
//! ```
//!
//! The workers are this test binary run again as child processes (with an environment variable
//! that makes [`soak_worker`] do the work), bounded by a timeout and killed if the test drops
//! them. All processes share the machine's clock, so every instant is `SystemTime` in ns since
//! the Unix epoch; the server reads the same clock (`gettimeofday`).
//!
//! # Why the bound holds, and the tolerance
//!
//! Call `u` a grant's *usable instant* by the server's clock: the server's reading at the call
//! plus the exact (unrounded) time until the token is there. The bucket is a GCRA: each grant
//! moves the "full again" instant `TAT` one interval `T >= 1/rate` later, and a grant is usable
//! at `max(now, TAT' - capacity * T)`. For grants `i` before `j` in the server's order,
//! `u_j >= TAT'_j - capacity*T >= TAT'_i + (j-i)T - capacity*T >= u_i + (j-i+1-capacity)T`,
//! so **usable instants obey the bound exactly**: in any window, at most
//! `capacity + rate * (t1 - t0)` of them.
//!
//! What a worker logs is `c`, the instant `acquire()` returned, i.e. when it may act:
//! - `c >= u` always: the reply arrives after the server's reading, and the client then sleeps
//!   `wait_ms`, which the server rounded **up**. So a grant is never early, and from the
//!   moment the bucket was full (a fresh key, before any process's first request, `T0`) the
//!   k-th grant satisfies `k <= capacity + rate * (c_k - T0 + g)` with no tolerance at all
//!   (`g`: how far the server's reading can lag the true time: 1 ms on Redis 7.0, whose clock
//!   is in whole ms; 1 µs where the server reads cached µs).
//! - `c` can be late, and a late grant followed by an on-time one bunches them: a window of
//!   client instants `[c_a, c_b]` holds grants whose `u` lie in `[c_a - L, c_b]`, where `L` is
//!   the largest `c - u`. So the bound for client instants is
//!   `capacity + rate * (c_b - c_a) + rate * L`.
//! - `c - u` is not observable directly, but is bounded by what is: with `start` the client's
//!   instant just before sending and `slept` the `wait_ms` it slept,
//!   `c - u = (c - start - slept) + (start - reading) + (slept - exact wait)
//!          <= lateness + g + 1 ms`,
//!   since `start` precedes the server's true time of the call (which its reading trails by
//!   less than `g`) and the rounding up of `wait_ms` adds less than 1 ms. `lateness =
//!   c - start - slept` is measured for every grant (round trip + timer granularity +
//!   scheduling delay on a loaded box).
//!
//! Hence **tolerance = rate * (max lateness + 1 ms + g)** tokens, computed from the run and
//! printed with it. All of this is integer arithmetic in ns.

use redis_throttle::prelude::*;
use std::io::Write;
use std::time::Duration;

use redis_throttle::redis::aio::ConnectionManagerConfig;
use redis_throttle::{Backend, Limiter, Quota, Strategy};
use throttle_e2e::wall::{now_ns, sleep_until};
use throttle_e2e::{check_windows, clock_lag_ns, long_mode, manager_with, worker_number, Sample};
use throttle_testkit::{ChildTest, Flavor, Server};

const KEY: &str = "soak:overshoot";
/// A burst of 20, 200 per second: about 1 000 grants in the short run, 6 000 in the long
/// one, at 200 commands per second that a loaded 2-core box sustains easily. 64 tasks keep
/// 64 reservations outstanding (320 ms of debt), so the bucket is always the bottleneck.
const CAPACITY: u64 = 20;
const RATE: u64 = 200;
const PROCESSES: usize = 4;
const TASKS: usize = 16;
const SHORT_RUN: Duration = Duration::from_secs(5);
const LONG_RUN: Duration = Duration::from_secs(30);
/// The workers start together this long after they are spawned.
const GO_DELAY: Duration = Duration::from_millis(1500);
/// How long a worker may take beyond the run: the last reservations (at most 64 tokens of
/// debt, 320 ms) and a slow shutdown.
const GRACE: Duration = Duration::from_secs(30);
/// Below this the soak did not load the bucket enough to mean anything.
const MIN_UTILISATION: f64 = 0.8;

/// Set in a worker process: the server URL. Unset, [`soak_worker`] does nothing.
const WORKER_URL: &str = "THROTTLE_SOAK_WORKER_URL";
/// Set in a worker process: when to start and when to stop asking, ns since the epoch.
const WORKER_GO_AT: &str = "THROTTLE_SOAK_WORKER_GO_AT_NS";
const WORKER_END_AT: &str = "THROTTLE_SOAK_WORKER_END_AT_NS";

fn quota() -> Quota {
    Quota::new(CAPACITY, RATE).expect("a valid quota")
}

// --- The worker process ----------------------------------------------------------------

/// In a worker process (the parent sets the env vars): 16 tasks acquire one token at a time
/// until the end instant, then print `SOAK-START <ns>` (before the first request),
/// `SOAK-GRANT <start> <done> <slept>` per grant (ns; `start` just before the call,
/// `done` when it returned, `slept` the wait the server asked for) and the limiter's
/// counters. Without the env vars, as a normal test, it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_worker() {
    let Ok(url) = std::env::var(WORKER_URL) else {
        return;
    };
    let go_at: i128 = worker_number(WORKER_GO_AT);
    let end_at: i128 = worker_number(WORKER_END_AT);
    // Never outlive the parent's bound, even if the parent is gone.
    let bound = Duration::from_nanos((end_at - now_ns()).max(0) as u64) + GRACE;
    tokio::time::timeout(bound, work(&url, go_at, end_at))
        .await
        .expect("the worker ran past its bound");
}

async fn work(url: &str, go_at: i128, end_at: i128) {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    let conn = manager_with(url, config).await;
    let limiter = Limiter::builder(KEY, quota())
        .strategy(Strategy::Reserve)
        .name(format!("soak-{}", std::process::id()))
        .build(conn)
        .expect("a limiter");

    sleep_until(go_at).await;
    let first = now_ns();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut grants = Vec::new();
                loop {
                    let start = now_ns();
                    if start >= end_at {
                        break grants;
                    }
                    let grant = limiter.acquire().await.expect("acquire");
                    let done = now_ns();
                    assert_eq!(
                        grant.round_trips,
                        1 + u32::from(!grant.slept.is_zero()),
                        "a reservation is one round trip"
                    );
                    grants.push((start, done, grant.slept.as_nanos()));
                }
            })
        })
        .collect();
    let mut grants = Vec::new();
    for task in tasks {
        grants.extend(task.await.expect("a task"));
    }

    let metrics = limiter.metrics();
    let mut out = String::from("\nSOAK-BEGIN\n");
    out.push_str(&format!("SOAK-START {first}\n"));
    for (start, done, slept) in &grants {
        out.push_str(&format!("SOAK-GRANT {start} {done} {slept}\n"));
    }
    out.push_str(&format!(
        "SOAK-METRICS granted={} errors={} gave_up={} round_trips={}\nSOAK-END\n",
        metrics.granted, metrics.errors, metrics.gave_up, metrics.round_trips
    ));
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes()).expect("write stdout");
    stdout.flush().expect("flush stdout");
}

// --- The parent ------------------------------------------------------------------------

fn soak(flavor: Flavor, run: Duration) {
    let server = Server::start(flavor);
    let url = server.url();
    let go_at = now_ns() + GO_DELAY.as_nanos() as i128;
    let end_at = go_at + run.as_nanos() as i128;
    let env = [
        (WORKER_URL, url.clone()),
        (WORKER_GO_AT, go_at.to_string()),
        (WORKER_END_AT, end_at.to_string()),
    ];
    let mut workers: Vec<ChildTest> = (0..PROCESSES)
        .map(|_| ChildTest::spawn("soak_worker", &env))
        .collect();

    let deadline = std::time::Instant::now() + GO_DELAY + run + GRACE;
    let mut starts = Vec::new();
    let mut samples = Vec::new();
    let mut per_process = Vec::new();
    for (n, worker) in workers.iter_mut().enumerate() {
        let stdout = worker.finish_ok(deadline);
        assert!(
            stdout.contains("SOAK-END"),
            "worker {n} printed no report\n{stdout}"
        );
        let mut grants = 0;
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let number = |text: &str| -> i128 { text.parse().expect("a number") };
            match words.as_slice() {
                ["SOAK-START", at] => starts.push(number(at)),
                ["SOAK-GRANT", start, done, slept] => {
                    grants += 1;
                    samples.push(Sample {
                        start: number(start),
                        done: number(done),
                        slept: number(slept),
                    });
                }
                ["SOAK-METRICS", fields @ ..] => {
                    assert!(
                        fields.contains(&"errors=0") && fields.contains(&"gave_up=0"),
                        "worker {n}: {line}"
                    );
                    assert!(
                        fields.contains(&format!("granted={grants}").as_str()),
                        "worker {n} logged {grants} grants: {line}"
                    );
                }
                _ => {}
            }
        }
        per_process.push(grants);
    }
    drop(workers);
    assert_eq!(starts.len(), PROCESSES, "every worker reports its start");

    // The key was fresh (a full bucket) before the first request of any process.
    let t0 = *starts.iter().min().unwrap();
    let g = clock_lag_ns(flavor, Backend::Module);
    let f = check_windows(&samples, t0, g, CAPACITY, RATE);
    eprintln!(
        "overshoot soak on {flavor}: {PROCESSES} processes x {TASKS} tasks, capacity \
         {CAPACITY}, {RATE}/s, {:.3} s from the first request to the last grant\n  \
         grants {} (per process {per_process:?}); utilisation {:.4} = grants / (capacity + \
         rate * duration)\n  worst window {:+.3} tokens over capacity + rate * (t1 - t0): \
         {} grants in [{:.3}, {:.3}] ms\n  lateness (return - start - wait asked): median \
         {:.3} ms, p99 {:.3} ms, max {:.3} ms\n  tolerance rate * (max lateness + 1 ms + \
         {:.3} ms) = {:.3} tokens; smallest margin from the full bucket {:.3} tokens (strict, \
         no tolerance)",
        f.duration as f64 / 1e9,
        f.grants,
        f.utilisation,
        f.worst_window,
        f.worst_at.2,
        f.worst_at.0 as f64 / 1e6,
        f.worst_at.1 as f64 / 1e6,
        f.median_lateness as f64 / 1e6,
        f.p99_lateness as f64 / 1e6,
        f.max_lateness as f64 / 1e6,
        g as f64 / 1e6,
        f.tolerance,
        f.cumulative_margin,
    );
    assert!(
        f.utilisation >= MIN_UTILISATION,
        "utilisation {:.3}: the soak did not keep the bucket busy",
        f.utilisation
    );
    assert!(
        per_process.iter().all(|&n| n > 0),
        "every process got grants: {per_process:?}"
    );
}

/// The flavors to soak: `THROTTLE_SOAK_FLAVOR` (a name such as `valkey-9.1`, or `all`);
/// otherwise all four in long mode and Redis 8.2 in the short one.
fn flavors() -> Vec<Flavor> {
    match std::env::var("THROTTLE_SOAK_FLAVOR") {
        Ok(name) if name == "all" => Flavor::ALL.to_vec(),
        Ok(name) if !name.is_empty() => vec![Flavor::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .unwrap_or_else(|| {
                panic!("THROTTLE_SOAK_FLAVOR={name}: not one of {:?}", Flavor::ALL)
            })],
        _ if long_mode() => Flavor::ALL.to_vec(),
        _ => vec![Flavor::Redis82],
    }
}

#[test]
fn overshoot_soak() {
    let run = if long_mode() { LONG_RUN } else { SHORT_RUN };
    for flavor in flavors() {
        soak(flavor, run);
    }
}
