//! The scenario: one mock upstream, then the same fleet twice, first calling it directly,
//! then through one shared bucket in Redis.

use redis_throttle::prelude::*;
use std::time::{Duration, Instant};

use demo_support::mock_server::until_full;
use demo_support::redis_server::{connect_async, run_id};
use redis_throttle::redis::aio::ConnectionManager;
use redis_throttle::{Limiter, Quota, Rate};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cli::{Phase, RunArgs};
use crate::fleet::{self, Plan};
use crate::open_calls::OpenChange;
use crate::theory;
use crate::upstream::{Arrival, Upstream, UpstreamConfig, INTEGRATOR_HEADER};
use crate::wire::{CallRecord, ReplicaStats};

/// How often the demo looks at the shared bucket (`THROTTLE.PEEK`) during the bucket phase.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// The other application's calls carry ids `O000000`, `O000001`, ... (no replica's).
pub const OTHER_APP_PREFIX: &str = "O";

/// The shared bucket as the demo saw it at one instant.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// From the shared start.
    pub t_s: f64,
    /// The bucket's rate now, in basis points of the configured one.
    pub factor_bp: u16,
    /// Paused for a millisecond or more.
    pub paused: bool,
}

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
    /// The fleet's calls, in arrival order.
    pub arrivals: Vec<Arrival>,
    /// The other application's, in arrival order.
    pub other_arrivals: Vec<Arrival>,
    /// The bucket's rate and pause, every [`SAMPLE_EVERY`] (bucket phase only).
    pub samples: Vec<Sample>,
    /// The supplier's count of the integrator's calls open, at every change (empty when it
    /// neither limits them nor has a slow spell).
    pub open_log: Vec<OpenChange>,
}

impl PhaseOutcome {
    /// Seconds from the shared start to `at` (0 for an instant before it).
    pub fn since_start(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }
}

pub struct Outcome {
    pub upstream_url: String,
    pub key: String,
    pub phases: Vec<PhaseOutcome>,
}

