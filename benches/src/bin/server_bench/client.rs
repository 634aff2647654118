//! Client: the limiter's overhead over a bare THROTTLE.TAKE without contention (interleaved
//! batches, so a shared machine's drift hits both alike); and many concurrent waiters on one
//! key, each taking tokens through a `Limiter`, once with the reservation strategy and once with
//! polling. THROTTLE.TAKE round trips per granted call are counted on the server (INFO
//! commandstats) and by the client (`Grant::round_trips`).

use redis_throttle::prelude::*;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::Value;
use redis_throttle::{Grant, Limiter, Quota, Rate, Strategy};
use throttle_benches::{acquire_take, commandstats, median, reset_stats, runtime};
use throttle_testkit::Server;

use crate::Options;

/// Concurrent waiters on the one key.
const WAITERS: usize = 64;
/// The quota they share: a burst of 10, 100 per second.
const CAPACITY: u64 = 10;
const RATE: u64 = 100;
/// Longest one strategy's run may take before it is abandoned.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

struct Row {
    strategy: &'static str,
    grants: u64,
    server_calls: u64,
    client_round_trips: u64,
    elapsed: Duration,
    waits: Vec<f64>,
}

/// `acquire()` on an uncontended bucket against the bare command it sends, in alternating
/// batches: per-call latency of each, and the median of the per-round ratios.
pub fn overhead(options: &Options, server: &Server) -> Result<String, String> {
    let (rounds, batch) = if options.quick { (5, 300) } else { (61, 700) };
    let (capacity, rate) = (1_000_000u64, 1_000_000_000u64);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let client = redis::Client::open(server.url()).map_err(|e| e.to_string())?;
    let quota = Quota::new(capacity, Rate::per_second(rate)).map_err(|e| e.to_string())?;
    let samples = runtime.block_on(async {
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let limiter = Limiter::new(conn.clone(), "bench:overhead:limiter", quota);
        let bare = acquire_take("bench:overhead:bare", capacity, rate)?;
        // (wall us, client CPU us) per call. The runtime is single-threaded, so this thread's
        // CPU time is all the client does: encoding, the connection's driver, the limiter.
        let per_call = |started: Instant, cpu: u64| {
            let cpu_ns = thread_cpu_ns().saturating_sub(cpu);
            (
                started.elapsed().as_secs_f64() * 1e6 / batch as f64,
                cpu_ns as f64 / 1e3 / batch as f64,
            )
        };
        let run_bare = || async {
            let (started, cpu) = (Instant::now(), thread_cpu_ns());
            for _ in 0..batch {
                let mut conn = conn.clone();
                let _: Value = bare
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(per_call(started, cpu))
        };
        let run_acquire = || async {
            let (started, cpu) = (Instant::now(), thread_cpu_ns());
            for _ in 0..batch {
                let grant = limiter.acquire().await.map_err(|e| e.to_string())?;
                if grant.round_trips != 1 || !grant.slept.is_zero() {
                    return Err(format!("uncontended acquire waited: {grant:?}"));
                }
            }
            Ok::<_, String>(per_call(started, cpu))
        };
        run_bare().await?; // warm-up
        run_acquire().await?;
        // Per round: (bare wall, acquire wall, bare CPU, acquire CPU).
        let mut samples = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let (b, a) = if round % 2 == 0 {
                let b = run_bare().await?;
                (b, run_acquire().await?)
            } else {
                let a = run_acquire().await?;
                (run_bare().await?, a)
            };
            samples.push([b.0, a.0, b.1, a.1]);
        }
        Ok::<_, String>(samples)
    })?;
    let column = |i: usize| samples.iter().map(|s| s[i]).collect::<Vec<f64>>();
    let ratios = |a: usize, b: usize| samples.iter().map(|s| s[a] / s[b]).collect::<Vec<f64>>();
    let (bare, acquire, ratio) = (
        median(&column(0)),
        median(&column(1)),
        median(&ratios(1, 0)),
    );
    let (bare_cpu, acquire_cpu) = (median(&column(2)), median(&column(3)));
    let cpu_ratio = median(&ratios(3, 2));
    eprintln!(
        "overhead bare {bare:.1} us, acquire {acquire:.1} us, ratio {ratio:.3}; \
         client CPU {bare_cpu:.2} vs {acquire_cpu:.2} us, ratio {cpu_ratio:.3}"
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Client overhead: acquire() without contention vs the bare command, {rounds} \
         alternating rounds of {batch} sequential calls\n"
    );
    let _ = writeln!(
        out,
        "| call | wall us per call | x bare | client CPU us per call | x bare |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| bare `THROTTLE.TAKE ... MAXWAIT ms TICKET` (redis-rs) | {bare:.1} | 1.000 | \
         {bare_cpu:.2} | 1.000 |"
    );
    let _ = writeln!(
        out,
        "| `Limiter::acquire()` (same command) | {acquire:.1} | {ratio:.3} | {acquire_cpu:.2} \
         | {cpu_ratio:.3} |"
    );
    let spread = |v: &[f64]| {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        format!("{min:.3}..{max:.3}")
    };
    let _ = writeln!(
        out,
        "\nMedians; x bare is the median of the per-round ratios (wall range {}, CPU range {}). \
         Client CPU is the time the single-threaded runtime's thread ran \
         (/proc/thread-self/schedstat): the client's own work, unaffected by the server and \
         the network.",
        spread(&ratios(1, 0)),
        spread(&ratios(3, 2))
    );
    Ok(out)
}

