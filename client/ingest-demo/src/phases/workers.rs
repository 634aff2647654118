//! The phases' side of the worker processes (this same executable, a hidden subcommand each,
//! through `demo_support::fleet`): started and ready, given one start instant, stopped or
//! killed, and their reports collected.

use std::time::Duration;

use demo_support::fleet::Fleet;
use tokio::time::Instant;

use crate::wire::{DemoMessage, WorkerMessage, WorkerReport};

/// From "all ready" to the start: time for the start line to reach every worker.
const START_LEAD: Duration = Duration::from_millis(300);

pub struct Workers {
    fleet: Fleet<WorkerMessage>,
}

impl Workers {
    /// Starts one worker per argument list (its index is its position) and waits until every
    /// one is ready.
    pub async fn spawn(arg_lists: Vec<Vec<String>>) -> Result<Workers, String> {
        Ok(Workers {
            fleet: Fleet::spawn("worker", arg_lists).await?,
        })
    }

    /// Tells every worker to start a moment from now; returns that instant.
    pub async fn start(&mut self) -> Result<Instant, String> {
        self.fleet.start(START_LEAD).await
    }

    /// SIGKILL, no warning: what a crash or an OOM kill looks like to the others.
    pub async fn kill(&mut self, index: usize) -> Result<(), String> {
        self.fleet.kill(index).await
    }

    /// Asks every live worker to stop (backlog workers finish the record they are on).
    pub async fn stop(&mut self) -> Result<(), String> {
        self.fleet.send(&DemoMessage::Stop).await
    }

    /// The live workers' reports, then their exits, by `by`.
    pub async fn reports(mut self, by: Instant) -> Result<Vec<WorkerReport>, String> {
        let mut reports = Vec::new();
        for index in self.fleet.live() {
            match self.fleet.next(index, by).await? {
                WorkerMessage::Report(report) => reports.push(report),
                WorkerMessage::Ready => return Err(format!("worker {index} said ready twice")),
            }
        }
        self.fleet.wait(by).await?;
        Ok(reports)
    }
}
