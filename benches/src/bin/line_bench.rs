//! What a capped call costs the server when a fleet waits for slots: THROTTLE commands per
//! call (takes, looks, releases, renewals: the server's own count, `INFO commandstats`), for a
//! fleet of simulated processes (each its own connection and subscription, as
//! `redis_throttle::connect` gives a process) sharing one quota capped at `--cap` calls in
//! flight, against a supplier that holds each call `--hold-ms`. Every process fires its share
//! of `--calls` at once, or, with `--arrive-ms`, the fleet's calls arrive one after another
//! over that long (the processes in turn), so that the line stands while later callers join
//! it: a line that has seen releases tells a joiner its turn. The curve over `--procs` shows
//! whether the cost grows with the fleet (the same calls, split among more processes); each
//! row also says whether the supplier ever saw more than the cap, and the order the calls
//! were served in (how many were granted before a call that joined the line earlier; as the
//! calls see it: with `--arrive-ms`, a call that does not listen learns of its hand-off only
//! when it looks, and a later call that finds a slot free meanwhile may go first, though the
//! server handed the earlier call its slot first).
//!
//! ```sh
//! cargo build --release -p redis-throttle-module
//! cargo run --release -p throttle-benches --bin line-bench -- [--server redis-8.2] [--backend module] [--procs 2,4,8,16,32] [--calls 40] [--cap 4] [--hold-ms 200] [--arrive-ms 0] [--not-listening] [--several]
//! ```

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use redis_throttle::{Backend, Limiter, MultiLimiter, Quota, Throttle};
use throttle_benches::{at_least_one, commandstats, reset_stats, runtime, ServerOption};

/// The command line (`--help` prints it).
#[derive(Parser)]
#[command(
    name = "line-bench",
    about = "THROTTLE commands per capped call, over the fleet's size",
    mut_arg("flavor", |a| a.default_value("redis-8.2"))
)]
struct Options {
    #[command(flatten)]
    server: ServerOption,
    /// module, library or script.
    #[arg(long, default_value = "module", value_parser = backend)]
    backend: Backend,
    /// The fleet sizes, comma-separated.
    #[arg(long, default_value = "2,4,8,16,32", value_delimiter = ',')]
    procs: Vec<usize>,
    /// Calls in all, split among the processes.
    #[arg(long, default_value_t = 40, value_parser = at_least_one)]
    calls: usize,
    /// The cap on calls in flight.
    #[arg(long, default_value_t = 4)]
    cap: u64,
    /// How long the supplier holds each call, ms.
    #[arg(long, default_value_t = 200)]
    hold_ms: u64,
    /// Over how long the fleet's calls arrive, evenly, ms (0: all at once).
    #[arg(long, default_value_t = 0)]
    arrive_ms: u64,
    /// The processes do not listen for announcements (each asks on its own).
    #[arg(long)]
    not_listening: bool,
    /// Each call takes from two buckets (a `MultiLimiter` whose first key holds the slots)
    /// instead of one.
    #[arg(long)]
    several: bool,
}

fn backend(name: &str) -> Result<Backend, String> {
    match name {
        "module" => Ok(Backend::Module),
        "library" => Ok(Backend::Library),
        "script" => Ok(Backend::Script),
        _ => Err(format!(
            "{name:?} is not a backend: module, library or script"
        )),
    }
}

/// The supplier as it sees the calls: open now, the most open at once.
#[derive(Default)]
struct Supplier {
    open: AtomicU64,
    most: AtomicU64,
}

impl Supplier {
    async fn call(&self, hold: Duration) {
        let open = self.open.fetch_add(1, Relaxed) + 1;
        self.most.fetch_max(open, Relaxed);
        tokio::time::sleep(hold).await;
        self.open.fetch_sub(1, Relaxed);
    }
}

/// The THROTTLE commands the server ran since the last `CONFIG RESETSTAT`: the module's
/// commands, or the FCALLs and EVALSHAs of the library and the script.
fn throttle_commands(con: &mut redis::Connection) -> u64 {
    commandstats(con)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .filter(|(name, _)| {
            name.starts_with("throttle.") || ["fcall", "evalsha", "eval"].contains(&name.as_str())
        })
        .map(|(_, stat)| stat.calls)
        .sum()
}

/// One row: `procs` processes sharing `calls`, each process's limiter on `key` (and a
/// second bucket of its own with `--several`).
async fn fleet(url: &str, key: &str, o: &Options, procs: usize) -> (u64, u64, usize, Duration) {
    let quota = || Quota::new(1_000, 1_000u64).expect("quota");
    if o.several {
        let mut limiters = Vec::new();
        for _ in 0..procs {
            let conn = redis_throttle::connect(url).await.expect("connect");
            let mut builder = MultiLimiter::builder()
                .limit(key, quota(), 1)
                .limit(format!("{key}:second"), quota(), 1)
                .backend(o.backend)
                .max_in_flight(o.cap);
            if o.not_listening {
                builder = builder.without_listening();
            }
            limiters.push(builder.build(conn).expect("limiter"));
        }
        return run(limiters, o).await;
    }
    let mut limiters = Vec::new();
    for _ in 0..procs {
        let conn = redis_throttle::connect(url).await.expect("connect");
        let mut builder = Limiter::builder(key, quota())
            .backend(o.backend)
            .max_in_flight(o.cap);
        if o.not_listening {
            builder = builder.without_listening();
        }
        limiters.push(builder.build(conn).expect("limiter"));
    }
    run(limiters, o).await
}

