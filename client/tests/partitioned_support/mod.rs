//! What the partitioned-quota fleet tests share: the worker process (this test binary run
//! again), and the checks on what the workers printed.
//!
//! A worker prints, as it goes (so a SIGKILLed worker's lines are kept):
//! - `START <ns>` before its first call,
//! - `GRANT <at> <done> <partition>` per grant: `at` is when the limiter took the tokens
//!   ([`PartitionGrant::at`]), `done` when the call they are for went out (`PREPARE` after
//!   `acquire()` returned),
//! - `LEASE <partition> <from> <until>` per confirmed lease or renewal: the partition is
//!   spent in `[from, until)`,
//! - `LEASE_END <partition> <at> <how>` when it stopped spending one early: `released`
//!   (given back: idle, yielded, at the end), `lost` (a renewal found the key gone or
//!   another owner's) or `lapsed` (no renewal confirmed in time; `at` is the lease's end),
//! - `METRICS ...` at a graceful end.
//!
//! Times are ns since the Unix epoch: one machine, one clock. No `common`: these files do
//! not depend on the bucket tests' helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis_throttle::partitioned::{LeaseEventKind, PartitionedLimiter, PartitionedQuota};
use redis_throttle::Quota;
use throttle_testkit::{check_windows, Sample, Windows};
use tokio::time::Instant;

pub const NS_PER_S: i128 = 1_000_000_000;

/// Now, in ns since the Unix epoch: the clock every process on the machine shares.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as i128
}

/// A multi-threaded tokio runtime for a synchronous `#[test]`.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A plain multiplexed connection with timeouts that fail a hung test.
pub async fn multiplexed(url: &str) -> redis::aio::MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    redis::Client::open(url)
        .expect("a valid URL")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// `GET key` as text: `None` while the key does not exist.
pub fn get(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).expect("GET")
}

const URLS: &str = "THROTTLE_PART_URLS";
const GO_AT: &str = "THROTTLE_PART_GO_AT_NS";
const END_AT: &str = "THROTTLE_PART_END_AT_NS";
const SPEC: &str = "THROTTLE_PART_SPEC";
/// Between a grant and the call it is for, in a worker.
pub const PREPARE: Duration = Duration::from_millis(50);
/// Past the end: a worker's last call and its releases.
const GRACE: Duration = Duration::from_secs(20);

/// The quota and the workers' shape.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub partitions: u32,
    pub burst: u64,
    pub rate: u64,
    pub lease_ms: u64,
    /// Concurrent callers per worker: the most grants a frozen worker can carry over.
    pub tasks: usize,
}

impl Spec {
    fn env(&self) -> String {
        format!(
            "{} {} {} {} {}",
            self.partitions, self.burst, self.rate, self.lease_ms, self.tasks
        )
    }

    fn parse(text: &str) -> Spec {
        let n: Vec<u64> = text
            .split_whitespace()
            .map(|w| w.parse().expect("a number"))
            .collect();
        Spec {
            partitions: n[0] as u32,
            burst: n[1],
            rate: n[2],
            lease_ms: n[3],
            tasks: n[4] as usize,
        }
    }

    pub fn quota(&self) -> PartitionedQuota {
        PartitionedQuota::builder(
            "fleet",
            Quota::new(self.burst, self.rate).expect("a valid quota"),
        )
        .partitions(self.partitions)
        .lease(Duration::from_millis(self.lease_ms))
        .build()
        .expect("a valid partitioned quota")
    }
}

/// The environment that makes the worker test run as a worker.
pub fn worker_env(
    urls: &[String],
    spec: Spec,
    go_at: i128,
    end_at: i128,
) -> Vec<(&'static str, String)> {
    vec![
        (URLS, urls.join(",")),
        (SPEC, spec.env()),
        (GO_AT, go_at.to_string()),
        (END_AT, end_at.to_string()),
    ]
}

/// A cluster connection that gives up quickly on a node that is down, so that a failover
/// shows up as errors (and lapsed leases) rather than as long stalls.
pub async fn cluster_connection(urls: &[String]) -> redis::cluster_async::ClusterConnection {
    ClusterClient::builder(urls.to_vec())
        .connection_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500))
        .retries(2)
        .min_retry_wait(10)
        .max_retry_wait(100)
        .build()
        .expect("a cluster client")
        .get_async_connection()
        .await
        .expect("connect to the cluster")
}

