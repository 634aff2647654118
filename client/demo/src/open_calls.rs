//! The supplier's calls open at once: its limit on them (above it a 429, refused for
//! concurrency, whatever its rate allows), the slow spell that makes calls stay open longer
//! (so that concurrency rises exactly when the supplier struggles), and the count it keeps of
//! them. Pure: time comes in as arguments, so the rules are tested on explicit instants.

use std::time::{Duration, Instant};

use serde::Serialize;

/// From `from_s` to `until_s` after a phase's start, every call the supplier serves takes
/// `min_ms` to `max_ms` (spread evenly, not at random: runs compare); outside it, no time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SlowSpell {
    pub from_s: f64,
    pub until_s: f64,
    pub min_ms: u64,
    pub max_ms: u64,
}

/// The golden ratio's fraction: successive multiples of it spread evenly over [0, 1).
const SPREAD: f64 = 0.618_033_988_749_895;

impl SlowSpell {
    /// Why a spell cannot be, in the flags' words, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if !(self.from_s >= 0.0 && self.from_s.is_finite()) {
            return Err(format!(
                "--slow-from {} must be 0 or more seconds",
                self.from_s
            ));
        }
        if !(self.until_s > self.from_s && self.until_s.is_finite()) {
            return Err(format!(
                "--slow-until {} must be after --slow-from {}",
                self.until_s, self.from_s
            ));
        }
        if self.min_ms > self.max_ms {
            return Err(format!(
                "--slow-min-ms {} is above --slow-max-ms {}: give the shorter first",
                self.min_ms, self.max_ms
            ));
        }
        Ok(())
    }

    /// How long the `n`-th call served (counted from 0 over the run) takes when it arrives
    /// `since_start` after its phase's start: inside the spell, its share of `min..=max`;
    /// outside, nothing.
    pub fn latency(&self, since_start: Duration, n: u64) -> Duration {
        let t = since_start.as_secs_f64();
        if t < self.from_s || t >= self.until_s {
            return Duration::ZERO;
        }
        let share = (n as f64 * SPREAD).fract();
        let spread = (self.max_ms - self.min_ms) as f64 * share;
        Duration::from_millis(self.min_ms) + Duration::from_secs_f64(spread / 1e3)
    }
}

/// The supplier's count of one integrator's calls open, after a call came in or went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenChange {
    pub at: Instant,
    pub open: u32,
}

/// The most calls open in each `bin` from `start` over `bins` bins (the count as it stood
/// when each bin began, and every change inside it); a change before `start` counts in the
/// first bin, one after the last bin in the last.
pub fn open_per_bin(
    changes: &[OpenChange],
    start: Instant,
    bin: Duration,
    bins: usize,
) -> Vec<u32> {
    let mut most = vec![0u32; bins];
    if bins == 0 || bin.is_zero() {
        return most;
    }
    let mut level = 0u32;
    let mut next_bin = 0usize;
    for change in changes {
        let offset = change.at.saturating_duration_since(start);
        let index = ((offset.as_secs_f64() / bin.as_secs_f64()) as usize).min(bins - 1);
        // The bins up to this change's held the level as it was.
        while next_bin < index {
            most[next_bin] = most[next_bin].max(level);
            next_bin += 1;
        }
        most[index] = most[index].max(level).max(change.open);
        level = change.open;
        next_bin = next_bin.max(index);
    }
    for slot in most.iter_mut().skip(next_bin) {
        *slot = (*slot).max(level);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spell() -> SlowSpell {
        SlowSpell {
            from_s: 1.0,
            until_s: 3.0,
            min_ms: 400,
            max_ms: 800,
        }
    }

    #[test]
    fn slow_only_inside_the_spell_and_spread_over_its_range() {
        let s = spell();
        assert_eq!(s.latency(Duration::from_millis(999), 5), Duration::ZERO);
        assert_eq!(s.latency(Duration::from_secs(3), 5), Duration::ZERO);
        assert_eq!(
            s.latency(Duration::from_secs(1), 0),
            Duration::from_millis(400)
        );
        let inside: Vec<Duration> = (0..50)
            .map(|n| s.latency(Duration::from_secs(2), n))
            .collect();
        assert!(inside
            .iter()
            .all(|&d| d >= Duration::from_millis(400) && d <= Duration::from_millis(800)));
        // Spread: both halves of the range are used, about equally.
        let long = inside
            .iter()
            .filter(|&&d| d > Duration::from_millis(600))
            .count();
        assert!((20..=30).contains(&long), "{long}");
    }

    #[test]
    fn a_spell_says_what_is_wrong_with_it() {
        assert!(spell().check().is_ok());
        let backwards = SlowSpell {
            until_s: 0.5,
            ..spell()
        };
        assert!(backwards.check().unwrap_err().contains("--slow-until"));
        let inverted = SlowSpell {
            min_ms: 900,
            ..spell()
        };
        assert!(inverted.check().unwrap_err().contains("--slow-min-ms"));
        let negative = SlowSpell {
            from_s: -1.0,
            ..spell()
        };
        assert!(negative.check().unwrap_err().contains("--slow-from"));
    }

    #[test]
    fn the_most_open_per_bin_keeps_every_peak() {
        let start = Instant::now();
        let at = |ms: u64, open: u32| OpenChange {
            at: start + Duration::from_millis(ms),
            open,
        };
        // Up to 3 within the first bin, back to 2 by its end; held at 2 until 350 ms, in the
        // fourth, which then falls to 1 and 0; 0 from the fifth.
        let changes = [
            at(10, 1),
            at(20, 2),
            at(30, 3),
            at(40, 2),
            at(350, 1),
            at(360, 0),
        ];
        let bins = open_per_bin(&changes, start, Duration::from_millis(100), 6);
        assert_eq!(bins, [3, 2, 2, 2, 0, 0]);
        assert_eq!(
            open_per_bin(&[], start, Duration::from_millis(100), 2),
            [0, 0]
        );
        // One past the end lands in the last bin.
        assert_eq!(
            open_per_bin(&[at(950, 4)], start, Duration::from_millis(100), 3),
            [0, 0, 4]
        );
    }
}
