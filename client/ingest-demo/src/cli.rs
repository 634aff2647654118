//! Command-line flags: the demo's knobs, and the hidden subcommands the demo starts its
//! worker processes with.

use clap::{Args, Parser, Subcommand};
use demo_support::child::ChildArgs;
use demo_support::output::OutputArgs;
use serde::Serialize;

/// The Rate Limiting pattern's ingestion example: 10 000 records of 10 RU each into a
/// database provisioned for 20 000 RU/s, by 3 worker processes. Phase 1 sends them all and
/// retries what is refused; phase 2 queues them in a redis-throttle backlog (two streams,
/// one shared bucket) and drains it at the quota; phase 3 does the same and SIGKILLs a
/// worker mid-run; phase 4 drains it at bulk priority beside interactive queries on the same
/// bucket, first without a floor, then with one.
#[derive(Debug, Parser)]
#[command(name = "ingest-demo", version, args_conflicts_with_subcommands = true)]
#[command(mut_arg("chart", |chart| chart.help(
    "Where to write the SVG chart [default: target/ingest-demo/flow.svg]"
)))]
pub struct Cli {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// A phase-1 worker: sends its records at once and retries what is refused.
    #[command(hide = true)]
    RetryWorker(ChildArgs),
    /// A phase-2/3/4 worker: drains the backlog's streams through the shared bucket.
    #[command(hide = true)]
    BacklogWorker(ChildArgs),
}

#[derive(Debug, Clone, Args, Serialize)]
pub struct RunArgs {
    /// Records to ingest, 10 RU each (half in queue A, half in queue B in phases 2 and 3).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(10..=100_000))]
    pub records: u32,
    /// Worker processes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=8))]
    pub workers: u32,
    /// Phases to run (1: retry on error, 2: backlog, 3: backlog with a worker killed, 4: the
    /// backlog at bulk priority beside interactive queries); repeat the flag for several
    /// [default: all four].
    #[arg(long = "phase", value_parser = clap::value_parser!(u8).range(1..=4))]
    pub phases: Vec<u8>,
    /// How long a record read by a worker may sit unacknowledged before another worker takes
    /// it over (the backlog's `claim_idle`), in ms.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub claim_idle_ms: u64,
    /// Request units the shared bucket keeps under the database's burst (its capacity is
    /// 20 000 minus this; the rate is the database's). A write reaches the database a trip
    /// after its tokens are granted, and trips vary: with no margin a write that travels
    /// faster than the first one can find the database's bucket a fraction of a ms short.
    /// 200 RU covers 10 ms of variation.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub margin_ru: u64,
    /// Phase 4: the request units the bulk load leaves in the shared bucket for the
    /// interactive queries (`Priority::Bulk { floor }`). 100 RU is 10 queries at once: a
    /// burst of them (or a stalled query service catching up) finds its tokens there, and
    /// the refill puts them back in 5 ms; the bulk load never uses them, 5 ms of its run.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(10..=10_000))]
    pub floor_ru: u64,
    /// The server binary to start privately, e.g. one tests/install-servers.sh put under
    /// ~/.cache/redis-throttle/servers [default: redis-server, Debian's Redis 7.0].
    #[arg(long, value_name = "PATH")]
    pub server: Option<std::path::PathBuf>,
    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,
}

impl RunArgs {
    pub fn runs(&self, phase: u8) -> bool {
        self.phases.is_empty() || self.phases.contains(&phase)
    }
}
