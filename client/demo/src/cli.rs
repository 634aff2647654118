//! Command-line flags: the scenario's knobs, and the hidden `replica` subcommand the demo
//! uses to start its replicas as separate processes.

use clap::{Args, Parser, Subcommand, ValueEnum};
use demo_support::child::ChildArgs;
use demo_support::output::OutputArgs;
use serde::{Deserialize, Serialize};

use crate::limit::UpstreamMode;
use crate::open_calls::SlowSpell;

/// The PIX-status scenario: replicas of a bank's service query a central-bank style API that
/// allows 10 status queries per second per integrator, first directly, then through one
/// shared redis-throttle bucket.
#[derive(Debug, Parser)]
#[command(name = "pix-demo", version, args_conflicts_with_subcommands = true)]
#[command(mut_arg("chart", |chart| chart.help(
    "Where to write the SVG timeline [default: target/pix-demo/timeline.svg]"
)))]
pub struct Cli {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// One replica of the bank's service (started by the demo itself).
    #[command(hide = true)]
    Replica(ChildArgs),
}

/// The scenario's knobs.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct RunArgs {
    /// Replicas of the bank's service, each a separate OS process.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub replicas: u32,
    /// PIX status queries each replica fires at once (at most 400 in all: each has a
    /// connection of its own, and file descriptors are limited).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=400))]
    pub calls: u32,
    /// The shared bucket's burst, in calls.
    #[arg(long, default_value_t = 8)]
    pub capacity: u64,
    /// The shared bucket's refill, in calls per second (a decimal, e.g. 9 or 4.5).
    #[arg(long, default_value_t = 9.0)]
    pub rate: f64,
    /// What the upstream API allows per integrator: calls per second.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub quota: u32,
    /// How the upstream enforces its quota: a bucket of `quota` refilling at `quota` per
    /// second, or a strict sliding window of `quota` calls in any one second.
    #[arg(long, value_enum, default_value_t = UpstreamMode::Bucket)]
    pub upstream_mode: UpstreamMode,
    /// The upstream's 429 carries no `Retry-After`, as nginx's `limit_req` with
    /// `limit_req_status 429` sends it: the replicas pause the fleet for 1 s.
    #[arg(long)]
    pub no_retry_after: bool,
    /// The upstream tells every caller what is left of its allowance, computed from its own
    /// limit: `X-RateLimit-Remaining` and `X-RateLimit-Reset` (to the ms) on every answer.
    /// The replicas lower the shared bucket to it (`THROTTLE.SYNC`), as the HTTP layers do.
    #[arg(long)]
    pub supplier_headers: bool,
    /// Another application of the same integrator, without the limiter, sends this many
    /// requests per second to the upstream, sharing its quota (from the start of each phase).
    #[arg(long, value_name = "RATE")]
    pub other_app: Option<f64>,
    /// The other application stops this many seconds after the start.
    #[arg(long, value_name = "SECS", requires = "other_app")]
    pub other_app_stop_after: Option<f64>,
    /// A 429 only pauses the fleet (`THROTTLE.PAUSE`); by default it also cuts the bucket's
    /// rate to 0.7, climbing back over `--cut-recovery` (`THROTTLE.CUT`, as the HTTP layers).
    #[arg(long)]
    pub no_cut: bool,
    /// How long a cut rate takes to climb back to the configured one, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub cut_recovery: f64,
    /// A reserved call is sent at its slot without looking at the bucket first; by default
    /// it PEEKs after its sleep and waits out a pause another replica set meanwhile.
    #[arg(long)]
    pub no_pause_check: bool,
    /// Each replica asks the bucket (one THROTTLE.PEEK after a reserved sleep) instead of
    /// hearing its pauses announced on a subscription of its own.
    #[arg(long)]
    pub no_listen: bool,
    /// Sustained load instead of one burst: for SECS seconds each replica keeps `--workers`
    /// calls going, one after another (`--calls` is then unused), and only the bucket phase
    /// runs.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Calls each replica keeps in flight with `--duration`.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,
    /// How a replica waits for a token: one reservation and one sleep, or polling
    /// [default: reserve; poll with `--upstream-mode window`, so that a 429's pause stops
    /// every call at once without the look before sending each reservation makes].
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyArg>,
    /// A cap on the fleet's calls in flight: every replica's limiter gets
    /// `max_in_flight(N)`, so each call holds one of N slots of the shared bucket, taken with
    /// its token, until its answer is read; a call that finds them all held waits for one.
    /// The bucket phase only (direct calls have no limiter). 0: no cap.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub max_in_flight: u64,
    /// The supplier allows at most N calls open at once per integrator and answers one more
    /// with a 429 (refused for concurrency, counted apart from the rate's). 0: no limit.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub supplier_max_open: u32,
    /// The supplier's slow spell starts this many seconds after each phase's start: until
    /// `--slow-until` every call it serves takes `--slow-min-ms` to `--slow-max-ms`.
    #[arg(long, value_name = "SECS", requires = "slow_until")]
    pub slow_from: Option<f64>,
    /// The supplier's slow spell ends this many seconds after each phase's start.
    #[arg(long, value_name = "SECS", requires = "slow_from")]
    pub slow_until: Option<f64>,
    /// The shortest a call takes in the slow spell, in ms.
    #[arg(long, value_name = "MS", default_value_t = 400)]
    pub slow_min_ms: u64,
    /// The longest a call takes in the slow spell, in ms (at most 5000: a replica gives up on
    /// an answer after 10 s).
    #[arg(long, value_name = "MS", default_value_t = 800,
          value_parser = clap::value_parser!(u64).range(1..=5_000))]
    pub slow_max_ms: u64,
    /// Where the bucket's commands run: the module, the Lua script (EVALSHA; the private
    /// Redis is then started without the module, as on a managed Redis that refuses MODULE
    /// LOAD), or auto (the module if the server has it, else the script).
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Use this Redis server instead of starting a private one (with `--backend module` it
    /// must have the module loaded).
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,
}