pub fn waiters(options: &Options, server: &Server) -> Result<String, String> {
    let per_waiter = if options.quick { 1 } else { 4 };
    let runtime = runtime().map_err(|e| format!("tokio runtime: {e}"))?;
    let client = redis::Client::open(server.url()).map_err(|e| e.to_string())?;
    let quota = Quota::new(CAPACITY, Rate::per_second(RATE)).map_err(|e| e.to_string())?;
    let mut con = server.conn();

    let mut rows = Vec::new();
    for (name, strategy) in [
        ("Reserve (default)", Strategy::Reserve),
        ("Poll (20 ms jitter)", Strategy::poll()),
    ] {
        reset_stats(&mut con)?;
        let key = format!("bench:waiters:{}", rows.len());
        let started = Instant::now();
        let grants: Vec<Grant> = runtime.block_on(async {
            let conn = client
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let limiter = Limiter::builder(key, quota.clone())
                .strategy(strategy)
                .build(conn)
                .map_err(|e| e.to_string())?;
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..WAITERS {
                let limiter = limiter.clone();
                tasks.spawn(async move {
                    let mut grants = Vec::with_capacity(per_waiter);
                    for _ in 0..per_waiter {
                        grants.push(limiter.acquire().await.map_err(|e| e.to_string())?);
                    }
                    Ok::<_, String>(grants)
                });
            }
            let all = async {
                let mut grants = Vec::new();
                while let Some(joined) = tasks.join_next().await {
                    grants.extend(joined.map_err(|e| e.to_string())??);
                }
                Ok::<_, String>(grants)
            };
            tokio::time::timeout(RUN_TIMEOUT, all)
                .await
                .map_err(|_| format!("{name}: not done within {RUN_TIMEOUT:?}"))?
        })?;
        let elapsed = started.elapsed();

        let server_calls = commandstats(&mut con)?
            .get("throttle.take")
            .map_or(0, |s| s.calls);
        let row = Row {
            strategy: name,
            grants: grants.len() as u64,
            server_calls,
            client_round_trips: grants.iter().map(|g| u64::from(g.round_trips)).sum(),
            elapsed,
            waits: grants
                .iter()
                .map(|g| g.waited.as_secs_f64() * 1e3)
                .collect(),
        };
        eprintln!(
            "waiters {:<20} {} grants, {} THROTTLE.TAKE calls, {:.2} s",
            row.strategy,
            row.grants,
            row.server_calls,
            row.elapsed.as_secs_f64()
        );
        rows.push(row);
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Client: {WAITERS} concurrent waiters on one key (burst {CAPACITY}, {RATE}/s), \
         {per_waiter} acquire() each\n"
    );
    let _ = writeln!(
        out,
        "| strategy | grants | THROTTLE.TAKE calls (server) | round trips per grant | \
         client-counted | elapsed s | granted/s | median wait ms | max wait ms |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let grants = row.grants.max(1) as f64;
        let secs = row.elapsed.as_secs_f64();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} |",
            row.strategy,
            row.grants,
            row.server_calls,
            row.server_calls as f64 / grants,
            row.client_round_trips as f64 / grants,
            secs,
            row.grants as f64 / secs,
            median(&row.waits),
            row.waits.iter().copied().fold(0.0, f64::max),
        );
    }
    let _ = writeln!(
        out,
        "\nThe quota allows {CAPACITY} at once and {RATE}/s after that: the ideal elapsed time \
         for {} grants is {:.2} s.",
        WAITERS * per_waiter,
        (WAITERS * per_waiter) as f64 / RATE as f64 - CAPACITY as f64 / RATE as f64
    );
    Ok(out)
}

/// CPU time this thread has run, in ns (Linux: /proc/thread-self/schedstat); 0 if unknown.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
