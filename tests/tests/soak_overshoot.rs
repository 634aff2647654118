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

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis_throttle::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_throttle::{Limiter, Quota, Strategy};
use throttle_testkit::{Flavor, Server};

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

const NS_PER_S: i128 = 1_000_000_000;
const NS_PER_MS: i128 = 1_000_000;

/// Set in a worker process: the server URL. Unset, [`soak_worker`] does nothing.
const WORKER_URL: &str = "THROTTLE_SOAK_WORKER_URL";
/// Set in a worker process: when to start and when to stop asking, ns since the epoch.
const WORKER_GO_AT: &str = "THROTTLE_SOAK_WORKER_GO_AT_NS";
const WORKER_END_AT: &str = "THROTTLE_SOAK_WORKER_END_AT_NS";

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as i128
}

fn env_ns(name: &str) -> i128 {
    let text = std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    text.parse()
        .unwrap_or_else(|_| panic!("{name}={text} is not a number"))
}

fn long_mode() -> bool {
    std::env::var("THROTTLE_LONG").is_ok_and(|v| !v.is_empty() && v != "0")
}

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
    let go_at = env_ns(WORKER_GO_AT);
    let end_at = env_ns(WORKER_END_AT);
    // Never outlive the parent's bound, even if the parent is gone.
    let bound = Duration::from_nanos((end_at - now_ns()).max(0) as u64) + GRACE;
    tokio::time::timeout(bound, work(&url, go_at, end_at))
        .await
        .expect("the worker ran past its bound");
}

