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
        None => demo(&cli.run),
    }
}

fn demo(args: &RunArgs) -> ExitCode {
    if args.replicas.saturating_mul(args.calls) > cli::MAX_CALLS {
        eprintln!(
            "{PROGRAM}: {} replicas x {} calls is more than {} calls in all: lower --replicas or --calls",
            args.replicas,
            args.calls,
            cli::MAX_CALLS
        );
        return ExitCode::from(2);
    }
    if let Some(Err(err)) = args.slow_spell().map(|spell| spell.check()) {
        eprintln!("{PROGRAM}: {err}");
        return ExitCode::from(2);
    }
    // Checked by the server's own rules before anything starts.
    let quota = match Quota::new(args.capacity, Rate::from_f64(args.rate)) {
        Ok(quota) => quota,
        Err(err) => {
            eprintln!("{PROGRAM}: {err}");
            return ExitCode::from(2);
        }
    };
    let interval = quota.token_interval();

    // Started on the main thread, which lives as long as the process: the server's
    // parent-death signal follows the thread that started it.
    let redis = match RedisTarget::open(args.redis_url.clone(), args.backend) {
        Ok(redis) => redis,
        Err(err) => {
            eprintln!("{PROGRAM}: {err}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("{PROGRAM}: Redis: {}", redis.description);
    let outcome = match run_until_stopped(PROGRAM, scenario::run(args, &redis.url, interval)) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
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
    args.output.print(PROGRAM, &text(&summary, args), &summary)
}
