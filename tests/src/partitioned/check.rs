//! The checks on what the partitioned-quota workers printed: leases exclusive, grants carried
//! across a freeze bounded by the callers, every window within the quota.

use std::collections::BTreeMap;

use super::output::Output;
use super::worker::{Spec, PREPARE};
use crate::grants::{check_windows, worst_excess, Sample, Windows};

/// A worker frozen from `frozen` to `thawed` (ns, read before each signal).
#[derive(Clone, Copy, Debug)]
pub struct Freeze {
    pub worker: usize,
    pub frozen: i128,
    pub thawed: i128,
}

/// What [`check`] found.
#[derive(Debug)]
pub struct Findings {
    pub windows: Windows,
    /// The worst window of all grants, the carried ones included, tokens over the bound.
    pub worst_all: f64,
    /// Grants decided before a freeze and returned after it, per freeze.
    pub carried: Vec<usize>,
    pub leases: usize,
    /// Smallest gap between one holder's last usable instant and the next holder's first, ms.
    pub smallest_handover_ms: f64,
    pub per_worker: Vec<usize>,
}

/// The checks, on every worker's output (by worker number):
/// 1. leases: no two holds of a partition overlap: each hold (from its first `from` to its
///    last `until`) ends before the next one starts;
/// 2. in flight: a frozen worker's grants decided before the freeze and returned after it
///    number at most its callers (`tasks`): the documented bound;
/// 3. every other grant: every window holds at most `burst + rate x window` (plus the
///    bunching the measured lateness between decision and return can make), from the
///    first `START` on (every partition starts empty);
/// 4. all grants, the carried ones included: at most that plus the grants carried.
pub fn check(outputs: &[Output], freezes: &[Freeze], spec: Spec) -> Findings {
    // 1. Leases. A hold's confirmations share its first instant (read again at each, so
    // equal within a ms).
    let mut events: BTreeMap<u32, Vec<(i128, i128, usize)>> = BTreeMap::new();
    let mut leases = 0;
    for (worker, out) in outputs.iter().enumerate() {
        for &(p, from, until) in &out.leases {
            leases += 1;
            events.entry(p).or_default().push((from, until, worker));
        }
    }
    let mut holds: BTreeMap<u32, Vec<(i128, i128, usize)>> = BTreeMap::new();
    for (p, mut list) in events {
        list.sort();
        let merged = holds.entry(p).or_default();
        for (from, until, worker) in list {
            match merged.last_mut() {
                Some(hold) if hold.2 == worker && from - hold.0 < 1_000_000 => {
                    hold.1 = hold.1.max(until);
                }
                _ => merged.push((from, until, worker)),
            }
        }
        // A hold ends at its last `until`, or earlier where the worker stopped spending.
        for hold in merged.iter_mut() {
            let stopped = outputs[hold.2]
                .ends
                .iter()
                .filter(|&&(q, at, _)| q == p && at >= hold.0)
                .map(|&(_, at, _)| at)
                .min();
            if let Some(at) = stopped {
                hold.1 = hold.1.min(at);
            }
        }
        merged.sort();
    }
    let mut smallest_gap = i128::MAX;
    for (p, list) in &mut holds {
        list.sort();
        for pair in list.windows(2) {
            let ((_, until_a, a), (from_b, _, b)) = (pair[0], pair[1]);
            assert!(
                from_b >= until_a,
                "partition {p}: worker {b} spent it from {:.3} s, while worker {a}'s lease was \
                 usable until {:.3} s; holds: {list:?}",
                from_b as f64 / 1e9,
                until_a as f64 / 1e9
            );
            smallest_gap = smallest_gap.min(from_b - until_a);
        }
    }

    // 2. In flight across a freeze.
    let mut carried_grants = Vec::new();
    let mut carried = Vec::new();
    for f in freezes {
        let over: Vec<(i128, i128, u32)> = outputs[f.worker]
            .grants
            .iter()
            .copied()
            .filter(|&(at, done, _)| at < f.thawed && done > f.thawed)
            .collect();
        assert!(
            over.len() <= spec.tasks,
            "worker {} carried {} grants across its freeze, more than its {} callers: {over:?}",
            f.worker,
            over.len(),
            spec.tasks
        );
        for &(at, _, _) in &over {
            assert!(
                at < f.frozen + 5_000_000,
                "a grant decided while frozen: {f:?} {at}"
            );
        }
        carried.push(over.len());
        carried_grants.extend(over.into_iter().map(|g| (f.worker, g)));
    }

    // 3. Windows.
    let mut samples = Vec::new();
    let mut per_worker = Vec::new();
    for (worker, out) in outputs.iter().enumerate() {
        per_worker.push(out.grants.len());
        for &grant in &out.grants {
            if carried_grants.contains(&(worker, grant)) {
                continue;
            }
            let (at, done, _) = grant;
            // Lateness is what the call took beyond its preparation.
            let prepare = PREPARE.as_nanos() as i128;
            samples.push(Sample {
                start: at.min(done - prepare),
                done,
                slept: prepare,
            });
        }
    }
    let t0 = outputs
        .iter()
        .filter_map(|o| o.start)
        .min()
        .expect("a worker started");
    let windows = check_windows(&samples, t0, 0, spec.burst, spec.rate);

    // 4. All grants together, the carried ones included: within the bound plus what the
    // frozen workers had in flight.
    let mut all: Vec<i128> = outputs
        .iter()
        .flat_map(|o| o.grants.iter().map(|&(_, done, _)| done))
        .collect();
    all.sort_unstable();
    let worst_all = worst_excess(&all, spec.burst, spec.rate);
    let in_flight: usize = carried.iter().sum();
    assert!(
        worst_all <= windows.tolerance + in_flight as f64,
        "all grants: a window {worst_all:.3} tokens over burst + rate x window, more than the \
         tolerance {:.3} plus the {in_flight} grants carried across freezes",
        windows.tolerance
    );
    Findings {
        worst_all,
        windows,
        carried,
        leases,
        smallest_handover_ms: smallest_gap as f64 / 1e6,
        per_worker,
    }
}