async fn work(url: &str, go_at: i128, end_at: i128) {
    let client = redis_throttle::redis::Client::open(url).expect("a valid URL");
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    let conn = ConnectionManager::new_with_config(client, config)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    let limiter = Limiter::builder(KEY, quota())
        .strategy(Strategy::Reserve)
        .name(format!("soak-{}", std::process::id()))
        .build(conn)
        .expect("a limiter");

    let pause = (go_at - now_ns()).clamp(0, 10 * NS_PER_S);
    tokio::time::sleep(Duration::from_nanos(pause as u64)).await;
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
                    assert_eq!(grant.round_trips, 1, "a reservation is one round trip");
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

/// A worker process; dropping it kills it (SIGKILL) and reaps it.
struct Worker {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

impl Worker {
    fn spawn(url: &str, go_at: i128, end_at: i128) -> Worker {
        let exe = std::env::current_exe().expect("the test binary");
        let mut child = Command::new(exe)
            .args(["--exact", "soak_worker", "--nocapture", "--test-threads=1"])
            .env(WORKER_URL, url)
            .env(WORKER_GO_AT, go_at.to_string())
            .env(WORKER_END_AT, end_at.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a worker process");
        // Read both pipes while the worker runs: thousands of grant lines fill a pipe.
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                String::from_utf8_lossy(&bytes).into_owned()
            })
        };
        let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
        let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
        Worker {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Waits for the worker to exit (or kills it at the deadline) and returns its output.
    fn finish(&mut self, deadline: std::time::Instant) -> (String, String, Option<String>) {
        let failure = loop {
            match self.child.try_wait().expect("wait for a worker") {
                Some(status) if status.success() => break None,
                Some(status) => break Some(format!("exited with {status}")),
                None if std::time::Instant::now() > deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break Some("ran past its deadline and was killed".to_owned());
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let join = |handle: Option<JoinHandle<String>>| {
            handle
                .map(|h| h.join().unwrap_or_default())
                .unwrap_or_default()
        };
        (join(self.stdout.take()), join(self.stderr.take()), failure)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One grant as a worker logged it, ns since the epoch.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Just before the call was sent.
    start: i128,
    /// When `acquire()` returned: the client may act.
    done: i128,
    /// The wait the server asked for (`wait_ms`), which the client slept.
    slept: i128,
}

impl Sample {
    /// How much later than `start + slept` the call returned.
    fn lateness(&self) -> i128 {
        self.done - self.start - self.slept
    }
}

/// What a run measured.
#[derive(Debug)]
struct Figures {
    grants: usize,
    /// From the first request to the last grant, ns.
    duration: i128,
    utilisation: f64,
    /// Largest `grants - (capacity + rate * (t1 - t0))` over all windows, in tokens, and
    /// where (offsets from the start, ns, and the grants in it).
    worst_window: f64,
    worst_at: (i128, i128, usize),
    /// Smallest `capacity + rate * (c_k - T0 + g) - k`, tokens: never negative.
    cumulative_margin: f64,
    max_lateness: i128,
    median_lateness: i128,
    p99_lateness: i128,
    /// `rate * (max lateness + 1 ms + g)`, tokens.
    tolerance: f64,
}

/// Checks and measures the grants; `t0` is when the bucket was last known full (before the
/// first request), `g` how far the server's clock reading can trail the true time.
fn analyse(samples: &[Sample], t0: i128, g: i128, capacity: u64, rate: u64) -> Figures {
    assert!(!samples.is_empty(), "no grants");
    let (capacity, rate) = (i128::from(capacity), i128::from(rate));
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(|s| s.done);

    for s in &sorted {
        assert!(
            s.lateness() >= 0,
            "a grant returned {} ns before the wait the server asked for: {s:?}",
            -s.lateness()
        );
    }
    let mut lateness: Vec<i128> = sorted.iter().map(Sample::lateness).collect();
    lateness.sort_unstable();
    let max_lateness = *lateness.last().unwrap();
    let percentile = |p: usize| lateness[(lateness.len() - 1) * p / 100];

    // Strict, from the full bucket: the k-th grant (from 1) needs k <= capacity + rate *
    // (c_k - T0 + g). In tokens x 10^9 to stay in integers.
    let mut cumulative_margin = i128::MAX;
    for (index, s) in sorted.iter().enumerate() {
        let k = index as i128 + 1;
        let allowed = capacity * NS_PER_S + rate * (s.done - t0 + g);
        let margin = allowed - k * NS_PER_S;
        assert!(
            margin >= 0,
            "grant {k} came {} ms after the start, before the bucket allows it ({capacity} + \
             {rate}/s); the grants before it: {:?}",
            (s.done - t0) as f64 / 1e6,
            &sorted[index.saturating_sub(5)..=index]
        );
        cumulative_margin = cumulative_margin.min(margin);
    }

    // Every window [c_i, c_j], i <= j in time order: excess(i, j) = (j - i + 1) - capacity -
    // rate * (c_j - c_i). With A_k = k * 10^9 - rate * c_k, excess * 10^9 = A_j - A_i + 10^9 -
    // capacity * 10^9, so the worst window ending at j starts at the smallest A_i, i <= j:
    // one pass covers all n^2 windows (ties included: among equal instants the earliest
    // index has the smallest A).
    let tolerance_nano = rate * (max_lateness + NS_PER_MS + g);
    let mut worst = i128::MIN;
    let mut worst_at = (0, 0, 0);
    let mut min_a = (i128::MAX, 0usize);
    for (j, s) in sorted.iter().enumerate() {
        let a_j = j as i128 * NS_PER_S - rate * s.done;
        if a_j < min_a.0 {
            min_a = (a_j, j);
        }
        let excess = a_j - min_a.0 + NS_PER_S - capacity * NS_PER_S;
        if excess > worst {
            worst = excess;
            worst_at = (sorted[min_a.1].done - t0, s.done - t0, j - min_a.1 + 1);
        }
        if excess > tolerance_nano {
            let i = min_a.1;
            panic!(
                "{} grants in the {:.3} ms from {:.3} ms after the start: {:.3} tokens over \
                 capacity + rate * window, tolerance {:.3} (rate * (max lateness {:.3} ms + \
                 1 ms + {g} ns)); grants: {:?}",
                j - i + 1,
                (s.done - sorted[i].done) as f64 / 1e6,
                (sorted[i].done - t0) as f64 / 1e6,
                excess as f64 / 1e9,
                tolerance_nano as f64 / 1e9,
                max_lateness as f64 / 1e6,
                &sorted[i..=j.min(i + 40)]
            );
        }
    }

    let duration = sorted.last().unwrap().done - t0;
    let allowed = (capacity * NS_PER_S + rate * duration) as f64 / 1e9;
    Figures {
        grants: sorted.len(),
        duration,
        utilisation: sorted.len() as f64 / allowed,
        worst_window: worst as f64 / 1e9,
        worst_at,
        cumulative_margin: cumulative_margin as f64 / 1e9,
        max_lateness,
        median_lateness: percentile(50),
        p99_lateness: percentile(99),
        tolerance: tolerance_nano as f64 / 1e9,
    }
}

fn soak(flavor: Flavor, run: Duration) {
    let server = Server::start(flavor);
    let url = server.url();
    let go_at = now_ns() + GO_DELAY.as_nanos() as i128;
    let end_at = go_at + run.as_nanos() as i128;
    let mut workers: Vec<Worker> = (0..PROCESSES)
        .map(|_| Worker::spawn(&url, go_at, end_at))
        .collect();

    let deadline = std::time::Instant::now() + GO_DELAY + run + GRACE;
    let mut starts = Vec::new();
    let mut samples = Vec::new();
    let mut per_process = Vec::new();
    for (n, worker) in workers.iter_mut().enumerate() {
        let (stdout, stderr, failure) = worker.finish(deadline);
        if let Some(failure) = failure {
            panic!("worker {n} {failure}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
        }
        assert!(
            stdout.contains("SOAK-END"),
            "worker {n} printed no report\n{stdout}\n{stderr}"
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
    let g = if flavor.has_cached_micros() {
        1_000
    } else {
        NS_PER_MS
    };
    let f = analyse(&samples, t0, g, CAPACITY, RATE);
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

// --- The analysis on made-up grants ----------------------------------------------------

fn at(done_ms: i128) -> Sample {
    Sample {
        start: done_ms * NS_PER_MS,
        done: done_ms * NS_PER_MS,
        slept: 0,
    }
}

#[test]
fn analysis_of_a_perfect_bucket() {
    // capacity 2, 10/s: two at once, then one every 100 ms.
    let samples: Vec<Sample> = [0, 0, 100, 200, 300].into_iter().map(at).collect();
    let f = analyse(&samples, 0, 0, 2, 10);
    assert_eq!(f.grants, 5);
    assert_eq!(f.worst_window, 0.0, "{f:?}");
    assert_eq!(f.worst_at, (0, 0, 2), "two at once fill the bucket's burst");
    assert_eq!(f.cumulative_margin, 0.0);
    assert_eq!(f.max_lateness, 0);
    assert!((f.tolerance - 0.01).abs() < 1e-12, "10/s x 1 ms: {f:?}");
    assert!((f.utilisation - 1.0).abs() < 1e-12, "{f:?}");
}

#[test]
fn analysis_allows_a_bunch_within_the_lateness() {
    // capacity 1, 10/s. The grant due at 100 ms (reserved at 0 with a wait of 100 ms) came
    // 50 ms late, bunching with the one due at 200 ms: the window [150, 200] holds 2 grants
    // where the bucket allows 1 + 0.5. The lateness, 50 ms, gives a tolerance of
    // 10/s x (50 + 1) ms = 0.51 token, which covers the 0.5 over.
    let mut late = at(150);
    late.start = 0;
    late.slept = 100 * NS_PER_MS;
    let samples = vec![at(0), late, at(200)];
    let f = analyse(&samples, 0, 0, 1, 10);
    assert_eq!(f.max_lateness, 50 * NS_PER_MS);
    assert!((f.tolerance - 0.51).abs() < 1e-12, "{f:?}");
    assert!((f.worst_window - 0.5).abs() < 1e-12, "{f:?}");
    assert_eq!(f.worst_at, (150 * NS_PER_MS, 200 * NS_PER_MS, 2));
}

#[test]
#[should_panic(expected = "before the bucket allows it")]
fn analysis_rejects_an_early_grant() {
    // capacity 2, 10/s: a third grant at 50 ms is 50 ms early.
    let samples: Vec<Sample> = [0, 0, 50].into_iter().map(at).collect();
    analyse(&samples, 0, 0, 2, 10);
}

#[test]
#[should_panic(expected = "over capacity + rate * window")]
fn analysis_rejects_a_bunch_beyond_the_lateness() {
    // capacity 2, 10/s, grants well spaced from the start, but four at 1000 ms: the window
    // [1000, 1000] holds 4 > 2 + tolerance (no lateness: 0.01).
    let samples: Vec<Sample> = [0, 0, 600, 700, 1000, 1000, 1000, 1000]
        .into_iter()
        .map(at)
        .collect();
    analyse(&samples, 0, 0, 2, 10);
}