/// Wall-clock ns of a monotonic instant, from a fresh pair of clock readings: the wall clock
/// read between two monotonic readings, the closest pair of a few tries. A preemption
/// between two readings (a busy machine) would otherwise shift the result by its length,
/// and the confirmations of one hold, which share its first instant, would no longer match.
fn wall(instant: Instant) -> i128 {
    let mut best: Option<(Duration, i128, Instant)> = None;
    for _ in 0..8 {
        let before = Instant::now();
        let wall_now = now_ns();
        let spread = Instant::now() - before;
        if best.is_none_or(|(narrowest, _, _)| spread < narrowest) {
            best = Some((spread, wall_now, before + spread / 2));
        }
        if spread <= Duration::from_micros(20) {
            break;
        }
    }
    let (_, wall_now, mono_now) = best.expect("a reading");
    if instant <= mono_now {
        wall_now - (mono_now - instant).as_nanos() as i128
    } else {
        wall_now + (instant - mono_now).as_nanos() as i128
    }
}

/// Runs the worker when the environment says so (returns false otherwise): `tasks` callers
/// acquire one token at a time until the end instant, then the leases are released.
pub fn worker() -> bool {
    let Ok(urls) = std::env::var(URLS) else {
        return false;
    };
    let urls: Vec<String> = urls.split(',').map(str::to_owned).collect();
    let spec = Spec::parse(&std::env::var(SPEC).expect("the spec"));
    let number = |name: &str| -> i128 {
        std::env::var(name)
            .unwrap_or_else(|_| panic!("{name}"))
            .parse()
            .expect("a number")
    };
    let (go_at, end_at) = (number(GO_AT), number(END_AT));
    let bound = Duration::from_nanos((end_at - now_ns()).max(0) as u64) + GRACE;
    runtime().block_on(async {
        let work = async {
            let conn = cluster_connection(&urls).await;
            let limiter = PartitionedLimiter::builder(spec.quota())
                .on_lease(|event| match event.kind {
                    LeaseEventKind::Confirmed {
                        usable_from,
                        valid_until,
                    } => println!(
                        "LEASE {} {} {}",
                        event.partition,
                        wall(usable_from),
                        wall(valid_until)
                    ),
                    kind => println!(
                        "LEASE_END {} {} {}",
                        event.partition,
                        wall(event.at),
                        End::of(kind).name()
                    ),
                })
                .build(conn)
                .expect("a limiter");
            let pause = (go_at - now_ns()).clamp(0, 10 * NS_PER_S);
            tokio::time::sleep(Duration::from_nanos(pause as u64)).await;
            println!("\nSTART {}", now_ns());
            let callers: Vec<_> = (0..spec.tasks)
                .map(|_| {
                    let limiter = limiter.clone();
                    tokio::spawn(async move {
                        // Bounded by the end instant, and by a count no run reaches.
                        for _ in 0..1_000_000 {
                            let left = end_at - now_ns();
                            if left <= 0 {
                                break;
                            }
                            let within = Duration::from_nanos(left as u64);
                            if let Ok(grant) = limiter.acquire_within(within).await {
                                // The call the token is for goes out a little later (the
                                // caller prepares it): a freeze may fall in between.
                                tokio::time::sleep(PREPARE).await;
                                let done = now_ns();
                                let at = wall(grant.at).min(done);
                                println!("GRANT {at} {done} {}", grant.partition);
                            }
                        }
                    })
                })
                .collect();
            for caller in callers {
                caller.await.expect("a caller");
            }
            let metrics = limiter.metrics();
            limiter.shutdown().await.expect("shutdown");
            println!("METRICS {metrics:?}");
        };
        tokio::time::timeout(bound, work)
            .await
            .expect("the worker ran past its bound");
    });
    true
}

/// How a worker stopped spending a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Given back: idle, yielded to another process, or at the end.
    Released,
    /// A renewal found the key gone or another owner's.
    Lost,
    /// No renewal confirmed before the lease's usable time ran out.
    Lapsed,
}

impl End {
    fn of(kind: LeaseEventKind) -> End {
        match kind {
            LeaseEventKind::Lost => End::Lost,
            LeaseEventKind::Lapsed => End::Lapsed,
            _ => End::Released,
        }
    }