/// Runs both phases. `interval` is the shared bucket's time per token, as the server
/// computes it.
pub async fn run(args: &RunArgs, redis_url: &str, interval: Duration) -> Result<Outcome, String> {
    let upstream = Upstream::start_with(UpstreamConfig {
        mode: args.upstream_mode,
        quota: args.quota,
        retry_after: !args.no_retry_after,
        headers: args.supplier_headers,
        max_open: args.supplier_max_open(),
        slow: args.slow_spell(),
    })
    .await
    .map_err(|e| format!("cannot start the mock upstream: {e}"))?;
    let bare = match args.no_retry_after {
        true => ", no Retry-After",
        false => "",
    };
    let count = match args.supplier_headers {
        true => "; X-RateLimit-Remaining on every answer",
        false => "",
    };
    let (url, rule) = (upstream.url(), args.upstream_mode.rule(args.quota));
    eprintln!("pix-demo: mock API on {url}: {rule} (429 above it{bare}{count})");
    if args.watches_open_calls() {
        eprintln!(
            "pix-demo: the supplier's calls open at once {}",
            args.supplier_rules()
        );
    }
    // A key of its own per run (it expires by itself once full again).
    let key = format!("pix-demo:{}:{INTEGRATOR}:status", run_id());
    // With the pauses the supplier's 429s ask for, on an ideal machine.
    let ideal = theory::ideal_bucket_phase(args, interval).last();

    let duration = args.run_for();
    let mut phases = Vec::with_capacity(2);
    for &phase in args.phases() {
        until_full(upstream.full_in(INTEGRATOR)).await;
        match duration {
            None => eprintln!(
                "pix-demo: {}: {} replicas fire {} calls each at the same instant...",
                phase.title(),
                args.replicas,
                args.calls
            ),
            Some(d) => eprintln!(
                "pix-demo: {}: {} replicas keep {} calls each going for {d:?}...",
                phase.title(),
                args.replicas,
                args.workers
            ),
        }
        let plan = Plan {
            phase,
            upstream: upstream.url(),
            integrator: INTEGRATOR.to_owned(),
            redis_url: redis_url.to_owned(),
            key: key.clone(),
            // Twice the ideal, plus slack: enough for polling on a busy machine, and a bound;
            // plus the slow spell, which calls may wait out behind slow ones.
            max_wait: if duration.is_some() {
                Duration::from_secs(30)
            } else {
                ideal * 2 + Duration::from_secs(10)
            } + args.slow_spell().map_or(Duration::ZERO, |spell| {
                Duration::from_secs_f64(spell.until_s)
            }),
            args: args.clone(),
        };
        let watcher = match phase {
            Phase::Bucket => Some(watcher(args, redis_url, &key).await?),
            Phase::Direct => None,
        };
        let (stop, stopped) = watch::channel(false);
        let mut beside: Vec<JoinHandle<Vec<Sample>>> = Vec::new();
        let run = fleet::run(&plan, |start| {
            let start = start.into_std();
            upstream.begin_phase(start);
            if let Some(rate) = args.other_app {
                let until = args.other_app_stop_after.map(Duration::from_secs_f64);
                let url = upstream.url();
                let stopped = stopped.clone();
                beside.push(tokio::spawn(async move {
                    other_app(url, rate, start, until, stopped).await;
                    Vec::new()
                }));
            }
            if let Some(limiter) = watcher {
                beside.push(tokio::spawn(sample(limiter, start, stopped.clone())));
            }
        })
        .await;
        let _ = stop.send(true);
        let mut samples = Vec::new();
        for task in beside {
            samples.extend(task.await.unwrap_or_default());
        }
        let run = run?;
        let (other_arrivals, arrivals) = upstream
            .take_log()
            .into_iter()
            .partition(|a| a.id.starts_with(OTHER_APP_PREFIX));
        let open_log = upstream.take_open_log(INTEGRATOR);
        phases.push(PhaseOutcome {
            phase,
            start: run.start.into_std(),
            records: run.records,
            stats: run.stats,
            arrivals,
            other_arrivals,
            samples,
            open_log,
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

/// A limiter on the fleet's bucket for the demo itself: it only looks (`peek`).
async fn watcher(
    args: &RunArgs,
    redis_url: &str,
    key: &str,
) -> Result<Limiter<ConnectionManager>, String> {
    let quota = Quota::new(args.capacity, Rate::from_f64(args.rate)).map_err(|e| e.to_string())?;
    let conn = connect_async(redis_url).await?;
    Limiter::builder(key, quota)
        .backend(args.backend.to_backend())
        .name("pix-demo watcher")
        .build(conn)
        .map_err(|e| e.to_string())
}

/// Looks at the bucket every [`SAMPLE_EVERY`] from `start` until told to stop.
async fn sample(
    limiter: Limiter<ConnectionManager>,
    start: Instant,
    mut stopped: watch::Receiver<bool>,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval_at(start.into(), SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return samples,
        }
        let at = Instant::now();
        if let Ok(Ok(state)) = tokio::time::timeout(Duration::from_secs(1), limiter.peek()).await {
            samples.push(Sample {
                t_s: at.saturating_duration_since(start).as_secs_f64(),
                factor_bp: state.factor_bp,
                paused: state.paused_for.as_millis() > 0,
            });
        }
    }
}

/// Another application of the same integrator, without the limiter: `rate` calls per
/// second at even intervals from `start`, each on its own task (a slow answer does not
/// delay the next), until `until` after the start or until told to stop. It takes its part
/// of the supplier's quota and never hears of the fleet's bucket.
async fn other_app(
    url: String,
    rate: f64,
    start: Instant,
    until: Option<Duration>,
    mut stopped: watch::Receiver<bool>,
) {
    if !(rate > 0.0 && rate.is_finite()) {
        return;
    }
    let Ok(client) = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
    else {
        return;
    };
    let every = Duration::from_secs_f64(1.0 / rate);
    let mut n: u32 = 0;
    loop {
        let at = start + every * n;
        if until.is_some_and(|until| at >= start + until) {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {}
            _ = stopped.changed() => return,
        }
        let request = client
            .get(format!("{url}/pix/{OTHER_APP_PREFIX}{n:06}/status"))
            .header(INTEGRATOR_HEADER, INTEGRATOR);
        tokio::spawn(async move {
            if let Ok(response) = request.send().await {
                let _ = response.bytes().await;
            }
        });
        n = n.wrapping_add(1);
    }
}
