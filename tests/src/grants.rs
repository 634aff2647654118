//! The bucket's bound checked on grant instants that workers logged: every window
//! `[t0, t1]` holds at most `capacity + rate * (t1 - t0)` grants, plus a tolerance derived
//! from the lateness measured in the same run. The argument is in the header of
//! tests/tests/soak_overshoot.rs; the soak, the fleet, the multi-limit and the
//! partitioned-quota tests share it.

use std::fmt;

use crate::wall::{NS_PER_MS, NS_PER_S};

/// One grant as a worker logged it, ns since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Just before the call was sent.
    pub start: i128,
    /// When `acquire()` returned: the client may act.
    pub done: i128,
    /// The wait the server asked for (`wait_ms`), which the client slept.
    pub slept: i128,
}

impl Sample {
    /// How much later than `start + slept` the call returned: round trip, timer, scheduling.
    pub fn lateness(&self) -> i128 {
        self.done - self.start - self.slept
    }

    /// `SAMPLE <start> <done> <slept>`, as a worker prints it.
    pub fn line(&self) -> String {
        format!("SAMPLE {} {} {}", self.start, self.done, self.slept)
    }

    /// The numbers after `SAMPLE` in [`Sample::line`].
    pub fn parse(words: &[&str]) -> Sample {
        let number = |text: &str| -> i128 { text.parse().expect("a number") };
        match words {
            [start, done, slept] => Sample {
                start: number(start),
                done: number(done),
                slept: number(slept),
            },
            other => panic!("not a sample: {other:?}"),
        }
    }
}

/// What [`check_windows`] measured, in tokens and ns.
#[derive(Clone, Debug)]
pub struct Windows {
    pub grants: usize,
    /// From `t0` to the last grant, ns.
    pub duration: i128,
    /// Grants / (capacity + rate * duration).
    pub utilisation: f64,
    /// Largest `grants - (capacity + rate * (t1 - t0))` over all windows, in tokens, and
    /// where (offsets from `t0`, ns, and the grants in it).
    pub worst_window: f64,
    pub worst_at: (i128, i128, usize),
    /// Smallest `capacity + rate * (c_k - t0 + g) - k`, tokens: never negative.
    pub cumulative_margin: f64,
    pub max_lateness: i128,
    pub median_lateness: i128,
    pub p99_lateness: i128,
    /// `rate * (max lateness + 1 ms + g)`, tokens.
    pub tolerance: f64,
}

impl fmt::Display for Windows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} grants in {:.3} s, utilisation {:.3}; worst window {:+.3} tokens over \
             capacity + rate * window (tolerance {:.3}); smallest margin from the full bucket \
             {:.3} tokens; lateness median {:.3} ms, max {:.3} ms",
            self.grants,
            self.duration as f64 / 1e9,
            self.utilisation,
            self.worst_window,
            self.tolerance,
            self.cumulative_margin,
            self.median_lateness as f64 / 1e6,
            self.max_lateness as f64 / 1e6,
        )
    }
}

/// Checks and measures the grants; `t0` is when the bucket was last known full (before the
/// first request), `g` how far the server's clock reading can trail the true time. From `t0`
/// the k-th grant (from 1) at `c_k` needs `k <= capacity + rate * (c_k - t0 + g)`, strictly;
/// every window holds at most `capacity + rate * window` grants plus a tolerance of `rate *
/// (max lateness + 1 ms + g)`, the bunching that late grants can make. Panics on a breach.
pub fn check_windows(samples: &[Sample], t0: i128, g: i128, capacity: u64, rate: u64) -> Windows {
    assert!(!samples.is_empty(), "no grants");
    let (capacity, rate) = (i128::from(capacity), i128::from(rate));
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(|s| s.done);

    for s in &sorted {
        assert!(
            s.lateness() >= 0,
            "a grant returned {} ns before the wait the server asked for: {s:?}",
            -s.lateness()
        );
    }
    let mut lateness: Vec<i128> = sorted.iter().map(Sample::lateness).collect();
    lateness.sort_unstable();
    let max_lateness = *lateness.last().unwrap();
    let percentile = |p: usize| lateness[(lateness.len() - 1) * p / 100];

    // Strict, from the full bucket: the k-th grant (from 1) needs k <= capacity + rate *
    // (c_k - T0 + g). In tokens x 10^9 to stay in integers.
    let mut cumulative_margin = i128::MAX;
    for (index, s) in sorted.iter().enumerate() {
        let k = index as i128 + 1;
        let allowed = capacity * NS_PER_S + rate * (s.done - t0 + g);
        let margin = allowed - k * NS_PER_S;
        assert!(
            margin >= 0,
            "grant {k} came {} ms after the start, before the bucket allows it ({capacity} + \
             {rate}/s); the grants before it: {:?}",
            (s.done - t0) as f64 / 1e6,
            &sorted[index.saturating_sub(5)..=index]
        );
        cumulative_margin = cumulative_margin.min(margin);
    }

    // Every window [c_i, c_j], i <= j in time order: excess(i, j) = (j - i + 1) - capacity -
    // rate * (c_j - c_i). With A_k = k * 10^9 - rate * c_k, excess * 10^9 = A_j - A_i + 10^9 -
    // capacity * 10^9, so the worst window ending at j starts at the smallest A_i, i <= j:
    // one pass covers all n^2 windows (ties included: among equal instants the earliest
    // index has the smallest A).
    let tolerance_nano = rate * (max_lateness + NS_PER_MS + g);
    let mut worst = i128::MIN;
    let mut worst_at = (0, 0, 0);
    let mut min_a = (i128::MAX, 0usize);
    for (j, s) in sorted.iter().enumerate() {
        let a_j = j as i128 * NS_PER_S - rate * s.done;
        if a_j < min_a.0 {
            min_a = (a_j, j);
        }
        let excess = a_j - min_a.0 + NS_PER_S - capacity * NS_PER_S;
        if excess > worst {
            worst = excess;
            worst_at = (sorted[min_a.1].done - t0, s.done - t0, j - min_a.1 + 1);
        }
        if excess > tolerance_nano {
            let i = min_a.1;
            panic!(
                "{} grants in the {:.3} ms from {:.3} ms after the start: {:.3} tokens over \
                 capacity + rate * window, tolerance {:.3} (rate * (max lateness {:.3} ms + \
                 1 ms + {g} ns)); grants: {:?}",
                j - i + 1,
                (s.done - sorted[i].done) as f64 / 1e6,
                (sorted[i].done - t0) as f64 / 1e6,
                excess as f64 / 1e9,
                tolerance_nano as f64 / 1e9,
                max_lateness as f64 / 1e6,
                &sorted[i..=j.min(i + 40)]
            );
        }
    }

    let duration = sorted.last().unwrap().done - t0;
    let allowed = (capacity * NS_PER_S + rate * duration) as f64 / 1e9;
    Windows {
        grants: sorted.len(),
        duration,
        utilisation: sorted.len() as f64 / allowed,
        worst_window: worst as f64 / 1e9,
        worst_at,
        cumulative_margin: cumulative_margin as f64 / 1e9,
        max_lateness,
        median_lateness: percentile(50),
        p99_lateness: percentile(99),
        tolerance: tolerance_nano as f64 / 1e9,
    }
}

