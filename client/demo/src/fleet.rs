//! The demo's side of the replicas in one phase: what each is told (its command line), and
//! their reports, collected. Each replica is a separate OS process (this same executable,
//! `replica` subcommand), started, held to one start instant and read through
//! `demo_support::fleet`.

use std::time::Duration;

use demo_support::fleet::Fleet;
use tokio::time::Instant;

use crate::cli::{BackendArg, Phase, StrategyArg};
use crate::wire::{CallRecord, ReplicaMessage, ReplicaStats};

/// From "all ready" to the start: time for the start line to reach every replica.
const START_LEAD: Duration = Duration::from_millis(500);
/// Slack on top of the longest wait for the last reports and the exits.
const FINISH_SLACK: Duration = Duration::from_secs(30);

/// What every replica of a phase is told.
#[derive(Debug, Clone)]
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
    let arg_lists = (0..plan.replicas).map(|index| args(plan, index)).collect();
    let mut replicas = Fleet::<ReplicaMessage>::spawn("replica", arg_lists).await?;
    let start_at = replicas.start(START_LEAD).await?;
    on_start(start_at);

    let done_by = start_at + plan.duration.unwrap_or_default() + plan.max_wait + FINISH_SLACK;
    let mut records = Vec::with_capacity((plan.replicas * plan.calls) as usize);
    let mut stats = Vec::with_capacity(plan.replicas as usize);
    // Each replica's calls (as many as it made), then its counters.
    for index in replicas.live() {
        loop {
            match replicas.next(index, done_by).await? {
                ReplicaMessage::Call(record) => records.push(record),
                ReplicaMessage::Done(done) => {
                    stats.push(done);
                    break;
                }
                other => return Err(format!("replica {index} sent {other:?} mid-run")),
            }
        }
    }
    if plan.duration.is_none() && records.len() != (plan.replicas * plan.calls) as usize {
        return Err(format!(
            "the replicas reported {} calls of {}",
            records.len(),
            plan.replicas * plan.calls
        ));
    }
    replicas.wait(done_by).await?;
    Ok(FleetRun {
        start: start_at,
        records,
        stats,
    })
}

/// Replica `index`'s command line.
fn args(plan: &Plan, index: u32) -> Vec<String> {
    let mut args = vec![
        "replica".to_owned(),
        format!("--index={index}"),
        format!("--phase={}", phase_arg(plan.phase)),
        format!("--upstream={}", plan.upstream),
        format!("--integrator={}", plan.integrator),
        format!("--calls={}", plan.calls),
        format!("--max-wait-ms={}", plan.max_wait.as_millis()),
    ];
    if plan.phase == Phase::Bucket {
        args.extend([
            format!("--redis-url={}", plan.redis_url),
            format!("--key={}", plan.key),
            format!("--capacity={}", plan.capacity),
            format!("--rate={}", plan.rate),
            format!("--strategy={}", plan.strategy.name()),
            format!("--backend={}", plan.backend.name()),
            format!("--cut-recovery-ms={}", plan.cut_recovery.as_millis()),
        ]);
        if plan.no_cut {
            args.push("--no-cut".to_owned());
        }
        if plan.no_pause_check {
            args.push("--no-pause-check".to_owned());
        }
        if plan.no_listen {
            args.push("--no-listen".to_owned());
        }
        if let Some(cap) = plan.max_in_flight {
            args.push(format!("--max-in-flight={cap}"));
        }
    }
    if let Some(duration) = plan.duration {
        args.push(format!("--duration-ms={}", duration.as_millis()));
    }
    args
}

fn phase_arg(phase: Phase) -> &'static str {
    match phase {
        Phase::Direct => "direct",
        Phase::Bucket => "bucket",
    }
}
