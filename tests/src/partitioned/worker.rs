//! The partitioned-quota worker: a process that runs a [`PartitionedLimiter`] from the
//! environment its parent set ([`worker_env`]) and prints what it did (the lines are in
//! [`super`]'s header).

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis_throttle::partitioned::{LeaseEventKind, PartitionedLimiter, PartitionedQuota};
use redis_throttle::Quota;
use tokio::time::Instant;

use throttle_testkit::ChildTest;

use super::output::{End, Output};
use crate::env::{worker_env as worker_var, worker_number};
use crate::runtime::runtime;
use crate::wall::{now_ns, sleep_until};

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
    /// The fleet tests' quota (`partitioned_fleet.rs`, `partitioned_failover.rs`): 200/s and a
    /// burst of 40 as 20 partitions of 10/s and 2 tokens; leases of 1 s; 4 callers a worker.
    pub const FLEET: Spec = Spec {
        partitions: 20,
        burst: 40,
        rate: 200,
        lease_ms: 1000,
        tasks: 4,
    };

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

/// Past the run's end, how long the parent waits for a worker to exit: its own [`GRACE`] for
/// its last call and releases, and a busy machine's slack.
const EXIT_GRACE: Duration = Duration::from_secs(30);

/// Waits for each of `workers` (the index is the worker's number) to exit, until
/// 30 s past the run's `end` (wall-clock ns), and reads back what each printed, in
/// order. A worker not in `killed` must have exited cleanly: otherwise the test fails with
/// the tail of its stdout and its stderr. Each such worker's METRICS line is printed.
pub fn finish_workers<'a>(
    workers: impl IntoIterator<Item = &'a mut ChildTest>,
    end: i128,
    killed: &[usize],
) -> Vec<Output> {
    let to_end = Duration::from_nanos(u64::try_from(end - now_ns()).unwrap_or(0));
    let deadline = std::time::Instant::now() + to_end + EXIT_GRACE;
    let mut outputs = Vec::new();
    for (w, child) in workers.into_iter().enumerate() {
        let out = child.finish(deadline);
        let parsed = Output::parse(&out.stdout);
        if !killed.contains(&w) {
            let lines: Vec<&str> = out.stdout.lines().collect();
            let tail = lines[lines.len().saturating_sub(30)..].join("\n");
            assert!(
                out.failure.is_none(),
                "worker {w} {:?}\n--- stdout (tail)\n{tail}\n--- stderr\n{}",
                out.failure,
                out.stderr
            );
            let metrics = parsed.metrics.as_deref().unwrap_or("(none)");
            println!("worker {w}: {metrics}");
        }
        outputs.push(parsed);
    }
    outputs
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
    let spec = Spec::parse(&worker_var(SPEC));
    let (go_at, end_at): (i128, i128) = (worker_number(GO_AT), worker_number(END_AT));
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
            sleep_until(go_at).await;
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
                            if let Ok(grant) =
                                limiter.acquire_with(Demand::call().within(within)).await
                            {
                                // The call the token is for goes out a little later (the
                                // caller prepares it): a freeze may fall in between.
                                tokio::time::sleep(PREPARE).await;
                                let done = now_ns();
                                let at = wall(grant.at).min(done);
                                println!("GRANT {at} {done} {}", grant.partition.unwrap_or(0));
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
