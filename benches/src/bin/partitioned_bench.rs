//! Grants per second of a fleet on one quota far above what one hot key serves: leased
//! partitions spent in process (`redis_throttle::partitioned`) against the same fleet on a
//! single hot `THROTTLE.TAKE` key, in one run, on a real 3-master Redis Cluster on loopback
//! (the release module). Prints grants/s of each, the ratio (goal >= 2.5x) and round trips
//! per grant (goal well under 0.1), counted by the client and by the servers.
//!
//! ```sh
//! cargo build --release -p redis-throttle-module
//! cargo run --release -p throttle-benches --bin partitioned-bench -- [--seconds 5] [--reps 3]
//! ```
//!
//! The fleet is `--workers` limiters (each its own connection and lease owner, as separate
//! processes would be) of `--tasks` callers each, calling `acquire()` in a loop. The phases
//! alternate, `--reps` times each; medians are reported. Every loop is bounded by time.

use redis_throttle::prelude::*;
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::{Limiter, Quota};
use throttle_benches::{at_least_one, commandstats, runtime, ServerOption};
use throttle_testkit::ReplicatedCluster;

use clap::Parser;

/// The quota: far above what one key on one master can serve to this fleet.
const RATE: u64 = 2_000_000;
const BURST: u64 = 200_000;
/// Commands the lease protocol sends (the hot key sends throttle.take).
const LEASE_COMMANDS: [&str; 6] = ["set", "eval", "role", "wait", "get", "del"];

/// The command line (`--help` prints it). The module is
/// target/release/libredis_throttle_module.so (`THROTTLE_MODULE` overrides it).
#[derive(Parser)]
#[command(
    name = "partitioned-bench",
    about = "A fleet on leased partitions against the same fleet on one hot key",
    mut_arg("flavor", |a| a.default_value("redis-7.0"))
)]
struct Options {
    #[command(flatten)]
    server: ServerOption,
    /// Length of one phase, seconds.
    #[arg(long, default_value_t = 5.0, value_parser = positive)]
    seconds: f64,
    /// Alternating repetitions of both phases.
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    reps: usize,
    /// Limiters in the fleet.
    #[arg(long, default_value_t = 6, value_parser = at_least_one)]
    workers: usize,
    /// Callers per limiter.
    #[arg(long, default_value_t = 8, value_parser = at_least_one)]
    tasks: usize,
    /// Partitions of the quota.
    #[arg(long, default_value_t = 40)]
    partitions: u32,
}

/// A length of time in seconds, above 0.
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(s),
        _ => Err(format!("{text:?} is not a number of seconds above 0")),
    }
}

/// What one phase measured.
struct Phase {
    grants: u64,
    seconds: f64,
    client_round_trips: u64,
    server_commands: u64,
}

impl Phase {
    fn per_second(&self) -> f64 {
        self.grants as f64 / self.seconds
    }
}

fn main() {
    let o = Options::parse();
    if std::env::var_os("THROTTLE_MODULE").is_none() {
        let release = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/release/libredis_throttle_module.so"
        );
        std::env::set_var("THROTTLE_MODULE", release);
    }
    let cluster = ReplicatedCluster::start(o.server.flavor, 3, 0);
    let urls = cluster.urls();
    let runtime = runtime().expect("a tokio runtime");
    let quota = Quota::new(BURST, RATE).expect("a valid quota");
    let mut partitioned = Vec::new();
    let mut hot = Vec::new();
    for rep in 0..o.reps {
        let p = runtime.block_on(run_partitioned(&o, &urls, &quota, rep));
        let commands = server_commands(&cluster, &LEASE_COMMANDS);
        let p = Phase {
            server_commands: commands
                - partitioned
                    .iter()
                    .map(|x: &Phase| x.server_commands)
                    .sum::<u64>(),
            ..p
        };
        let before_hot = server_commands(&cluster, &["throttle.take"]);
        let h = runtime.block_on(run_hot(&o, &urls, &quota, rep));
        let h = Phase {
            server_commands: server_commands(&cluster, &["throttle.take"]) - before_hot,
            ..h
        };
        println!(
            "rep {}: partitioned {:>12.0} grants/s ({:.5} round trips per grant) | hot key {:>9.0} grants/s ({:.3}) | ratio {:.1}x",
            rep + 1,
            p.per_second(),
            p.client_round_trips as f64 / p.grants.max(1) as f64,
            h.per_second(),
            h.client_round_trips as f64 / h.grants.max(1) as f64,
            p.per_second() / h.per_second().max(1e-9),
        );
        partitioned.push(p);
        hot.push(h);
    }
    let median = |values: Vec<f64>| {
        let mut v = values;
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let p_rate = median(partitioned.iter().map(Phase::per_second).collect());
    let h_rate = median(hot.iter().map(Phase::per_second).collect());
    let ratios = median(
        partitioned
            .iter()
            .zip(&hot)
            .map(|(p, h)| p.per_second() / h.per_second().max(1e-9))
            .collect(),
    );
    let sum = |phases: &[Phase], f: fn(&Phase) -> u64| phases.iter().map(f).sum::<u64>() as f64;
    let p_grants = sum(&partitioned, |p| p.grants);
    let h_grants = sum(&hot, |p| p.grants);
    println!(
        "\npartitioned-bench on {}, quota {RATE}/s burst {BURST} ({} partitions), {} workers x {} callers, \
         {} x {:.1} s per phase, medians:",
        o.server.flavor, o.partitions, o.workers, o.tasks, o.reps, o.seconds
    );
    println!(
        "| fleet on | grants/s | round trips per grant (client) | commands per grant (servers) |"
    );
    println!("|---|---:|---:|---:|");
    println!(
        "| {} leased partitions | {:.0} | {:.5} | {:.5} |",
        o.partitions,
        p_rate,
        sum(&partitioned, |p| p.client_round_trips) / p_grants,
        sum(&partitioned, |p| p.server_commands) / p_grants,
    );
    println!(
        "| one hot THROTTLE.TAKE key | {:.0} | {:.3} | {:.3} |",
        h_rate,
        sum(&hot, |p| p.client_round_trips) / h_grants,
        sum(&hot, |p| p.server_commands) / h_grants,
    );
    println!(
        "\nratio (median of the repetitions' ratios): {ratios:.1}x (goal >= 2.5x); round trips per \
         grant {:.5} (goal well under 0.1)",
        sum(&partitioned, |p| p.client_round_trips) / p_grants
    );
}

