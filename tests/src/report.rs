//! What a worker process of the client's fleet tests prints, and its parent reads back:
//! `START <ns>` (its first request), a `SAMPLE` line per grant, and its limiter's counters.

use redis_throttle::MetricsSnapshot;

use crate::grants::Sample;

/// A worker's report, as its parent read it.
pub struct Report {
    pub start: i128,
    pub samples: Vec<Sample>,
    /// `granted=.. errors=.. gave_up=.. round_trips=.. backend=..`
    pub metrics: String,
}

impl Report {
    /// Prints the report on stdout (after libtest's "test name ... " without a newline).
    pub fn print(start: i128, samples: &[Sample], m: &MetricsSnapshot) {
        let mut lines = vec![String::new(), format!("START {start}")];
        lines.extend(samples.iter().map(Sample::line));
        lines.push(format!(
            "METRICS granted={} errors={} gave_up={} round_trips={} backend={}",
            m.granted,
            m.errors,
            m.gave_up,
            m.round_trips,
            m.backend.map_or("none", |b| b.name())
        ));
        println!("{}", lines.join("\n"));
    }

    /// Reads a worker's stdout; panics if its start or counters are missing.
    #[track_caller]
    pub fn parse(stdout: &str) -> Report {
        let (mut start, mut metrics, mut samples) = (None, None, Vec::new());
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["START", at] => start = Some(at.parse::<i128>().expect("a start instant")),
                ["SAMPLE", numbers @ ..] => samples.push(Sample::parse(numbers)),
                ["METRICS", fields @ ..] => metrics = Some(fields.join(" ")),
                _ => {}
            }
        }
        Report {
            start: start.unwrap_or_else(|| panic!("no START in the worker's output:\n{stdout}")),
            samples,
            metrics: metrics
                .unwrap_or_else(|| panic!("no METRICS in the worker's output:\n{stdout}")),
        }
    }
}
