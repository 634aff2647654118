//! The demo's side of the replicas in one phase: what each is told (the plan, as JSON on its
//! command line), and their reports, collected. Each replica is a separate OS process (this
//! same executable, `replica` subcommand), started, held to one start instant and read
//! through `demo_support::fleet`.

use std::time::Duration;

use demo_support::child::command_lines;
use demo_support::fleet::Fleet;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::cli::{Phase, RunArgs};
use crate::wire::{CallRecord, ReplicaMessage, ReplicaStats};

/// From "all ready" to the start: time for the start line to reach every replica.
const START_LEAD: Duration = Duration::from_millis(500);
/// Slack on top of the longest wait for the last reports and the exits.
const FINISH_SLACK: Duration = Duration::from_secs(30);

/// What every replica of a phase is told: on its command line, as JSON (`replica --plan`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub phase: Phase,
    pub upstream: String,
    pub integrator: String,
    pub redis_url: String,
    pub key: String,
    /// Longest a call may wait for its token.
    pub max_wait: Duration,
    /// The scenario's knobs.
    pub args: RunArgs,
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
    let (count, calls) = (plan.args.replicas as usize, plan.args.calls_per_replica());
    let arg_lists = command_lines("replica", std::iter::repeat_n(plan, count))?;
    let mut replicas = Fleet::spawn("replica", arg_lists).await?;
    let start_at = replicas.start(START_LEAD).await?;
    on_start(start_at);

    let done_by = start_at + plan.args.run_for().unwrap_or_default() + plan.max_wait + FINISH_SLACK;
    let (mut records, mut stats) = (Vec::new(), Vec::new());
    // Each replica's calls (as many as it made), then its counters.
    let done = |m: &ReplicaMessage| matches!(m, ReplicaMessage::Done(_));
    for message in replicas.reports(done_by, done).await? {
        match message {
            ReplicaMessage::Call(record) => records.push(record),
            ReplicaMessage::Done(counters) => stats.push(counters),
        }
    }
    if plan.args.duration.is_none() && records.len() != count * calls as usize {
        return Err(format!(
            "the replicas reported {} calls of {}",
            records.len(),
            count * calls as usize
        ));
    }
    Ok(FleetRun {
        start: start_at,
        records,
        stats,
    })
}
