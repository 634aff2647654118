//! `ingest-demo`: the cloud Rate Limiting pattern's example. 10 000 records of 10 request
//! units go into a database provisioned for 20 000 RU/s, written by 3 worker processes:
//!
//! 1. sent all at once and retried on error: the database refuses most of them, and the
//!    job sends about three times the records it lands;
//! 2. pushed into a redis-throttle backlog (two streams, queues A and B) and drained
//!    through one shared bucket of 20 000 RU at 20 000 RU/s: nothing refused, and the
//!    finish time is known before the start;
//! 3. the same with one worker SIGKILLed mid-run: its records are claimed by the others
//!    and every record is stored exactly once.
//!
//! Prints a table per phase and writes the "rate-limited flow" chart. Everything it starts
//! (the private Redis, the mock database, the workers) stops when it ends, also on an error
//! or Ctrl-C.

mod chart;
mod cli;
mod db;
mod fleet;
mod phases;
mod redis_server;
mod report;
mod wire;
mod worker;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::cli::{Cli, Command, RunArgs};
use crate::db::{Database, RU_PER_WRITE};
use crate::phases::{BacklogSummary, Env, RetrySummary, CAPACITY_RU, RATE_RU};
use crate::report::Summary;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::RetryWorker(args)) => worker::retry_main(args),
        Some(Command::BacklogWorker(args)) => worker::backlog_main(args),
        None => demo(&cli.run),
    }
}

struct Phases {
    database: String,
    retry: Option<RetrySummary>,
    backlog: Option<BacklogSummary>,
    kill: Option<BacklogSummary>,
}

fn demo(args: &RunArgs) -> ExitCode {
    // Started on the main thread, which lives as long as the process: the server's
    // parent-death signal follows the thread that started it.
    let redis = match redis_server::start(args.server.map(|s| s.flavor())) {
        Ok(redis) => redis,
        Err(err) => {
            eprintln!("ingest-demo: {err}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("ingest-demo: Redis: {}", redis.description);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("ingest-demo: no tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        tokio::select! {
            biased;
            signal = stop_signal() => Err(signal),
            outcome = scenario(args, &redis.url) => Ok(outcome),
        }
    });
    // Dropping the scenario killed the workers; now the runtime (and the database), then Redis.
    runtime.shutdown_timeout(Duration::from_secs(2));
    let redis_description = redis.description.clone();
    drop(redis);

    let phases = match result {
        Ok(Ok(phases)) => phases,
        Ok(Err(err)) => {
            eprintln!("ingest-demo: {err}");
            return ExitCode::FAILURE;
        }
        Err((name, code)) => {
            eprintln!("ingest-demo: {name}: stopped, and stopped everything it had started");
            return ExitCode::from(code);
        }
    };

    let mut summary = Summary {
        redis: redis_description,
        database: phases.database,
        records: u64::from(args.records),
        ru_per_record: RU_PER_WRITE,
        capacity_ru: CAPACITY_RU,
        rate_ru_per_s: RATE_RU,
        retry: phases.retry,
        backlog: phases.backlog,
        kill: phases.kill,
        chart: None,
    };
    let chart_path = args.chart.clone().unwrap_or_else(default_chart_path);
    match write_chart(&chart_path, &render_chart(&summary)) {
        Ok(()) => {
            let shown = std::path::absolute(&chart_path).unwrap_or(chart_path);
            summary.chart = Some(shown.display().to_string());
        }
        Err(err) => eprintln!("ingest-demo: cannot write the chart: {err}"),
    }
    let text = report::text(&summary);
    if args.json {
        eprint!("{text}");
        match serde_json::to_string_pretty(&summary) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("ingest-demo: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{text}");
    }
    ExitCode::SUCCESS
}

async fn scenario(args: &RunArgs, redis_url: &str) -> Result<Phases, String> {
    let db = Database::start(CAPACITY_RU, RATE_RU)
        .await
        .map_err(|e| format!("cannot start the mock database: {e}"))?;
    eprintln!(
        "ingest-demo: mock database on {}: {CAPACITY_RU} RU refilling at {RATE_RU} RU/s, \
         {RU_PER_WRITE} RU a write (429 above it)",
        db.url()
    );
    let env = Env::new(args, redis_url, &db);
    let retry = if args.runs(1) {
        Some(phases::retry_phase(&env).await?)
    } else {
        None
    };
    let backlog = if args.runs(2) {
        Some(phases::backlog_phase(&env, false).await?)
    } else {
        None
    };
    let kill = if args.runs(3) {
        Some(phases::backlog_phase(&env, true).await?)
    } else {
        None
    };
    let database = db.url();
    db.stop().await;
    Ok(Phases {
        database,
        retry,
        backlog,
        kill,
    })
}

fn render_chart(summary: &Summary) -> String {
    let mut panels = Vec::new();
    if let Some(r) = &summary.retry {
        panels.push(chart::Panel {
            title: format!(
                "{}: {} sent, {} refused, all stored after {:.2} s",
                r.title, r.sent, r.refused, r.time_s
            ),
            points: r.points.clone(),
            mark: None,
        });
    }
    for b in [&summary.backlog, &summary.kill].into_iter().flatten() {
        panels.push(chart::Panel {
            title: format!(
                "{}: {} sent, {} refused, {} duplicates, finished at {:.2} s (predicted {:.2} s)",
                b.title, b.sent, b.refused, b.duplicates, b.finish_s, b.predicted_s
            ),
            points: b.points.clone(),
            mark: b
                .kill
                .as_ref()
                .map(|k| (k.at_s, format!("worker {} SIGKILLed", k.worker))),
        });
    }
    let per_bin = RATE_RU as f64 / RU_PER_WRITE as f64 * 0.1;
    chart::render(
        &format!(
            "Rate-limited flow: {} records of {RU_PER_WRITE} RU into {RATE_RU} RU/s, writes per 100 ms",
            summary.records
        ),
        per_bin,
        &panels,
    )
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
        eprintln!(
            "ingest-demo: cannot watch for signals; Ctrl-C may leave the Redis server running"
        );
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => ("interrupted", 130),
        _ = terminate.recv() => ("terminated", 143),
        _ = hangup.recv() => ("hung up", 129),
    }
}

/// `target/ingest-demo/flow.svg` in the target dir this binary was built into, or
/// `$CARGO_TARGET_DIR`.
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
    target.join("ingest-demo").join("flow.svg")
}

fn write_chart(path: &Path, svg: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg)
}
