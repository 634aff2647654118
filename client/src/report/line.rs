//! What one process reports of one limiter, as the one line stored under its report key: pure,
//! read back by the operator's tool with [`Report::parse`].
//!
//! `v1 at=<unix ms> period=<ms> process=<id> capacity=<n> rate=<decimal> in_flight=<slots held
//! now> max_in_flight=<the cap, 0 without> max_wait=<ms> granted=.. denied=.. gave_up=.. errors=..
//! round_trips=.. pauses=.. cuts=.. syncs=.. r429=.. r503=.. held_pause=.. held_floor=..
//! slot_waits=.. joined_line=.. handed=.. leases_lost=.. waits=<17 counts> p.granted=.. ...
//! p.waits=<17 counts>
//! key=<the bucket's key>`: the counters since the limiter was built,
//! then (`p.`) those of the last period alone, so that one read gives rates and the wait
//! quantiles of now; the bucket's quota as the limiter has it (the server does not keep it),
//! so that its tokens can be shown; the key comes last, so that it may hold spaces.
//!
//! `max_wait` (a later field; a line from an older writer has none, read as `None`): the
//! longest a call of the limiter waits unless it gives its own deadline (the builder's
//! `max_wait`), so that the operator's tool can tell that a pause will fail the fleet's calls.
//! A reader older than it skips it, as any field whose name it does not know and whose value is
//! a whole number: every later field is added that way.

use super::Counter;
use crate::MetricsSnapshot;
use crate::WaitHistogram;

/// Counters of a limiter, since it was built or over one period: one value per [`Counter`],
/// and the granted calls' waits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    values: [u64; Counter::COUNT],
    /// The granted calls' waits.
    pub waits: WaitHistogram,
}

/// One report: a process's counters of one limiter, as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The bucket's key (a partitioned limiter: its quota's name).
    pub key: String,
    /// The reporting process (random, with its pid).
    pub process: String,
    /// When the report was made, ms since the Unix epoch (the process's clock).
    pub at_ms: u64,
    /// How long `period` covers, ms.
    pub period_ms: u64,
    /// The bucket's capacity, as the limiter has it.
    pub capacity: u64,
    /// The bucket's rate (tokens per second, a decimal), as the limiter sends it.
    pub rate: String,
    /// Slots for calls in flight the process's grants held when it reported (0 without a
    /// cap).
    pub in_flight: u64,
    /// The cap on calls in flight the process's limiter has on this bucket (0 without one).
    pub max_in_flight: u64,
    /// The longest a call of the process's limiter waits unless it gives its own deadline
    /// (the builder's `max_wait`), ms; `None` from a writer older than the field.
    pub max_wait_ms: Option<u64>,
    /// Since the limiter was built.
    pub total: Counts,
    /// Over the last period alone.
    pub period: Counts,
}

impl Counts {
    /// The counts of a snapshot.
    pub fn of(snapshot: &MetricsSnapshot) -> Counts {
        Counts {
            values: Counter::ALL.map(|c| c.of(snapshot)),
            waits: snapshot.wait_histogram.clone(),
        }
    }

    /// The value of `counter`.
    pub fn get(&self, counter: Counter) -> u64 {
        self.values.get(counter.index()).copied().unwrap_or(0)
    }

    /// These counts with `counter` at `value`.
    pub fn with(mut self, counter: Counter, value: u64) -> Counts {
        if let Some(slot) = self.values.get_mut(counter.index()) {
            *slot = value;
        }
        self
    }

    /// What was counted since `earlier` (0 where a counter went down: a new limiter).
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            values: Counter::ALL.map(|c| self.get(c).saturating_sub(earlier.get(c))),
            waits: self.waits.since(&earlier.waits),
        }
    }

    /// Both counted together, saturating: the fleet's counts, summed over its processes'
    /// reports (which hold whatever their writers put there).
    pub fn plus(&self, other: &Counts) -> Counts {
        Counts {
            values: Counter::ALL.map(|c| self.get(c).saturating_add(other.get(c))),
            waits: self.waits.plus(&other.waits),
        }
    }

    fn set(&mut self, name: &str, value: &str) -> Option<()> {
        if name == "waits" {
            let counts: Option<Vec<u64>> = value.split(',').map(|c| c.parse().ok()).collect();
            self.waits = WaitHistogram::from_counts(&counts?)?;
            return Some(());
        }
        // A field of a later version: skipped, so that an older tool still reads it.
        let Some(counter) = Counter::named(name) else {
            return Some(());
        };
        *self = std::mem::take(self).with(counter, value.parse().ok()?);
        Some(())
    }

    fn write(&self, prefix: &str, line: &mut String) {
        use std::fmt::Write as _;
        for counter in Counter::ALL {
            let _ = write!(line, " {prefix}{}={}", counter.name(), self.get(counter));
        }
        let waits: Vec<String> = self.waits.counts().iter().map(u64::to_string).collect();
        let _ = write!(line, " {prefix}waits={}", waits.join(","));
    }
}