    fn name(self) -> &'static str {
        match self {
            End::Released => "released",
            End::Lost => "lost",
            End::Lapsed => "lapsed",
        }
    }

    fn parse(word: &str) -> Option<End> {
        [End::Released, End::Lost, End::Lapsed]
            .into_iter()
            .find(|end| end.name() == word)
    }
}

/// One worker's lines.
#[derive(Debug, Default)]
pub struct Output {
    pub start: Option<i128>,
    /// `(at, done, partition)`.
    pub grants: Vec<(i128, i128, u32)>,
    /// `(partition, from, until)`.
    pub leases: Vec<(u32, i128, i128)>,
    /// `(partition, at, how)`: spending stopped.
    pub ends: Vec<(u32, i128, End)>,
    pub metrics: Option<String>,
}

impl Output {
    pub fn parse(stdout: &str) -> Output {
        let mut out = Output::default();
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let n = |i: usize| words.get(i).and_then(|w| w.parse::<i128>().ok());
            match words.first().copied() {
                Some("START") => out.start = n(1),
                // A SIGKILL may cut the last line short: only whole lines count.
                Some("GRANT") if words.len() == 4 => {
                    if let (Some(at), Some(done), Some(p)) = (n(1), n(2), n(3)) {
                        out.grants.push((at, done, p as u32));
                    }
                }
                Some("LEASE") if words.len() == 4 => {
                    if let (Some(p), Some(from), Some(until)) = (n(1), n(2), n(3)) {
                        out.leases.push((p as u32, from, until));
                    }
                }
                Some("LEASE_END") if words.len() == 4 => {
                    if let (Some(p), Some(at), Some(end)) = (n(1), n(2), End::parse(words[3])) {
                        out.ends.push((p as u32, at, end));
                    }
                }
                Some("METRICS") => out.metrics = Some(line.to_owned()),
                _ => {}
            }
        }
        out
    }
}

/// A worker frozen from `frozen` to `thawed` (ns, read before each signal).
#[derive(Clone, Copy, Debug)]
pub struct Freeze {
    pub worker: usize,
    pub frozen: i128,
    pub thawed: i128,
}

/// What [`check`] found.
#[derive(Debug)]
pub struct Findings {
    pub windows: Windows,
    /// The worst window of all grants, the carried ones included, tokens over the bound.
    pub worst_all: f64,
    /// Grants decided before a freeze and returned after it, per freeze.
    pub carried: Vec<usize>,
    pub leases: usize,
    /// Smallest gap between one holder's last usable instant and the next holder's first, ms.
    pub smallest_handover_ms: f64,
    pub per_worker: Vec<usize>,
}

