//! `pix-demo`: the PIX-status scenario redis-throttle exists for. Two replicas of a bank's
//! service (separate processes) each query 20 PIX statuses at the same moment from an API
//! that allows 10 per second per integrator: first directly, then through one shared bucket
//! in Redis. Prints a table per phase and writes a timeline chart.
//!
//! Everything it starts (the private Redis, the mock API, the replicas) stops when it ends,
//! also on an error or Ctrl-C.

mod chart;
mod cli;
mod fleet;
mod limit;
mod redis_server;
mod replica;
mod report;
mod scenario;
mod theory;
mod upstream;
mod wire;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use redis_throttle::{Quota, Rate};

use crate::chart::ChartSpec;
use crate::cli::{Cli, Command, RunArgs};
use crate::redis_server::RedisTarget;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Replica(args)) => replica::main(args),
        None => demo(&cli.run),
    }
}

fn demo(args: &RunArgs) -> ExitCode {
    if args.replicas.saturating_mul(args.calls) > cli::MAX_CALLS {
        eprintln!(
            "pix-demo: {} replicas x {} calls is more than {} calls in all: lower --replicas or --calls",
            args.replicas,
            args.calls,
            cli::MAX_CALLS
        );
        return ExitCode::from(2);
    }
    // Checked by the server's own rules before anything starts.
    let quota = match Quota::new(args.capacity, Rate::from_f64(args.rate)) {
        Ok(quota) => quota,
        Err(err) => {
            eprintln!("pix-demo: {err}");
            return ExitCode::from(2);
        }
    };
    let interval = quota.token_interval();

    // Started on the main thread, which lives as long as the process: the server's
    // parent-death signal follows the thread that started it.
    let redis = match RedisTarget::open(args.redis_url.clone(), args.backend) {
        Ok(redis) => redis,
        Err(err) => {
            eprintln!("pix-demo: {err}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("pix-demo: Redis: {}", redis.description());

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("pix-demo: no tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let url = redis.url().to_owned();
    let redis_description = redis.description().to_owned();
    let module_loaded = redis.module_loaded();
    let result = runtime.block_on(async {
        let signal = stop_signal();
        tokio::pin!(signal);
        tokio::select! {
            biased;
            signal = &mut signal => Err(signal),
            outcome = scenario::run(args, &url, interval) => match outcome {
                Ok(outcome) => Ok(Ok(outcome)),
                // Ctrl-C in a terminal reaches the replicas too, and their end can be seen
                // before our own signal: look for it briefly before calling it a failure.
                Err(err) => match tokio::time::timeout(Duration::from_millis(500), &mut signal).await {
                    Ok(signal) => Err(signal),
                    Err(_) => Ok(Err(err)),
                },
            },
        }
    });
    // Dropping the scenario's future killed the replicas; now the runtime, then Redis.
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(redis);

    let outcome = match result {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(err)) => {
            eprintln!("pix-demo: {err}");
            return ExitCode::FAILURE;
        }
        Err((name, code)) => {
            eprintln!("pix-demo: {name}: stopped, and stopped everything it had started");
            return ExitCode::from(code);
        }
    };

    let chart_path = args.chart.clone().unwrap_or_else(default_chart_path);
    let mut summary = report::summarize(
        args,
        &redis_description,
        module_loaded,
        interval,
        &outcome,
        None,
    );
    let spec = ChartSpec {
        heading: report::heading(args),
        mode: args.upstream_mode,
        quota: args.quota,
        capacity: args.capacity,
        rate: args.rate,
        notes: report::explanations(&summary),
    };
    let svg = chart::render(&spec, &report::chart_series(&outcome, &summary));
    match write_chart(&chart_path, &svg) {
        Ok(()) => {
            let shown = std::path::absolute(&chart_path).unwrap_or(chart_path);
            summary.chart = Some(shown.display().to_string());
        }
        Err(err) => eprintln!("pix-demo: cannot write the chart: {err}"),
    }

    let text = report::text(&summary);
    if args.json {
        eprint!("{text}");
        match serde_json::to_string_pretty(&summary) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("pix-demo: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{text}");
    }
    ExitCode::SUCCESS
}

/// Waits for Ctrl-C, SIGTERM or SIGHUP; gives the signal's name and the exit code a shell
/// would report for it.
async fn stop_signal() -> (&'static str, u8) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        eprintln!("pix-demo: cannot watch for signals; Ctrl-C may leave the Redis server running");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => ("interrupted", 130),
        _ = terminate.recv() => ("terminated", 143),
        _ = hangup.recv() => ("hung up", 129),
    }
}

/// `target/pix-demo/timeline.svg` in the workspace's target dir: the one this binary was
/// built into (`target/<profile>/pix-demo`), or `$CARGO_TARGET_DIR`.
fn default_chart_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            let target = exe.parent()?.parent()?;
            target
                .join("CACHEDIR.TAG")
                .is_file()
                .then(|| target.to_path_buf())
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("pix-demo").join("timeline.svg")
}

fn write_chart(path: &Path, svg: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg)
}