/// Largest `grants - (burst + rate x (t1 - t0))` over every window `[t0, t1]` of these
/// sorted instants, in tokens (the one-pass argument of [`check_windows`], without its tolerance: for instants that are not
/// samples).
pub fn worst_excess(sorted: &[i128], burst: u64, rate: u64) -> f64 {
    let (burst, rate) = (i128::from(burst), i128::from(rate));
    let mut worst = i128::MIN;
    let mut min_a = i128::MAX;
    for (j, &t) in sorted.iter().enumerate() {
        let a_j = j as i128 * NS_PER_S - rate * t;
        min_a = min_a.min(a_j);
        worst = worst.max(a_j - min_a + NS_PER_S - burst * NS_PER_S);
    }
    worst as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(done_ms: i128) -> Sample {
        Sample {
            start: done_ms * NS_PER_MS,
            done: done_ms * NS_PER_MS,
            slept: 0,
        }
    }

    #[test]
    fn analysis_of_a_perfect_bucket() {
        // capacity 2, 10/s: two at once, then one every 100 ms.
        let samples: Vec<Sample> = [0, 0, 100, 200, 300].into_iter().map(at).collect();
        let f = check_windows(&samples, 0, 0, 2, 10);
        assert_eq!(f.grants, 5);
        assert_eq!(f.worst_window, 0.0, "{f:?}");
        assert_eq!(f.worst_at, (0, 0, 2), "two at once fill the bucket's burst");
        assert_eq!(f.cumulative_margin, 0.0);
        assert_eq!(f.max_lateness, 0);
        assert!((f.tolerance - 0.01).abs() < 1e-12, "10/s x 1 ms: {f:?}");
        assert!((f.utilisation - 1.0).abs() < 1e-12, "{f:?}");
    }

    #[test]
    fn analysis_allows_a_bunch_within_the_lateness() {
        // capacity 1, 10/s. The grant due at 100 ms (reserved at 0 with a wait of 100 ms) came
        // 50 ms late, bunching with the one due at 200 ms: the window [150, 200] holds 2 grants
        // where the bucket allows 1 + 0.5. The lateness, 50 ms, gives a tolerance of
        // 10/s x (50 + 1) ms = 0.51 token, which covers the 0.5 over.
        let mut late = at(150);
        late.start = 0;
        late.slept = 100 * NS_PER_MS;
        let samples = vec![at(0), late, at(200)];
        let f = check_windows(&samples, 0, 0, 1, 10);
        assert_eq!(f.max_lateness, 50 * NS_PER_MS);
        assert!((f.tolerance - 0.51).abs() < 1e-12, "{f:?}");
        assert!((f.worst_window - 0.5).abs() < 1e-12, "{f:?}");
        assert_eq!(f.worst_at, (150 * NS_PER_MS, 200 * NS_PER_MS, 2));
    }

    #[test]
    #[should_panic(expected = "before the bucket allows it")]
    fn analysis_rejects_an_early_grant() {
        // capacity 2, 10/s: a third grant at 50 ms is 50 ms early.
        let samples: Vec<Sample> = [0, 0, 50].into_iter().map(at).collect();
        check_windows(&samples, 0, 0, 2, 10);
    }

    #[test]
    #[should_panic(expected = "over capacity + rate * window")]
    fn analysis_rejects_a_bunch_beyond_the_lateness() {
        // capacity 2, 10/s, grants well spaced from the start, but four at 1000 ms: the window
        // [1000, 1000] holds 4 > 2 + tolerance (no lateness: 0.01).
        let samples: Vec<Sample> = [0, 0, 600, 700, 1000, 1000, 1000, 1000]
            .into_iter()
            .map(at)
            .collect();
        check_windows(&samples, 0, 0, 2, 10);
    }
}