/// The checks, on every worker's output (by worker number):
/// 1. leases: no two holds of a partition overlap: each hold (from its first `from` to its
///    last `until`) ends before the next one starts;
/// 2. in flight: a frozen worker's grants decided before the freeze and returned after it
///    number at most its callers (`tasks`): the documented bound;
/// 3. every other grant: every window holds at most `burst + rate x window` (plus the
///    bunching the measured lateness between decision and return can make), from the
///    first `START` on (every partition starts empty);
/// 4. all grants, the carried ones included: at most that plus the grants carried.
pub fn check(outputs: &[Output], freezes: &[Freeze], spec: Spec) -> Findings {
    // 1. Leases. A hold's confirmations share its first instant (read again at each, so
    // equal within a ms).
    let mut events: BTreeMap<u32, Vec<(i128, i128, usize)>> = BTreeMap::new();
    let mut leases = 0;
    for (worker, out) in outputs.iter().enumerate() {
        for &(p, from, until) in &out.leases {
            leases += 1;
            events.entry(p).or_default().push((from, until, worker));
        }
    }
    let mut holds: BTreeMap<u32, Vec<(i128, i128, usize)>> = BTreeMap::new();
    for (p, mut list) in events {
        list.sort();
        let merged = holds.entry(p).or_default();
        for (from, until, worker) in list {
            match merged.last_mut() {
                Some(hold) if hold.2 == worker && from - hold.0 < 1_000_000 => {
                    hold.1 = hold.1.max(until);
                }
                _ => merged.push((from, until, worker)),
            }
        }
        // A hold ends at its last `until`, or earlier where the worker stopped spending.
        for hold in merged.iter_mut() {
            let stopped = outputs[hold.2]
                .ends
                .iter()
                .filter(|&&(q, at, _)| q == p && at >= hold.0)
                .map(|&(_, at, _)| at)
                .min();
            if let Some(at) = stopped {
                hold.1 = hold.1.min(at);
            }
        }
        merged.sort();
    }
    let mut smallest_gap = i128::MAX;
    for (p, list) in &mut holds {
        list.sort();
        for pair in list.windows(2) {
            let ((_, until_a, a), (from_b, _, b)) = (pair[0], pair[1]);
            assert!(
                from_b >= until_a,
                "partition {p}: worker {b} spent it from {:.3} s, while worker {a}'s lease was \
                 usable until {:.3} s; holds: {list:?}",
                from_b as f64 / 1e9,
                until_a as f64 / 1e9
            );
            smallest_gap = smallest_gap.min(from_b - until_a);
        }
    }

    // 2. In flight across a freeze.
    let mut carried_grants = Vec::new();
    let mut carried = Vec::new();
    for f in freezes {
        let over: Vec<(i128, i128, u32)> = outputs[f.worker]
            .grants
            .iter()
            .copied()
            .filter(|&(at, done, _)| at < f.thawed && done > f.thawed)
            .collect();
        assert!(
            over.len() <= spec.tasks,
            "worker {} carried {} grants across its freeze, more than its {} callers: {over:?}",
            f.worker,
            over.len(),
            spec.tasks
        );
        for &(at, _, _) in &over {
            assert!(
                at < f.frozen + 5_000_000,
                "a grant decided while frozen: {f:?} {at}"
            );
        }
        carried.push(over.len());
        carried_grants.extend(over.into_iter().map(|g| (f.worker, g)));
    }

    // 3. Windows.
    let mut samples = Vec::new();
    let mut per_worker = Vec::new();
    for (worker, out) in outputs.iter().enumerate() {
        per_worker.push(out.grants.len());
        for &grant in &out.grants {
            if carried_grants.contains(&(worker, grant)) {
                continue;
            }
            let (at, done, _) = grant;
            // Lateness is what the call took beyond its preparation.
            let prepare = PREPARE.as_nanos() as i128;
            samples.push(Sample {
                start: at.min(done - prepare),
                done,
                slept: prepare,
            });
        }
    }
    let t0 = outputs
        .iter()
        .filter_map(|o| o.start)
        .min()
        .expect("a worker started");
    let windows = check_windows(&samples, t0, 0, spec.burst, spec.rate);

    // 4. All grants together, the carried ones included: within the bound plus what the
    // frozen workers had in flight.
    let mut all: Vec<i128> = outputs
        .iter()
        .flat_map(|o| o.grants.iter().map(|&(_, done, _)| done))
        .collect();
    all.sort_unstable();
    let worst_all = worst_excess(&all, spec.burst, spec.rate);
    let in_flight: usize = carried.iter().sum();
    assert!(
        worst_all <= windows.tolerance + in_flight as f64,
        "all grants: a window {worst_all:.3} tokens over burst + rate x window, more than the \
         tolerance {:.3} plus the {in_flight} grants carried across freezes",
        windows.tolerance
    );
    Findings {
        worst_all,
        windows,
        carried,
        leases,
        smallest_handover_ms: smallest_gap as f64 / 1e6,
        per_worker,
    }
}

/// Largest `grants - (burst + rate x (t1 - t0))` over every window `[t0, t1]` of these
/// sorted instants, in tokens (the one-pass argument of `throttle_testkit::check_windows`).
fn worst_excess(sorted: &[i128], burst: u64, rate: u64) -> f64 {
    let (burst, rate) = (i128::from(burst), i128::from(rate));
    let mut worst = i128::MIN;
    let mut min_a = i128::MAX;
    for (j, &t) in sorted.iter().enumerate() {
        let a_j = j as i128 * NS_PER_S - rate * t;
        min_a = min_a.min(a_j);
        worst = worst.max(a_j - min_a + NS_PER_S - burst * NS_PER_S);
    }
    worst as f64 / 1e9
}