impl RunArgs {
    /// The supplier's limit on calls open at once, its slow spell and the bucket phase's cap:
    /// "(at most 4, a 429 for concurrency above; slow from 0 s to 3 s, 400 to 800 ms a call);
    /// the bucket phase: a cap of 4 calls in flight (max_in_flight)".
    pub fn supplier_rules(&self) -> String {
        let limit = self
            .supplier_max_open()
            .map_or("no limit on them".to_owned(), |n| {
                format!("at most {n}, a 429 for concurrency above")
            });
        let spell = self.slow_spell().map_or("no slow spell".to_owned(), |s| {
            let (from, until) = (s.from_s, s.until_s);
            format!(
                "slow from {from} s to {until} s, {} to {} ms a call",
                s.min_ms, s.max_ms
            )
        });
        let cap = self
            .max_in_flight()
            .map_or("no cap on calls in flight".to_owned(), |n| {
                format!("a cap of {n} calls in flight (max_in_flight)")
            });
        format!("({limit}; {spell}); the bucket phase: {cap}")
    }

    /// Calls each replica makes at once: `--calls`, or with `--duration` its `--workers`.
    pub fn calls_per_replica(&self) -> u32 {
        if self.duration.is_some() {
            self.workers
        } else {
            self.calls
        }
    }

    /// How long a sustained run goes on.
    pub fn run_for(&self) -> Option<std::time::Duration> {
        self.duration.map(std::time::Duration::from_secs_f64)
    }

    /// Calls in all, across replicas (planned: a sustained run makes as many as it can).
    pub fn total_calls(&self) -> u64 {
        u64::from(self.replicas) * u64::from(self.calls)
    }

    /// The phases to run: both, or only the bucket for a sustained run.
    pub fn phases(&self) -> &'static [Phase] {
        if self.duration.is_some() {
            &[Phase::Bucket]
        } else {
            &[Phase::Direct, Phase::Bucket]
        }
    }

    /// The cap on the fleet's calls in flight, if there is one.
    pub fn max_in_flight(&self) -> Option<u64> {
        (self.max_in_flight > 0).then_some(self.max_in_flight)
    }

    /// The supplier's limit on calls open at once, if it has one.
    pub fn supplier_max_open(&self) -> Option<u32> {
        (self.supplier_max_open > 0).then_some(self.supplier_max_open)
    }

    /// The supplier's slow spell, if there is one (`SlowSpell::check` says whether it can be).
    pub fn slow_spell(&self) -> Option<SlowSpell> {
        Some(SlowSpell {
            from_s: self.slow_from?,
            until_s: self.slow_until?,
            min_ms: self.slow_min_ms,
            max_ms: self.slow_max_ms,
        })
    }

    /// Whether the run is about calls open at once: the report then shows them.
    pub fn watches_open_calls(&self) -> bool {
        self.max_in_flight().is_some()
            || self.supplier_max_open().is_some()
            || self.slow_spell().is_some()
    }

    /// The strategy the replicas use: the one given, else reserve, except against a strict
    /// window, which refuses the default bucket's burst: there the supplier's 429 must stop
    /// the whole fleet at once, and a pause never moves a reservation already granted, so
    /// the replicas poll (they hold no slot while they wait).
    pub fn strategy(&self) -> StrategyArg {
        self.strategy.unwrap_or(match self.upstream_mode {
            UpstreamMode::Bucket => StrategyArg::Reserve,
            UpstreamMode::Window => StrategyArg::Poll,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StrategyArg {
    Reserve,
    Poll,
}

impl StrategyArg {
    pub fn to_strategy(self) -> redis_throttle::Strategy {
        match self {
            StrategyArg::Reserve => redis_throttle::Strategy::Reserve,
            StrategyArg::Poll => redis_throttle::Strategy::poll(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendArg {
    Module,
    Script,
    Auto,
}

impl BackendArg {
    pub fn to_backend(self) -> redis_throttle::Backend {
        match self {
            BackendArg::Module => redis_throttle::Backend::Module,
            BackendArg::Script => redis_throttle::Backend::Script,
            BackendArg::Auto => redis_throttle::Backend::Auto,
        }
    }
}

/// A flag's value as the command line writes it: `reserve`, `script`.
pub fn arg_name(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_owned())
}

/// Sends per call in the bucket phase, the first included: a 429 pauses the bucket, and the
/// call acquires again and is sent again, at most this many times in all.
pub const MAX_ATTEMPTS: u32 = 5;

/// Calls in all, across replicas: one open connection each, well under the usual limit
/// of 1024 file descriptors per process.
pub const MAX_CALLS: u32 = 400;

/// The two phases of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Every replica calls the API as soon as it wants to.
    Direct,
    /// Every call first takes a token from the shared bucket.
    Bucket,
}

impl Phase {
    pub fn title(self) -> &'static str {
        match self {
            Phase::Direct => "phase 1: direct",
            Phase::Bucket => "phase 2: shared bucket",
        }
    }
}
