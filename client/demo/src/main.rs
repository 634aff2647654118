//! `pix-demo`: the PIX-status scenario (docs/demos.md). Replicas of a bank's service query an
//! API that allows 10 per second per integrator, directly and then through one shared bucket;
//! a table per phase and a timeline chart. Everything it starts stops when it ends, also on an
//! error or Ctrl-C.

mod chart;
mod cli;
mod fleet;
mod limit;
mod open_calls;
mod redis_target;
mod replica;
mod report;
mod scenario;
mod theory;
mod upstream;
mod wire;

use std::process::ExitCode;

use clap::Parser;
use demo_support::until_stopped::run_until_stopped;
use redis_throttle::{Quota, Rate};

use crate::cli::{Cli, Command, RunArgs};
use crate::redis_target::RedisTarget;
use crate::report::summary::summarize;
use crate::report::text::text;

const PROGRAM: &str = "pix-demo";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Replica(args)) => replica::main(args),
        None => demo(&cli.run).unwrap_or_else(|code| code),
    }
}

/// Says `err` on stderr; `code` to exit with (2: knobs that do not fit, nothing started).
fn fail(code: u8, err: impl std::fmt::Display) -> ExitCode {
    eprintln!("{PROGRAM}: {err}");
    ExitCode::from(code)
}

fn demo(args: &RunArgs) -> Result<ExitCode, ExitCode> {
    let (replicas, calls, most) = (args.replicas, args.calls, cli::MAX_CALLS);
    if replicas.saturating_mul(calls) > most {
        let err = format!("{replicas} replicas x {calls} calls is more than {most} calls in all");
        return Err(fail(2, err + ": lower --replicas or --calls"));
    }
    if let Some(Err(err)) = args.slow_spell().map(|spell| spell.check()) {
        return Err(fail(2, err));
    }
    // Checked by the server's own rules before anything starts.
    let quota = Quota::new(args.capacity, Rate::from_f64(args.rate)).map_err(|e| fail(2, e))?;
    let interval = quota.token_interval();

    // Started on the main thread, which lives as long as the process: the server's
    // parent-death signal follows the thread that started it.
    let redis = RedisTarget::open(args.redis_url.clone(), args.backend).map_err(|e| fail(1, e))?;
    eprintln!("{PROGRAM}: Redis: {}", redis.description);
    let outcome = run_until_stopped(PROGRAM, scenario::run(args, &redis.url, interval))?;
    let (redis_description, module_loaded) = (redis.description.to_owned(), redis.module_loaded);
    // The replicas and the mock are gone: now Redis.
    drop(redis);

    let mut summary = summarize(
        args,
        &redis_description,
        module_loaded,
        interval,
        &outcome,
        None,
    );
    let per_second = summary.pushback.as_ref().filter(|_| summary.show_pushback);
    let svg = chart::render(args, per_second, &chart::chart_series(&outcome, &summary));
    summary.chart = args.output.save_chart(PROGRAM, "timeline.svg", &svg);
    Ok(args.output.print(PROGRAM, &text(&summary, args), &summary))
}
