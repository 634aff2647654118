//! The one instant every child process of a phase fires at. The demo sends it as the first
//! line on each child's stdin, as wall-clock nanoseconds since the Unix epoch: processes on
//! one machine share the wall clock, not their `Instant`s. Every time a child reports is an
//! offset from it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Demo to child, on the child's stdin: `{"start_unix_ns":...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartInstant {
    pub start_unix_ns: u64,
}

impl StartInstant {
    /// `lead` from now, and the same instant as this process's `Instant`.
    pub fn in_(lead: Duration) -> (StartInstant, Instant) {
        let (now_wall, now) = (SystemTime::now(), Instant::now());
        let ns = (now_wall + lead)
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let start = StartInstant {
            start_unix_ns: u64::try_from(ns).unwrap_or(u64::MAX),
        };
        (start, now + lead)
    }

    /// This process's `Instant` for the start (in the past if it already went by).
    pub fn local_instant(self) -> Instant {
        let (now_wall, now) = (SystemTime::now(), Instant::now());
        let start = UNIX_EPOCH + Duration::from_nanos(self.start_unix_ns);
        match start.duration_since(now_wall) {
            Ok(ahead) => now + ahead,
            Err(behind) => now.checked_sub(behind.duration()).unwrap_or(now),
        }
    }
}

/// Microseconds as a u64, saturating (a demo never runs for 584 000 years).
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_instant_is_one_json_object() {
        let start = StartInstant { start_unix_ns: 7 };
        let line = serde_json::to_string(&start).unwrap();
        assert_eq!(line, r#"{"start_unix_ns":7}"#);
        assert_eq!(serde_json::from_str::<StartInstant>(&line).unwrap(), start);
    }

    #[test]
    fn the_start_instant_survives_the_trip_through_the_wall_clock() {
        let (start, here) = StartInstant::in_(Duration::from_millis(300));
        let there = start.local_instant();
        let gap = if there > here {
            there - here
        } else {
            here - there
        };
        assert!(gap < Duration::from_millis(5), "{gap:?}");
    }
}
