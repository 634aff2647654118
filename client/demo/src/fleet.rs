//! The demo's side of the replicas: starts each as a separate OS process (this same
//! executable, `replica` subcommand), waits until all are ready, gives them one start
//! instant, and collects their reports. Every wait is bounded; a replica left behind by an
//! error or a Ctrl-C is killed when its handle is dropped.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout_at, Instant};

use crate::cli::{BackendArg, Phase, StrategyArg};
use crate::wire::{CallRecord, ReplicaMessage, ReplicaStats, Start};

/// A process start, a Redis connection and a few warm-up calls, on a busy machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
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

struct Replica {
    index: u32,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

pub async fn run(plan: &Plan) -> Result<FleetRun, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
    let mut replicas = Vec::with_capacity(plan.replicas as usize);
    for index in 0..plan.replicas {
        replicas.push(spawn(&exe, plan, index)?);
    }

    let ready_by = Instant::now() + READY_TIMEOUT;
    for replica in &mut replicas {
        match next_message(replica, ready_by).await? {
            ReplicaMessage::Ready => {}
            other => {
                return Err(format!(
                    "replica {} sent {other:?} before it was ready",
                    replica.index
                ))
            }
        }
    }

    let (start, start_at) = Start::in_(START_LEAD);
    let line = format!(
        "{}\n",
        serde_json::to_string(&start).map_err(|e| e.to_string())?
    );
    for replica in &mut replicas {
        replica
            .stdin
            .write_all(line.as_bytes())
            .await
            .and(replica.stdin.flush().await)
            .map_err(|e| format!("cannot start replica {}: {e}", replica.index))?;
    }

    let done_by = start_at + plan.max_wait + FINISH_SLACK;
    let mut records = Vec::with_capacity((plan.replicas * plan.calls) as usize);
    for replica in &mut replicas {
        for _ in 0..plan.calls {
            match next_message(replica, done_by).await? {
                ReplicaMessage::Call(record) => records.push(record),
                other => {
                    return Err(format!(
                        "replica {} sent {other:?} before its last call",
                        replica.index
                    ))
                }
            }
        }
    }
    let mut stats = Vec::with_capacity(replicas.len());
    for replica in &mut replicas {
        match next_message(replica, done_by).await? {
            ReplicaMessage::Done(done) => stats.push(done),
            other => {
                return Err(format!(
                    "replica {} sent {other:?} instead of its counters",
                    replica.index
                ))
            }
        }
    }
    for replica in &mut replicas {
        let status = timeout_at(done_by, replica.child.wait())
            .await
            .map_err(|_| format!("replica {} did not exit", replica.index))?
            .map_err(|e| format!("replica {}: {e}", replica.index))?;
        if !status.success() {
            return Err(format!("replica {} failed ({status})", replica.index));
        }
    }
    Ok(FleetRun {
        start: start_at,
        records,
        stats,
    })
}

fn spawn(exe: &std::path::Path, plan: &Plan, index: u32) -> Result<Replica, String> {
    let mut command = Command::new(exe);
    command
        .arg("replica")
        .args(["--index", &index.to_string()])
        .args(["--phase", phase_arg(plan.phase)])
        .args(["--upstream", &plan.upstream])
        .args(["--integrator", &plan.integrator])
        .args(["--calls", &plan.calls.to_string()])
        .args(["--max-wait-ms", &plan.max_wait.as_millis().to_string()]);
    if plan.phase == Phase::Bucket {
        command
            .args(["--redis-url", &plan.redis_url])
            .args(["--key", &plan.key])
            .args(["--capacity", &plan.capacity.to_string()])
            .args(["--rate", &plan.rate.to_string()])
            .args(["--strategy", plan.strategy.name()])
            .args(["--backend", plan.backend.name()]);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start replica {index}: {e}"))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(format!("replica {index} has no pipes"));
    };
    Ok(Replica {
        index,
        child,
        stdin,
        lines: BufReader::new(stdout).lines(),
    })
}

async fn next_message(replica: &mut Replica, by: Instant) -> Result<ReplicaMessage, String> {
    let index = replica.index;
    let line = timeout_at(by, replica.lines.next_line())
        .await
        .map_err(|_| format!("replica {index} went quiet"))?
        .map_err(|e| format!("reading replica {index}: {e}"))?
        .ok_or_else(|| format!("replica {index} stopped early (its error is above)"))?;
    serde_json::from_str(&line).map_err(|e| format!("replica {index} sent {line:?}: {e}"))
}

fn phase_arg(phase: Phase) -> &'static str {
    match phase {
        Phase::Direct => "direct",
        Phase::Bucket => "bucket",
    }
}
