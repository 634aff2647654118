//! What the demo and its worker processes tell each other, one JSON object per line: a
//! worker says `ready` on stdout; the demo sends `start` (and, to a backlog worker, `stop`)
//! on its stdin; the worker answers with its `report` and exits.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Worker to demo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum WorkerMessage {
    Ready,
    Report(WorkerReport),
}

/// Demo to worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum DemoMessage {
    /// Go at this wall-clock instant (ns since the Unix epoch: processes on one machine
    /// share the wall clock, not their `Instant`s).
    Start { start_unix_ns: u64 },
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
}

/// `lead` from now, as a message and as this process's `Instant`.
pub fn start_in(lead: Duration) -> (DemoMessage, Instant) {
    let (now_wall, now) = (SystemTime::now(), Instant::now());
    let ns = (now_wall + lead)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let start_unix_ns = u64::try_from(ns).unwrap_or(u64::MAX);
    (DemoMessage::Start { start_unix_ns }, now + lead)
}

/// This process's `Instant` for a wall-clock start (in the past if it already went by).
pub fn local_instant(start_unix_ns: u64) -> Instant {
    let (now_wall, now) = (SystemTime::now(), Instant::now());
    let start = UNIX_EPOCH + Duration::from_nanos(start_unix_ns);
    match start.duration_since(now_wall) {
        Ok(ahead) => now + ahead,
        Err(behind) => now.checked_sub(behind.duration()).unwrap_or(now),
    }
}

/// Microseconds as a u64, saturating.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_tagged_json_lines() {
        assert_eq!(
            serde_json::to_string(&WorkerMessage::Ready).unwrap(),
            r#"{"type":"ready"}"#
        );
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

    #[test]
    fn the_start_survives_the_trip_through_the_wall_clock() {
        let (DemoMessage::Start { start_unix_ns }, here) = start_in(Duration::from_millis(300))
        else {
            unreachable!()
        };
        let there = local_instant(start_unix_ns);
        let gap = if there > here {
            there - here
        } else {
            here - there
        };
        assert!(gap < Duration::from_millis(5), "{gap:?}");
    }
}
