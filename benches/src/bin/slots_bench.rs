//! What a cap on calls in flight costs the server (issue 28): a call's slot taken with its
//! token (`THROTTLE.TAKE ... INFLIGHT n LEASE ms`) and freed when it ends
//! (`THROTTLE.RELEASE`), beside a plain `THROTTLE.TAKE` and `INCR`, on one private server with
//! the module, in the same run. Each phase sends the same number of calls from the same
//! connections (each connection one call at a time, as a client's callers do), after a
//! `CONFIG RESETSTAT`; the server's own time per call comes from `INFO commandstats`
//! (`usec_per_call`), the ratios from the same repetition, the figure the median of the
//! repetitions.
//!
//! ```sh
//! cargo build --release -p redis-throttle-module
//! cargo run --release -p throttle-benches --bin slots-bench -- [--server redis-8.2] [--calls 20000] [--reps 3]
//! ```
//!
//! The module is the kit's (`target/<profile>/libredis_throttle_module.so`; `THROTTLE_MODULE`
//! overrides it).

use clap::Parser;
use redis::aio::MultiplexedConnection;
use throttle_benches::{at_least_one, commandstats, reset_stats, runtime, ServerOption};

/// A bucket that grants every call: a million tokens, a billion a second.
const QUOTA: [&str; 2] = ["1000000", "1000000000"];
/// The cap: above the connections, so every acquire is granted.
const CAP: u64 = 64;
const LEASE_MS: u64 = 10_000;

/// The command line (`--help` prints it).
#[derive(Parser)]
#[command(
    name = "slots-bench",
    about = "A call's slot beside THROTTLE.TAKE and INCR: server us/call",
    mut_arg("flavor", |a| a.default_value("redis-8.2"))
)]
struct Options {
    #[command(flatten)]
    server: ServerOption,
    /// Calls per phase.
    #[arg(long, default_value_t = 20_000, value_parser = at_least_one)]
    calls: usize,
    /// Connections, each one call at a time.
    #[arg(long, default_value_t = 8, value_parser = at_least_one)]
    conns: usize,
    /// Repetitions.
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    reps: usize,
}

/// What one connection sends per call in a phase.
#[derive(Clone, Copy)]
enum Phase {
    Incr,
    Take,
    /// TAKE ... INFLIGHT, then RELEASE of the slot it got.
    AcquireRelease,
}

async fn one_call(conn: &mut MultiplexedConnection, phase: Phase, key: &str) {
    match phase {
        Phase::Incr => {
            let _: i64 = redis::cmd("INCR").arg(key).query_async(conn).await.unwrap();
        }
        Phase::Take => {
            let reply: Vec<i64> = redis::cmd("THROTTLE.TAKE")
                .arg(key)
                .arg(&QUOTA)
                .query_async(conn)
                .await
                .unwrap();
            assert_eq!(reply[0], 1, "granted");
        }
        Phase::AcquireRelease => {
            let reply: Vec<i64> = redis::cmd("THROTTLE.TAKE")
                .arg(key)
                .arg(&QUOTA)
                .arg("INFLIGHT")
                .arg(CAP)
                .arg("LEASE")
                .arg(LEASE_MS)
                .query_async(conn)
                .await
                .unwrap();
            assert_eq!(reply[0], 1, "granted with a slot");
            let freed: i64 = redis::cmd("THROTTLE.RELEASE")
                .arg(key)
                .arg(&QUOTA)
                .arg(reply[4])
                .query_async(conn)
                .await
                .unwrap();
            assert_eq!(freed, 1, "the slot was held");
        }
    }
}

/// `calls` calls of `phase` from `conns` connections at once, on one hot key.
async fn run(url: &str, phase: Phase, calls: usize, conns: usize) {
    let key = match phase {
        Phase::Incr => "bench:incr",
        Phase::Take => "bench:take",
        Phase::AcquireRelease => "bench:slots",
    };
    let client = redis::Client::open(url).unwrap();
    let tasks: Vec<_> = (0..conns)
        .map(|i| {
            let client = client.clone();
            let share = calls / conns + usize::from(i < calls % conns);
            tokio::spawn(async move {
                let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                for _ in 0..share {
                    one_call(&mut conn, phase, key).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// `usec_per_call` of each command in `INFO commandstats`.
fn usec_per_call(con: &mut redis::Connection, command: &str) -> f64 {
    commandstats(con)
        .unwrap_or_else(|e| panic!("{e}"))
        .get(command)
        .map(|stat| stat.usec_per_call)
        .unwrap_or_else(|| panic!("no usec_per_call for {command} in INFO commandstats"))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let o = Options::parse();
    let (_server, url, mut con) = o.server.start();
    let runtime = runtime().expect("a tokio runtime");
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("INCR", vec![]),
        ("THROTTLE.TAKE", vec![]),
        ("THROTTLE.TAKE ... INFLIGHT 64 LEASE 10000", vec![]),
        ("THROTTLE.RELEASE", vec![]),
        ("acquire + release", vec![]),
    ];
    let mut ratios: Vec<(&str, Vec<f64>)> = vec![
        ("acquire / TAKE", vec![]),
        ("acquire + release / TAKE", vec![]),
        ("acquire + release / INCR", vec![]),
    ];
    for _ in 0..o.reps {
        let mut phase = |phase: Phase, commands: &[&str]| -> Vec<f64> {
            reset_stats(&mut con).unwrap_or_else(|e| panic!("{e}"));
            runtime.block_on(run(&url, phase, o.calls, o.conns));
            commands
                .iter()
                .map(|c| usec_per_call(&mut con, c))
                .collect()
        };
        let incr = phase(Phase::Incr, &["incr"])[0];
        let take = phase(Phase::Take, &["throttle.take"])[0];
        let pair = phase(
            Phase::AcquireRelease,
            &["throttle.take", "throttle.release"],
        );
        let (acquire, release) = (pair[0], pair[1]);
        for (row, value) in rows
            .iter_mut()
            .zip([incr, take, acquire, release, acquire + release])
        {
            row.1.push(value);
        }
        for (row, value) in ratios.iter_mut().zip([
            acquire / take,
            (acquire + release) / take,
            (acquire + release) / incr,
        ]) {
            row.1.push(value);
        }
    }
    println!(
        "{}: server us/call (INFO commandstats), {} calls per phase from {} connections, \
         median of {} repetitions",
        o.server.flavor.name(),
        o.calls,
        o.conns,
        o.reps
    );
    println!("| command | server us/call |");
    println!("|---|---|");
    for (name, values) in rows {
        println!("| {name} | {:.3} |", median(values));
    }
    println!();
    println!("| ratio (same repetition) | median |");
    println!("|---|---|");
    for (name, values) in ratios {
        println!("| {name} | {:.2} |", median(values));
    }
}