/// The calls of one row, each process's share at once: the most open at once, the fleet's
/// own round trips, the calls served out of the order they began waiting, and how long the
/// calls took from the first take to the last call's end.
async fn run<T: Throttle + Clone + 'static>(
    limiters: Vec<T>,
    o: &Options,
) -> (u64, u64, usize, Duration) {
    let procs = limiters.len();
    let supplier = Arc::new(Supplier::default());
    let hold = Duration::from_millis(o.hold_ms);
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    // Let each process's subscription come up before the calls.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    let mut tasks = Vec::new();
    let arrive = Duration::from_millis(o.arrive_ms);
    for (p, limiter) in limiters.iter().enumerate() {
        let share = o.calls / procs + usize::from(p < o.calls % procs);
        for j in 0..share {
            let (limiter, supplier, served) =
                (limiter.clone(), Arc::clone(&supplier), Arc::clone(&served));
            // The fleet's calls in turn: this process's j-th is the fleet's (j·procs + p)-th.
            let nth = u32::try_from(j * procs + p).unwrap_or(u32::MAX);
            let calls = u32::try_from(o.calls).unwrap_or(u32::MAX).max(1);
            let at = start + arrive.saturating_mul(nth) / calls;
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until(at.into()).await;
                let began = start.elapsed();
                let grant = limiter.acquire().await.expect("granted");
                served.lock().expect("lock").push(began);
                supplier.call(hold).await;
                drop(grant);
            }));
        }
    }
    for task in tasks {
        task.await.expect("call");
    }
    let took = start.elapsed();
    // The releases are tasks of their own: wait until every one was answered.
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        let done: u64 = limiters
            .iter()
            .map(|l| {
                let m = l.metrics().in_flight;
                m.released + m.leases_lost
            })
            .sum();
        if done >= o.calls as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let trips: u64 = limiters.iter().map(|l| l.metrics().round_trips).sum();
    // Out of order: a call granted before one that began waiting earlier (within a ms, the
    // machine decides).
    let served = served.lock().expect("lock").clone();
    let overtaken = served
        .windows(2)
        .filter(|w| w[1] + Duration::from_millis(1) < w[0])
        .count();
    (supplier.most.load(Relaxed), trips, overtaken, took)
}

fn main() {
    let o = Options::parse();
    let (_server, url, mut con) = o.server.start();
    let runtime = runtime().expect("a tokio runtime");
    println!(
        "{} {:?}, {} calls held {} ms each, {}, cap {}, {}, {}",
        o.server.flavor.name(),
        o.backend,
        o.calls,
        o.hold_ms,
        if o.arrive_ms == 0 {
            "all at once".to_owned()
        } else {
            format!("arriving over {} ms", o.arrive_ms)
        },
        o.cap,
        if o.several {
            "two buckets a call (MultiLimiter)"
        } else {
            "one bucket a call"
        },
        if o.not_listening {
            "not listening"
        } else {
            "listening"
        }
    );
    // The shortest the calls can take: the cap's rounds of `hold_ms` each, or the last call's
    // arrival and its hold, whichever is longer.
    let rounds = o
        .calls
        .div_ceil(usize::try_from(o.cap.max(1)).unwrap_or(usize::MAX));
    let hold = Duration::from_millis(o.hold_ms);
    let calls = u32::try_from(o.calls).unwrap_or(u32::MAX).max(1);
    let last = Duration::from_millis(o.arrive_ms).saturating_mul(calls - 1) / calls;
    let shortest = hold
        .saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
        .max(last + hold);
    println!(
        "processes  commands/call  round trips/call  most open  served out of order  took/shortest"
    );
    for &procs in &o.procs {
        let key = format!("line-bench:{procs}");
        reset_stats(&mut con).unwrap_or_else(|e| panic!("{e}"));
        let (most, trips, overtaken, took) = runtime.block_on(fleet(&url, &key, &o, procs));
        let commands = throttle_commands(&mut con);
        let calls = o.calls as f64;
        println!(
            "{procs:>9}  {:>13.2}  {:>16.2}  {most:>9}  {overtaken:>19}  {:>13.2}",
            commands as f64 / calls,
            trips as f64 / calls,
            took.as_secs_f64() / shortest.as_secs_f64().max(f64::MIN_POSITIVE),
        );
    }
}