impl Report {
    /// The line to store.
    pub fn encode(&self) -> String {
        let mut line = format!(
            "v1 at={} period={} process={} capacity={} rate={} in_flight={} max_in_flight={}",
            self.at_ms,
            self.period_ms,
            self.process,
            self.capacity,
            self.rate,
            self.in_flight,
            self.max_in_flight
        );
        if let Some(max_wait_ms) = self.max_wait_ms {
            use std::fmt::Write as _;
            let _ = write!(line, " max_wait={max_wait_ms}");
        }
        self.total.write("", &mut line);
        self.period.write("p.", &mut line);
        line.push_str(" key=");
        line.push_str(&self.key);
        line
    }

    /// Reads a stored line back; `None` for one that is not a report.
    pub fn parse(line: &str) -> Option<Report> {
        let rest = line.strip_prefix("v1 ")?;
        let (fields, key) = rest.split_once(" key=")?;
        let mut report = Report {
            key: key.to_owned(),
            ..Report::default()
        };
        for field in fields.split(' ') {
            let (name, value) = field.split_once('=')?;
            match name {
                "at" => report.at_ms = value.parse().ok()?,
                "period" => report.period_ms = value.parse().ok()?,
                "process" => report.process = value.to_owned(),
                "capacity" => report.capacity = value.parse().ok()?,
                "rate" => report.rate = value.to_owned(),
                "in_flight" => report.in_flight = value.parse().ok()?,
                "max_in_flight" => report.max_in_flight = value.parse().ok()?,
                "max_wait" => report.max_wait_ms = Some(value.parse().ok()?),
                _ => match name.strip_prefix("p.") {
                    Some(name) => report.period.set(name, value)?,
                    None => report.total.set(name, value)?,
                },
            }
        }
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_report_reads_back_as_it_was_written() {
        let mut waits = vec![0u64; WaitHistogram::default().counts().len()];
        waits[0] = 7;
        waits[3] = 2;
        let total = Counts {
            waits: WaitHistogram::from_counts(&waits).unwrap(),
            ..Counts::default()
        }
        .with(Counter::Granted, 9)
        .with(Counter::Denied, 1)
        .with(Counter::RoundTrips, 10)
        .with(Counter::Pauses, 1)
        .with(Counter::Responses429, 1)
        .with(Counter::SlotWaits, 2)
        .with(Counter::HeardHanded, 2);
        let report = Report {
            key: "quota:pix with spaces".to_owned(),
            process: "00ab-42".to_owned(),
            at_ms: 1_733_300_000_123,
            period_ms: 5000,
            capacity: 10,
            rate: "0.5".to_owned(),
            in_flight: 3,
            max_in_flight: 4,
            max_wait_ms: Some(60_000),
            period: total.since(&Counts::default().with(Counter::Granted, 4)),
            total,
        };
        let line = report.encode();
        assert!(line.starts_with(
            "v1 at=1733300000123 period=5000 process=00ab-42 capacity=10 rate=0.5 in_flight=3 \
             max_in_flight=4 max_wait=60000 granted=9 "
        ));
        assert!(
            line.contains(" slot_waits=2 joined_line=0 handed=2 leases_lost=0 "),
            "{line}"
        );
        assert!(line.ends_with(" key=quota:pix with spaces"), "{line}");
        assert_eq!(Report::parse(&line), Some(report.clone()));
        assert_eq!(report.period.get(Counter::Granted), 5);
        assert_eq!(
            report.total.waits.quantile(0.9),
            Some(Duration::from_millis(10))
        );
    }

    #[test]
    fn what_is_not_a_report_is_refused_and_later_fields_are_skipped() {
        for bad in [
            "",
            "v2 at=1 key=k",
            "v1 at=x key=k",
            "v1 at=1",
            "v1 granted key=k",
            "v1 waits=1,2 key=k",
        ] {
            assert_eq!(Report::parse(bad), None, "{bad:?}");
        }
        let later = Report::parse("v1 at=1 slots=3 granted=2 key=k").unwrap();
        assert_eq!(
            (later.total.get(Counter::Granted), later.key.as_str()),
            (2, "k")
        );
        // A line of a writer older than `max_wait` has none.
        assert_eq!(later.max_wait_ms, None);
    }

    #[test]
    fn max_wait_is_written_only_when_known_and_an_older_reader_skips_it() {
        let report = Report {
            key: "k".to_owned(),
            max_wait_ms: Some(60_000),
            ..Report::default()
        };
        let line = report.encode();
        assert!(line.contains(" max_in_flight=0 max_wait=60000 "), "{line}");
        assert_eq!(Report::parse(&line), Some(report.clone()));
        let without = Report {
            max_wait_ms: None,
            ..report
        }
        .encode();
        assert!(!without.contains("max_wait="), "{without}");
        assert_eq!(Report::parse(&without).unwrap().max_wait_ms, None);
        // A reader older than `max_wait` sends it where every field it does not know goes:
        // skipped, the rest of the line read.
        let mut older = Counts::default();
        assert_eq!(older.set("max_wait", "60000"), Some(()));
        assert_eq!(older, Counts::default());
        assert_eq!(Report::parse("v1 at=1 max_wait=x key=k"), None);
    }
}
