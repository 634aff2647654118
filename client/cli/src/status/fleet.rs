//! The fleet's counters of one quota, summed over the processes that report it (pure).

use std::collections::BTreeMap;
use std::time::Duration;

use redis_throttle::report::{Counter, Counts, Report};
use redis_throttle::WaitHistogram;
use serde::Serialize;

/// What the processes reporting one key say together, over their last period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Fleet {
    /// Processes with a live report of the key.
    pub(crate) processes: usize,
    /// Calls granted per second over the last period, summed over the processes.
    pub(crate) grants_per_s: f64,
    /// 429 responses the processes' HTTP layers saw in the last period.
    pub(crate) responses_429: u64,
    /// Reserved calls a pause held back in the last period.
    pub(crate) held_by_pause: u64,
    /// Bulk takes refused to keep the floor in the last period.
    pub(crate) held_by_floor: u64,
    /// Calls in flight (slots held) when the processes last reported, summed; null when no
    /// process has a cap on calls in flight or has seen one used.
    pub(crate) in_flight: Option<u64>,
    /// The cap on calls in flight the processes report (the largest, should they disagree);
    /// null when none has one.
    pub(crate) max_in_flight: Option<u64>,
    /// Calls that waited for a slot in the last period.
    pub(crate) slot_waits: u64,
    /// Slots whose lease ran out while held, since the processes' limiters were built.
    pub(crate) leases_lost: u64,
    /// Granted calls' waits counted in the last period.
    pub(crate) waits: u64,
    /// Upper bound of the median wait, ms (the histogram's bucket); null when no wait was
    /// counted or it lies above the last bound (then `waits` is above 0).
    pub(crate) wait_p50_le_ms: Option<u64>,
    /// The same for the 99th percentile.
    pub(crate) wait_p99_le_ms: Option<u64>,
}

/// The quota the reports of one key carry: the newest report's, and a note when the processes
/// disagree.
pub(crate) fn quota_of(reports: &[Report]) -> Option<((u64, String), Option<String>)> {
    let newest = reports.iter().max_by_key(|r| r.at_ms)?;
    let mut seen: BTreeMap<(u64, &str), usize> = BTreeMap::new();
    for report in reports {
        *seen
            .entry((report.capacity, report.rate.as_str()))
            .or_default() += 1;
    }
    let note = (seen.len() > 1).then(|| {
        let each: Vec<String> = seen
            .iter()
            .map(|((capacity, rate), n)| format!("{capacity}/{rate} ({n})"))
            .collect();
        format!(
            "the processes report different quotas: {}; shown with the newest report's",
            each.join(", ")
        )
    });
    Some(((newest.capacity, newest.rate.clone()), note))
}

/// The fleet's counters of one key from its processes' reports.
pub(crate) fn fleet_of(reports: &[Report]) -> Fleet {
    let mut grants_per_s = 0.0;
    // The counters are whatever the reports say: the sums saturate, never wrap.
    let (mut period, mut total) = (Counts::default(), Counts::default());
    let mut in_flight = None::<u64>;
    let mut max_in_flight = None::<u64>;
    for report in reports {
        if report.period_ms > 0 {
            grants_per_s +=
                report.period.get(Counter::Granted) as f64 * 1000.0 / report.period_ms as f64;
        }
        period = period.plus(&report.period);
        total = total.plus(&report.total);
        // A process that names a cap, holds slots or ever waited for one has a cap.
        if report.max_in_flight > 0
            || report.in_flight > 0
            || report.total.get(Counter::SlotWaits) > 0
        {
            in_flight = Some(in_flight.unwrap_or(0).saturating_add(report.in_flight));
        }
        if report.max_in_flight > 0 {
            max_in_flight = max_in_flight.max(Some(report.max_in_flight));
        }
    }
    let quantile_ms = |q| {
        let bound: Option<Duration> = period.waits.quantile(q);
        bound.map(|b| u64::try_from(b.as_millis()).unwrap_or(u64::MAX))
    };
    Fleet {
        processes: reports.len(),
        grants_per_s,
        responses_429: period.get(Counter::Responses429),
        held_by_pause: period.get(Counter::HeldByPause),
        held_by_floor: period.get(Counter::HeldByFloor),
        in_flight,
        max_in_flight,
        slot_waits: period.get(Counter::SlotWaits),
        leases_lost: total.get(Counter::LeasesLost),
        waits: period.waits.count(),
        wait_p50_le_ms: quantile_ms(0.5),
        wait_p99_le_ms: quantile_ms(0.99),
    }
}

