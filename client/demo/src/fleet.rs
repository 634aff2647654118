//! The demo's side of the replicas in one phase: what each is told (the plan, as JSON on its
//! command line), and their reports, collected. Each replica is a separate OS process (this same executable,
//! `replica` subcommand), started, held to one start instant and read through
//! `demo_support::fleet`.

use std::time::Duration;

use demo_support::child::command_lines;
use demo_support::fleet::Fleet;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::cli::{BackendArg, Phase, StrategyArg};
use crate::wire::{CallRecord, ReplicaMessage, ReplicaStats};

/// From "all ready" to the start: time for the start line to reach every replica.
const START_LEAD: Duration = Duration::from_millis(500);
/// Slack on top of the longest wait for the last reports and the exits.
const FINISH_SLACK: Duration = Duration::from_secs(30);

/// What every replica of a phase is told: on its command line, as JSON (`replica --plan`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub phase: Phase,
    pub replicas: u32,
    pub calls: u32,
    pub upstream: String,
    pub integrator: String,
    pub redis_url: String,
    pub key: String,
    pub capacity: u64,
    pub rate: f64,
    pub strategy: StrategyArg,
    pub backend: BackendArg,
    /// Longest a call may wait for its token.
    pub max_wait: Duration,
    /// A 429 only pauses, and how long a cut takes to recover.
    pub no_cut: bool,
    pub cut_recovery: Duration,
    pub no_pause_check: bool,
    pub no_listen: bool,
    /// Sustained: `calls` workers per replica, for this long.
    pub duration: Option<Duration>,
    /// A cap on the fleet's calls in flight.
    pub max_in_flight: Option<u64>,
}

/// A phase as the replicas saw it.
#[derive(Debug)]
pub struct FleetRun {
    /// The shared start, as this process's instant.
    pub start: Instant,
    pub records: Vec<CallRecord>,
    /// Each replica's limiter counters, in replica order.
    pub stats: Vec<ReplicaStats>,
}

/// Runs the phase; `on_start` learns the shared start instant as soon as it is set (what
/// runs beside the fleet starts from it).
pub async fn run(plan: &Plan, on_start: impl FnOnce(Instant)) -> Result<FleetRun, String> {
    let count = plan.replicas as usize;
    let arg_lists = command_lines("replica", std::iter::repeat_n(plan, count))?;
    let mut replicas = Fleet::spawn("replica", arg_lists).await?;
    let start_at = replicas.start(START_LEAD).await?;
    on_start(start_at);

    let done_by = start_at + plan.duration.unwrap_or_default() + plan.max_wait + FINISH_SLACK;
    let (mut records, mut stats) = (Vec::new(), Vec::new());
    // Each replica's calls (as many as it made), then its counters.
    let done = |m: &ReplicaMessage| matches!(m, ReplicaMessage::Done(_));
    for message in replicas.reports(done_by, done).await? {
        match message {
            ReplicaMessage::Call(record) => records.push(record),
            ReplicaMessage::Done(counters) => stats.push(counters),
            ReplicaMessage::Ready => {}
        }
    }
    if plan.duration.is_none() && records.len() != (plan.replicas * plan.calls) as usize {
        return Err(format!(
            "the replicas reported {} calls of {}",
            records.len(),
            plan.replicas * plan.calls
        ));
    }
    Ok(FleetRun {
        start: start_at,
        records,
        stats,
    })
}
