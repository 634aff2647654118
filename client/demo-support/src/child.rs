//! A child process's side of the harness (see [`crate::fleet`]): its runtime, the demo's lines
//! on its stdin, and its own JSON lines on its stdout. A child opens its connections, says it
//! is ready, waits for the start instant, works, and reports.

use std::future::Future;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};

use crate::shared_start::StartInstant;

/// How long a child waits for the start instant once it has said it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A child's command line (a hidden subcommand of the demo's own executable): its index in
/// the fleet, and what it is to do, as JSON (`--plan`).
#[derive(Debug, Clone, clap::Args)]
pub struct ChildArgs {
    #[arg(long)]
    pub index: u32,
    #[arg(long)]
    pub plan: String,
}

impl ChildArgs {
    pub fn plan<P: DeserializeOwned>(&self) -> Result<P, String> {
        serde_json::from_str(&self.plan).map_err(|e| format!("--plan: {e}"))
    }
}

/// The children's command lines: `subcommand --index=I --plan=JSON`, child I with plan I.
pub fn command_lines<P: Serialize>(
    subcommand: &str,
    plans: impl IntoIterator<Item = P>,
) -> Result<Vec<Vec<String>>, String> {
    (0u32..)
        .zip(plans)
        .map(|(index, plan)| {
            let json = serde_json::to_string(&plan).map_err(|e| format!("the plan: {e}"))?;
            let index = format!("--index={index}");
            Ok(vec![subcommand.to_owned(), index, format!("--plan={json}")])
        })
        .collect()
}

/// Runs a child's `work` on one thread (a child does a few dozen things at once at most,
/// and leaves the other cores to the rest); an error goes to stderr after `who`
/// ("pix-demo replica 1").
pub fn run(who: &str, work: impl Future<Output = Result<(), String>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("{who}: no tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{who}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The demo's lines on this process's stdin.
pub struct FromDemo {
    lines: mpsc::UnboundedReceiver<Result<String, String>>,
}

impl FromDemo {
    /// Reads stdin on a thread of its own (a blocking read cannot be cancelled, and would
    /// hold up the runtime's shutdown). The demo holds our stdin open until it has our
    /// report, so end-of-file means it is gone: so are we, at once (exit code 3), saying so
    /// after `who` ("pix-demo replica").
    pub fn listen(who: &'static str) -> FromDemo {
        let (sender, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let failed = line.is_err();
                let _ = sender.send(line.map_err(|e| format!("reading stdin: {e}")));
                if failed {
                    break;
                }
            }
            eprintln!("{who}: the demo went away; stopping");
            std::process::exit(3);
        });
        FromDemo { lines }
    }

    /// The start instant (the demo's first line), as this process's `Instant`, within
    /// a minute.
    pub async fn start(&mut self) -> Result<Instant, String> {
        match timeout(START_TIMEOUT, self.lines.recv()).await {
            Ok(Some(Ok(line))) => serde_json::from_str::<StartInstant>(&line)
                .map(StartInstant::local_instant)
                .map_err(|e| format!("bad start line {line:?}: {e}")),
            Ok(Some(Err(err))) => Err(err),
            Ok(None) => Err("stdin closed before the start instant".to_owned()),
            Err(_) => Err(format!("no start instant within {START_TIMEOUT:?}")),
        }
    }

    /// The demo's next line after the start (a child told to stop: a backlog worker).
    pub async fn next_line(&mut self) -> Option<Result<String, String>> {
        self.lines.recv().await
    }
}

/// Says this child is ready: its connections are open, it waits for the start instant. Its
/// first line, which the demo waits for from every child before the start.
pub fn say_ready() -> Result<(), String> {
    say(&crate::fleet::Hello::Ready)
}

/// One message to the demo: a JSON line on stdout, flushed.
pub fn say<M: Serialize>(message: &M) -> Result<(), String> {
    let line = serde_json::to_string(message).map_err(|e| e.to_string())?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("writing to the demo: {e}"))
}