/// The last bound of the wait histogram, ms: a quantile above it has no bound.
pub(crate) fn last_wait_bound_ms() -> u64 {
    WaitHistogram::default()
        .buckets()
        .filter_map(|(bound, _)| bound)
        .last()
        .map_or(0, |b| u64::try_from(b.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of `granted` calls in a period of `period_ms`, the waits in the buckets given.
    fn report(process: &str, period_ms: u64, granted: u64, waits: &[(usize, u64)]) -> Report {
        let buckets = WaitHistogram::default().buckets().count();
        let mut counts = vec![0u64; buckets];
        for (at, n) in waits {
            counts[*at] = *n;
        }
        let line = format!(
            "v1 at=1 period={period_ms} process={process} capacity=10 rate=5 p.granted={granted} \
             p.r429=1 p.waits={} key=k",
            counts
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        Report::parse(&line).unwrap()
    }

    #[test]
    fn the_fleet_sums_its_processes() {
        // 1 ms, 2 ms, 5 ms, ... : 90 waits of at most 1 ms, 10 of at most 5 ms.
        let reports = [
            report("a", 5000, 50, &[(0, 60)]),
            report("b", 1000, 5, &[(0, 30), (2, 10)]),
        ];
        let fleet = fleet_of(&reports);
        assert_eq!(fleet.processes, 2);
        assert!((fleet.grants_per_s - 15.0).abs() < 1e-9, "{fleet:?}");
        assert_eq!(fleet.responses_429, 2);
        assert_eq!(fleet.waits, 100);
        assert_eq!(fleet.wait_p50_le_ms, Some(1));
        assert_eq!(fleet.wait_p99_le_ms, Some(5));
    }

    #[test]
    fn no_waits_no_quantiles_and_the_last_bucket_has_no_bound() {
        let fleet = fleet_of(&[report("a", 1000, 0, &[])]);
        assert_eq!((fleet.waits, fleet.wait_p50_le_ms), (0, None));
        let last = WaitHistogram::default().buckets().count() - 1;
        let fleet = fleet_of(&[report("a", 1000, 1, &[(last, 1)])]);
        assert_eq!((fleet.waits, fleet.wait_p99_le_ms), (1, None));
        assert_eq!(last_wait_bound_ms(), 100_000);
    }

    #[test]
    fn the_calls_in_flight_are_summed_under_the_cap() {
        let fleet = fleet_of(&[report("a", 1000, 0, &[])]);
        assert_eq!((fleet.in_flight, fleet.max_in_flight), (None, None));
        let (mut a, mut b, c) = (
            report("a", 1000, 0, &[]),
            report("b", 1000, 0, &[]),
            report("c", 1000, 0, &[]),
        );
        (a.in_flight, a.max_in_flight) = (3, 4);
        // Holding none now, but capped: it counts as 0 held, not as no cap.
        (b.in_flight, b.max_in_flight) = (0, 4);
        let fleet = fleet_of(&[a, b, c]);
        assert_eq!((fleet.in_flight, fleet.max_in_flight), (Some(3), Some(4)));
    }

    #[test]
    fn the_sums_saturate() {
        let buckets = WaitHistogram::default().buckets().count();
        let max = u64::MAX.to_string();
        let waits = vec![max.as_str(); buckets].join(",");
        let line = format!(
            "v1 at=1 period=1000 process=p capacity=10 rate=5 in_flight={max} max_in_flight=1 \
             leases_lost={max} p.granted={max} p.r429={max} p.held_pause={max} \
             p.held_floor={max} p.slot_waits={max} p.waits={waits} key=k"
        );
        let report = Report::parse(&line).unwrap();
        let fleet = fleet_of(&[report.clone(), report]);
        assert_eq!(fleet.responses_429, u64::MAX);
        assert_eq!(fleet.held_by_pause, u64::MAX);
        assert_eq!(fleet.held_by_floor, u64::MAX);
        assert_eq!(fleet.slot_waits, u64::MAX);
        assert_eq!(fleet.leases_lost, u64::MAX);
        assert_eq!(fleet.in_flight, Some(u64::MAX));
        assert_eq!(fleet.waits, u64::MAX);
        assert_eq!(fleet.wait_p50_le_ms, Some(1));
        assert_eq!(fleet.grants_per_s, 2.0 * u64::MAX as f64);
    }

    #[test]
    fn differing_quotas_are_noted() {
        let mut newer = report("b", 1000, 0, &[]);
        newer.at_ms = 2;
        newer.capacity = 20;
        let (quota, note) = quota_of(&[report("a", 1000, 0, &[]), newer]).unwrap();
        assert_eq!(quota, (20, "5".to_owned()));
        assert!(note.unwrap().contains("10/5 (1), 20/5 (1)"));
        assert_eq!(quota_of(&[report("a", 1, 0, &[])]).unwrap().1, None);
    }
}