async fn connect(urls: &[String]) -> ClusterConnection {
    ClusterClient::builder(urls.to_vec())
        .connection_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
        .build()
        .expect("a cluster client")
        .get_async_connection()
        .await
        .expect("connect to the cluster")
}

/// `calls` of these commands summed over the cluster's masters.
fn server_commands(cluster: &ReplicatedCluster, commands: &[&str]) -> u64 {
    cluster
        .servers()
        .iter()
        .map(|server| {
            let stats = commandstats(&mut server.conn()).unwrap_or_default();
            commands
                .iter()
                .filter_map(|c| Some(stats.get(*c)?.calls))
                .sum::<u64>()
        })
        .sum()
}

async fn run_partitioned(o: &Options, urls: &[String], quota: &Quota, rep: usize) -> Phase {
    let pq = PartitionedQuota::builder(format!("bench{rep}"), quota.clone())
        .partitions(o.partitions)
        .lease(Duration::from_secs(2))
        .build()
        .expect("a valid partitioned quota");
    let mut limiters = Vec::new();
    for _ in 0..o.workers {
        let limiter = PartitionedLimiter::builder(pq.clone())
            .build(connect(urls).await)
            .expect("a limiter");
        limiters.push(limiter);
    }
    let phase = fleet_phase(o, &limiters).await;
    for limiter in &limiters {
        let _ = limiter.shutdown().await;
    }
    phase
}

async fn run_hot(o: &Options, urls: &[String], quota: &Quota, rep: usize) -> Phase {
    let key = format!("{{hot{rep}}}:quota");
    let mut limiters = Vec::new();
    for _ in 0..o.workers {
        limiters.push(Limiter::new(
            connect(urls).await,
            key.clone(),
            quota.clone(),
        ));
    }
    fleet_phase(o, &limiters).await
}

/// A phase of the fleet's `limiters` acquiring in a loop ([`drive`]): its grants and the
/// round trips the limiters counted (the servers' count is the caller's to fill in).
async fn fleet_phase<L: Throttle + Clone + 'static>(o: &Options, limiters: &[L]) -> Phase {
    let call = |l: L| async move { l.acquire().await.is_ok() };
    let (grants, seconds) = drive(o, limiters.to_vec(), call).await;
    Phase {
        grants,
        seconds,
        client_round_trips: limiters.iter().map(|l| l.metrics().round_trips).sum(),
        server_commands: 0,
    }
}

/// Every limiter's callers call `call` in a loop for the phase's length; returns the grants
/// and the seconds they took.
async fn drive<L, F, Fut>(o: &Options, limiters: Vec<L>, call: F) -> (u64, f64)
where
    L: Clone + Send + 'static,
    F: Fn(L) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let length = Duration::from_secs_f64(o.seconds);
    let start = Instant::now();
    let end = start + length;
    let mut callers = Vec::new();
    for limiter in limiters {
        for _ in 0..o.tasks {
            let (limiter, call) = (limiter.clone(), call.clone());
            callers.push(tokio::spawn(async move {
                let mut granted = 0u64;
                while Instant::now() < end {
                    if call(limiter.clone()).await {
                        granted += 1;
                    }
                }
                granted
            }));
        }
    }
    let mut grants = 0;
    for caller in callers {
        grants += caller.await.unwrap_or(0);
    }
    (grants, start.elapsed().as_secs_f64())
}
