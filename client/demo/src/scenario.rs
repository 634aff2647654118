//! The scenario: one mock upstream, then the same fleet twice, first calling it directly,
//! then through one shared bucket in Redis.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cli::{Phase, RunArgs};
use crate::fleet::{self, Plan};
use crate::theory;
use crate::upstream::{Arrival, Upstream};
use crate::wire::{CallRecord, ReplicaStats};

/// The bank's integrator id at the central bank: the unit the upstream's quota counts in.
pub const INTEGRATOR: &str = "bank-0001";

/// One phase: what the replicas measured and what the upstream saw.
pub struct PhaseOutcome {
    pub phase: Phase,
    /// The instant every replica fired, on this process's clock, which is also the
    /// upstream's: the origin of every time in the report and the chart.
    pub start: Instant,
    pub records: Vec<CallRecord>,
    /// Each replica's limiter counters.
    pub stats: Vec<ReplicaStats>,
    /// In arrival order.
    pub arrivals: Vec<Arrival>,
}

pub struct Outcome {
    pub upstream_url: String,
    pub key: String,
    pub phases: Vec<PhaseOutcome>,
}

/// Runs both phases. `interval` is the shared bucket's time per token, as the server
/// computes it.
pub async fn run(args: &RunArgs, redis_url: &str, interval: Duration) -> Result<Outcome, String> {
    let upstream = Upstream::start(args.upstream_mode, args.quota)
        .await
        .map_err(|e| format!("cannot start the mock upstream: {e}"))?;
    eprintln!(
        "pix-demo: mock API on {}: {} (429 above it)",
        upstream.url(),
        args.upstream_mode.rule(args.quota)
    );
    // A key of its own per run: a bucket left by an earlier run (or on a shared server)
    // cannot skew this one, and it expires by itself once full again.
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let key = format!(
        "pix-demo:{}-{run_id}:{INTEGRATOR}:status",
        std::process::id()
    );
    // With the pauses the supplier's 429s ask for, on an ideal machine.
    let ideal = theory::ideal_bucket_phase(args, interval).last();

    let mut phases = Vec::with_capacity(2);
    for phase in [Phase::Direct, Phase::Bucket] {
        // Each phase meets the upstream with its whole allowance, as after a quiet moment.
        let quiet = upstream.full_in(INTEGRATOR);
        if !quiet.is_zero() {
            tokio::time::sleep(quiet.min(Duration::from_secs(5)) + Duration::from_millis(50)).await;
        }
        eprintln!(
            "pix-demo: {}: {} replicas fire {} calls each at the same instant...",
            phase.title(),
            args.replicas,
            args.calls
        );
        let plan = Plan {
            phase,
            replicas: args.replicas,
            calls: args.calls,
            upstream: upstream.url(),
            integrator: INTEGRATOR.to_owned(),
            redis_url: redis_url.to_owned(),
            key: key.clone(),
            capacity: args.capacity,
            rate: args.rate,
            strategy: args.strategy(),
            backend: args.backend,
            // Twice the ideal, plus slack: enough for polling on a busy machine, and a bound.
            max_wait: ideal * 2 + Duration::from_secs(10),
        };
        let run = fleet::run(&plan).await?;
        phases.push(PhaseOutcome {
            phase,
            start: run.start.into_std(),
            records: run.records,
            stats: run.stats,
            arrivals: upstream.take_log(),
        });
    }
    let upstream_url = upstream.url();
    upstream.stop().await;
    Ok(Outcome {
        upstream_url,
        key,
        phases,
    })
}
