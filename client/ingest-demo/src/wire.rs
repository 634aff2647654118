//! What the demo and its worker processes tell each other, one JSON object per line (the
//! harness is `demo_support::fleet` and `demo_support::child`): a worker says `ready` on
//! stdout; the demo sends the start instant on its stdin (and, to a backlog worker, `stop`
//! later); the worker answers with its `report` and exits.

use serde::{Deserialize, Serialize};

/// Worker to demo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum WorkerMessage {
    Report(WorkerReport),
}

/// Demo to worker, after the start instant. Any line then stops a backlog worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum DemoMessage {
    /// Stop gracefully (backlog workers) and report.
    Stop,
}

/// What a worker did, by its own count; times in µs after the shared start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    pub index: u32,
    /// Writes sent to the database.
    pub sent: u64,
    pub stored: u64,
    pub duplicates: u64,
    pub refused: u64,
    /// Writes that got no answer or an unexpected one.
    pub errors: u64,
    /// Backlog: records acknowledged, taken over from a dead worker, handed back at stop.
    pub done: u64,
    pub claimed: u64,
    pub handed_back: u64,
    pub dead_lettered: u64,
    pub throttled: u64,
    /// Backlog: when the last handler call began (its tokens had just been granted).
    pub last_grant_us: u64,
    /// The longest write, from the handler's call to the database's answer.
    pub max_trip_us: u64,
    /// The longest wait for tokens of one record.
    pub max_wait_us: u64,
    /// Backlog: requests the worker's limiter made to Redis while it worked (takes, and the
    /// pauses after a 429), all loops together; a floored take may need several per record.
    #[serde(default)]
    pub round_trips: u64,
}

/// What a phase-1 worker is to do (`retry-worker --plan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPlan {
    /// Base URL of the mock database.
    pub db: String,
    /// First record number of this worker's share, and how many.
    pub first: u64,
    pub count: u64,
}

/// What a phase-2/3/4 worker is to do (`backlog-worker --plan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BacklogPlan {
    pub db: String,
    pub redis_url: String,
    /// The shared bucket's key, its burst and rate.
    pub key: String,
    pub capacity: u64,
    pub rate: u64,
    /// The streams to drain, one worker loop each, in this consumer group.
    pub streams: Vec<String>,
    pub group: String,
    pub claim_idle_ms: u64,
    /// Records a worker loop reads at a time.
    pub batch: usize,
    /// Take at bulk priority, leaving this many tokens in the bucket (phase 4).
    pub floor: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_tagged_json_lines() {
        assert_eq!(
            serde_json::to_string(&DemoMessage::Stop).unwrap(),
            r#"{"type":"stop"}"#
        );
        let report = WorkerMessage::Report(WorkerReport {
            index: 2,
            sent: 5,
            ..WorkerReport::default()
        });
        let line = serde_json::to_string(&report).unwrap();
        assert_eq!(
            serde_json::from_str::<WorkerMessage>(&line).unwrap(),
            report
        );
    }
}
