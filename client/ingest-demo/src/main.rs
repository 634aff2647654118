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
use crate::phases::backlog::{backlog_phase, BacklogSummary};
use crate::phases::priority::{priority_phase, PrioritySummary};
use crate::phases::retry::{retry_phase, RetrySummary};
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
        None => demo(&cli.run),
    }
}

struct Phases {
    database: String,
    retry: Option<RetrySummary>,
    backlog: Option<BacklogSummary>,
    kill: Option<BacklogSummary>,
    priority: Option<PrioritySummary>,
}

fn demo(args: &RunArgs) -> ExitCode {
    // Started on the main thread, which lives as long as the process: the server's
    // parent-death signal follows the thread that started it.
    let redis = match PrivateRedis::start(args.server.as_deref(), true, RUN_SH) {
        Ok(redis) => redis,
        Err(err) => {
            eprintln!("{PROGRAM}: {err}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("{PROGRAM}: Redis: {}", redis.description());
    let phases = match run_until_stopped(PROGRAM, scenario(args, redis.url())) {
        Ok(phases) => phases,
        Err(code) => return code,
    };
    let redis_description = redis.description().to_owned();
    // The workers and the database are gone: now Redis.
    drop(redis);

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
        priority: phases.priority,
        chart: None,
    };
    summary.chart = args
        .output
        .save_chart(PROGRAM, "flow.svg", &chart::render(&summary));
    args.output
        .print(PROGRAM, &report::text(&summary), &summary)
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
        Some(retry_phase(&env).await?)
    } else {
        None
    };
    let backlog = if args.runs(2) {
        Some(backlog_phase(&env, false).await?)
    } else {
        None
    };
    let kill = if args.runs(3) {
        Some(backlog_phase(&env, true).await?)
    } else {
        None
    };
    let priority = if args.runs(4) {
        Some(priority_phase(&env).await?)
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
        priority,
    })
}
