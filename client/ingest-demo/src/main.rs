//! `ingest-demo`: the cloud Rate Limiting pattern's example, 10 000 records of 10 RU into a
//! database of 20 000 RU/s by 3 worker processes, in four phases (`phases`): retry on error,
//! a backlog, a backlog with a worker killed, bulk beside interactive queries. Prints a table
//! per phase and writes a chart; docs/demos.md tells the story. Everything it starts stops
//! when it ends, also on an error or Ctrl-C.

mod chart;
mod cli;
mod db;
mod phases;
mod report;
mod wire;
mod worker;

use std::process::ExitCode;

use clap::Parser;
use demo_support::redis_server::PrivateRedis;
use demo_support::until_stopped::run_until_stopped;

use crate::cli::{Cli, Command, RunArgs};
use crate::db::{Database, RU_PER_WRITE};
use crate::phases::backlog::backlog_phase;
use crate::phases::priority::priority_phase;
use crate::phases::retry::retry_phase;
use crate::phases::{Env, CAPACITY_RU, RATE_RU};
use crate::report::Summary;

const PROGRAM: &str = "ingest-demo";
/// The script that builds the module and installs the server, for the errors.
const RUN_SH: &str = "client/ingest-demo/run.sh";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::RetryWorker(args)) => worker::retry_main(args),
        Some(Command::BacklogWorker(args)) => worker::backlog_main(args),
        None => demo(&cli.run).unwrap_or_else(|code| code),
    }
}

fn demo(args: &RunArgs) -> Result<ExitCode, ExitCode> {
    // Started on the main thread, which lives as long as the process: the server's
    // parent-death signal follows the thread that started it.
    let redis = PrivateRedis::start(args.server.as_deref(), true, RUN_SH).map_err(|err| {
        eprintln!("{PROGRAM}: {err}");
        ExitCode::FAILURE
    })?;
    eprintln!("{PROGRAM}: Redis: {}", redis.description());
    let mut summary = run_until_stopped(PROGRAM, scenario(args, redis.url()))?;
    summary.redis = redis.description().to_owned();
    // The workers and the database are gone: now Redis.
    drop(redis);
    let svg = chart::render(&summary);
    summary.chart = args.output.save_chart(PROGRAM, "flow.svg", &svg);
    Ok(args
        .output
        .print(PROGRAM, &report::text(&summary), &summary))
}

/// The phases `--phase` asks for, against one mock database.
async fn scenario(args: &RunArgs, redis_url: &str) -> Result<Summary, String> {
    let db = Database::start(CAPACITY_RU, RATE_RU)
        .await
        .map_err(|e| format!("cannot start the mock database: {e}"))?;
    eprintln!(
        "ingest-demo: mock database on {}: {CAPACITY_RU} RU refilling at {RATE_RU} RU/s, \
         {RU_PER_WRITE} RU a write (429 above it)",
        db.url()
    );
    let env = Env::new(args, redis_url, &db);
    let mut summary = Summary {
        redis: String::new(),
        database: db.url(),
        records: u64::from(args.records),
        ru_per_record: RU_PER_WRITE,
        capacity_ru: CAPACITY_RU,
        rate_ru_per_s: RATE_RU,
        retry: None,
        backlog: None,
        kill: None,
        priority: None,
        chart: None,
    };
    if args.runs(1) {
        summary.retry = Some(retry_phase(&env).await?);
    }
    if args.runs(2) {
        summary.backlog = Some(backlog_phase(&env, false).await?);
    }
    if args.runs(3) {
        summary.kill = Some(backlog_phase(&env, true).await?);
    }
    if args.runs(4) {
        summary.priority = Some(priority_phase(&env).await?);
    }
    db.stop().await;
    Ok(summary)
}
