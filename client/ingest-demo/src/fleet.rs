//! The demo's side of the worker processes: starts each (this same executable, a hidden
//! subcommand), waits until all are ready, gives them one start instant, stops or kills them,
//! and collects their reports. Every wait is bounded; a worker left behind by an error or a
//! Ctrl-C is killed when the fleet is dropped.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout_at, Instant};

use crate::wire::{start_in, DemoMessage, WorkerMessage, WorkerReport};

/// A process start and its connections, on a busy machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// From "all ready" to the start: time for the start line to reach every worker.
const START_LEAD: Duration = Duration::from_millis(300);

struct Process {
    index: u32,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    killed: bool,
}

pub struct Fleet {
    workers: Vec<Process>,
}

impl Fleet {
    /// Starts one process per argument list (`index` is its position) and waits until every
    /// one is ready.
    pub async fn spawn(arg_lists: Vec<Vec<String>>) -> Result<Fleet, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
        let mut workers = Vec::with_capacity(arg_lists.len());
        for (index, args) in (0u32..).zip(arg_lists) {
            let mut child = Command::new(&exe)
                .args(&args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start worker {index}: {e}"))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(format!("worker {index} has no pipes"));
            };
            workers.push(Process {
                index,
                child,
                stdin,
                lines: BufReader::new(stdout).lines(),
                killed: false,
            });
        }
        let ready_by = Instant::now() + READY_TIMEOUT;
        for worker in &mut workers {
            match next_message(worker, ready_by).await? {
                WorkerMessage::Ready => {}
                other => {
                    return Err(format!(
                        "worker {} sent {other:?} before it was ready",
                        worker.index
                    ))
                }
            }
        }
        Ok(Fleet { workers })
    }

    /// Tells every worker to start a moment from now; returns that instant.
    pub async fn start(&mut self) -> Result<Instant, String> {
        let (message, at) = start_in(START_LEAD);
        for worker in &mut self.workers {
            send(worker, &message).await?;
        }
        Ok(at)
    }

    /// SIGKILL, no warning: what a crash or an OOM kill looks like to the others.
    pub async fn kill(&mut self, index: usize) -> Result<(), String> {
        let worker = self
            .workers
            .get_mut(index)
            .ok_or_else(|| format!("no worker {index}"))?;
        worker
            .child
            .start_kill()
            .map_err(|e| format!("cannot kill worker {index}: {e}"))?;
        worker.killed = true;
        let _ = tokio::time::timeout(Duration::from_secs(10), worker.child.wait()).await;
        Ok(())
    }

    /// Asks every live worker to stop (backlog workers finish the record they are on).
    pub async fn stop(&mut self) -> Result<(), String> {
        for worker in self.workers.iter_mut().filter(|w| !w.killed) {
            send(worker, &DemoMessage::Stop).await?;
        }
        Ok(())
    }

    /// The live workers' reports, then their exits, by `by`.
    pub async fn reports(mut self, by: Instant) -> Result<Vec<WorkerReport>, String> {
        let mut reports = Vec::with_capacity(self.workers.len());
        for worker in self.workers.iter_mut().filter(|w| !w.killed) {
            match next_message(worker, by).await? {
                WorkerMessage::Report(report) => reports.push(report),
                WorkerMessage::Ready => {
                    return Err(format!("worker {} said ready twice", worker.index))
                }
            }
        }
        for worker in self.workers.iter_mut().filter(|w| !w.killed) {
            let status = timeout_at(by, worker.child.wait())
                .await
                .map_err(|_| format!("worker {} did not exit", worker.index))?
                .map_err(|e| format!("worker {}: {e}", worker.index))?;
            if !status.success() {
                return Err(format!("worker {} failed ({status})", worker.index));
            }
        }
        Ok(reports)
    }
}

async fn send(worker: &mut Process, message: &DemoMessage) -> Result<(), String> {
    let line = format!(
        "{}\n",
        serde_json::to_string(message).map_err(|e| e.to_string())?
    );
    worker
        .stdin
        .write_all(line.as_bytes())
        .await
        .and(worker.stdin.flush().await)
        .map_err(|e| format!("cannot reach worker {}: {e}", worker.index))
}

async fn next_message(worker: &mut Process, by: Instant) -> Result<WorkerMessage, String> {
    let index = worker.index;
    let line = timeout_at(by, worker.lines.next_line())
        .await
        .map_err(|_| format!("worker {index} went quiet"))?
        .map_err(|e| format!("reading worker {index}: {e}"))?
        .ok_or_else(|| format!("worker {index} stopped early (its error is above)"))?;
    serde_json::from_str(&line).map_err(|e| format!("worker {index} sent {line:?}: {e}"))
}
