//! `throttle status` over many quotas (issue 29's target: 10 000 quotas in under a second):
//! a private server with the module (the test kit), `--quotas` buckets and as many report
//! lines (one process reporting each quota), then the `throttle` binary's `status` timed
//! `--reps` times, against a plain `SCAN MATCH throttle:report:* COUNT 1000` of the same keys
//! on the same server in the same run (the least any `status` must do). Prints the medians and
//! their ratio.
//!
//! ```sh
//! cargo build --release -p redis-throttle-module -p redis-throttle-cli
//! cargo run --release -p throttle-benches --bin status-bench -- [--quotas 10000] [--reps 3]
//! ```
//!
//! The binary is `throttle` beside this one (`target/<profile>/throttle`; `THROTTLE_BIN`
//! overrides it), the module the kit's (`target/<profile>/libredis_throttle_module.so`;
//! `THROTTLE_MODULE` overrides it). The time of `status` is the whole process: start, connect,
//! the backend check, the SCAN and MGET of the reports, the pipelined PEEKs, the table.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use redis_throttle::report::{report_key, Report};
use throttle_benches::{at_least_one, ServerOption};

/// Commands per pipeline while writing.
const BATCH: usize = 1000;
/// The buckets' quota: one take of 500 leaves the key for 50 000 s (it expires when full).
const CAPACITY: u64 = 1000;
const RATE: &str = "0.01";

/// The command line (`--help` prints it). The binary is `target/<profile>/throttle`
/// (`THROTTLE_BIN` overrides it); build it with `cargo build --release -p redis-throttle-cli`.
#[derive(Parser)]
#[command(
    name = "status-bench",
    about = "throttle status over many quotas against a plain SCAN",
    mut_arg("flavor", |a| a.default_value("redis-7.0"))
)]
struct Options {
    #[command(flatten)]
    server: ServerOption,
    /// Buckets and report lines written.
    #[arg(long, default_value_t = 10_000, value_parser = at_least_one)]
    quotas: usize,
    /// Timed runs of each.
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    reps: usize,
}

/// The `throttle` binary beside this one, or `$THROTTLE_BIN`.
fn throttle_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("THROTTLE_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let me = std::env::current_exe().expect("this binary's path");
    let bin = me.with_file_name("throttle");
    if !bin.is_file() {
        eprintln!(
            "{} is missing: build it with cargo build --release -p redis-throttle-cli (or set THROTTLE_BIN)",
            bin.display()
        );
        std::process::exit(1)
    }
    bin
}

/// Writes `quotas` buckets (`quota:bench:N`) and one process's report of each.
fn fill(con: &mut redis::Connection, quotas: usize) {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let keys: Vec<String> = (0..quotas).map(|i| format!("quota:bench:{i:05}")).collect();
    for chunk in keys.chunks(BATCH) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("THROTTLE.TAKE")
                .arg(key)
                .arg(CAPACITY)
                .arg(RATE)
                .arg("TOKENS")
                .arg(500)
                .ignore();
            let mut report = Report::default();
            report.key.clone_from(key);
            report.process = "bench-1".to_owned();
            report.at_ms = now_ms;
            report.period_ms = 5000;
            report.capacity = CAPACITY;
            report.rate = RATE.to_owned();
            pipe.cmd("SET")
                .arg(report_key(key, &report.process))
                .arg(report.encode())
                .arg("PX")
                .arg(3_600_000)
                .ignore();
        }
        pipe.query::<()>(con)
            .expect("write the buckets and the reports");
    }
}

/// A plain SCAN of every report key: how many.
fn scan_reports(con: &mut redis::Connection) -> usize {
    let mut cursor: u64 = 0;
    let mut found = 0;
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("throttle:report:*")
            .arg("COUNT")
            .arg(BATCH)
            .query(con)
            .expect("SCAN");
        found += keys.len();
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn s(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn main() {
    let o = Options::parse();
    let bin = throttle_bin();
    let (_server, url, mut con) = o.server.start();
    let start = Instant::now();
    fill(&mut con, o.quotas);
    println!(
        "{}: {} buckets and {} report lines written in {}",
        o.server.flavor.name(),
        o.quotas,
        o.quotas,
        s(start.elapsed())
    );

    let mut status_times = Vec::new();
    let mut scan_times = Vec::new();
    for rep in 1..=o.reps {
        let start = Instant::now();
        let output = Command::new(&bin)
            .args(["--url", &url, "status"])
            .output()
            .expect("run throttle status");
        let took = start.elapsed();
        assert!(
            output.status.success(),
            "throttle status failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let rows = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|l| l.starts_with("quota:bench:"))
            .count();
        assert_eq!(rows, o.quotas, "status printed {rows} rows");

        let start = Instant::now();
        let found = scan_reports(&mut con);
        let scan = start.elapsed();
        assert_eq!(found, o.quotas);
        println!(
            "run {rep}: throttle status {} ({rows} rows); SCAN alone {}",
            s(took),
            s(scan)
        );
        status_times.push(took);
        scan_times.push(scan);
    }
    let (status, scan) = (median(status_times), median(scan_times));
    println!(
        "median of {}: throttle status over {} quotas {} ({}); plain SCAN of the reports {}; ratio {:.1}x",
        o.reps,
        o.quotas,
        s(status),
        bin.display(),
        s(scan),
        status.as_secs_f64() / scan.as_secs_f64().max(1e-9)
    );
    println!(
        "target (under 1 s): {}",
        if status < Duration::from_secs(1) {
            "met"
        } else {
            "NOT met"
        }
    );
}
