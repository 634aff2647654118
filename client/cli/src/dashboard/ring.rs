//! The dashboard's memory (pure): the last samples of each quota, bounded in samples per quota
//! and in quotas.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use crate::status::{in_flight, last_wait_bound_ms, Row};

/// The last `capacity` items pushed, oldest first.
#[derive(Clone, Debug)]
pub(crate) struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    /// An empty ring of at most `capacity` items (at least 1).
    pub(crate) fn new(capacity: usize) -> Ring<T> {
        let capacity = capacity.max(1);
        Ring {
            items: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Adds `item`, dropping the oldest when full.
    pub(crate) fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
        }
        self.items.push_back(item);
    }

    /// Oldest first.
    pub(crate) fn iter(&self) -> std::collections::vec_deque::Iter<'_, T> {
        self.items.iter()
    }

    pub(crate) fn newest(&self) -> Option<&T> {
        self.items.back()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

/// One quota at one instant, from a `status` row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Sample {
    /// When it was taken, ms since the Unix epoch.
    pub(crate) at_ms: u64,
    /// Whole tokens (none: the server refused the PEEK).
    pub(crate) tokens: Option<u64>,
    /// Pause left, ms (0: not paused).
    pub(crate) paused_ms: u64,
    /// The rate's factor, basis points (10 000: not cut).
    pub(crate) factor_bp: u64,
    /// The fleet's wait p99 over its last period, ms (the bucket's upper bound; the last
    /// bound when above it; 0 with no wait); none without a report.
    pub(crate) wait_p99_ms: Option<u64>,
    /// The fleet's 429s over its last period; none without a report.
    pub(crate) responses_429: Option<u64>,
    /// The fleet's grants per second over its last period; none without a report.
    pub(crate) grants_per_s: Option<f64>,
    /// Calls in flight (slots held): the server's count, or where it was not read the sum the
    /// processes report; none when none is held and no process counts them.
    pub(crate) in_flight: Option<u64>,
    /// The cap on calls in flight the fleet reports; none without one.
    pub(crate) max_in_flight: Option<u64>,
}

impl Sample {
    /// The sample of `row` taken at `at_ms`.
    pub(crate) fn of(row: &Row, at_ms: u64) -> Sample {
        let state = row.state.as_ref();
        let fleet = row.fleet.as_ref();
        Sample {
            at_ms,
            tokens: state.map(|s| s.tokens),
            paused_ms: state.map_or(0, |s| s.paused_ms),
            factor_bp: state.map_or(10_000, |s| s.factor_bp),
            wait_p99_ms: fleet.map(|f| match (f.waits, f.wait_p99_le_ms) {
                (0, _) => 0,
                (_, Some(ms)) => ms,
                (_, None) => last_wait_bound_ms(),
            }),
            responses_429: fleet.map(|f| f.responses_429),
            grants_per_s: fleet.map(|f| f.grants_per_s),
            in_flight: in_flight(row),
            max_in_flight: fleet.and_then(|f| f.max_in_flight),
        }
    }
}

/// One quota's samples, with its quota as last seen.
#[derive(Clone, Debug)]
pub(crate) struct Charted {
    pub(crate) capacity: u64,
    pub(crate) rate: String,
    pub(crate) samples: Ring<Sample>,
}

/// The samples of at most `max_quotas` quotas, `per_quota` each; a quota not seen for a
/// whole window (`per_quota` periods) is forgotten, which makes room for another.
#[derive(Debug)]
pub(crate) struct History {
    per_quota: usize,
    max_quotas: usize,
    every_ms: u64,
    quotas: BTreeMap<String, Charted>,
    /// Quotas of the last record that found no room.
    left_out: usize,
}

impl History {
    pub(crate) fn new(per_quota: usize, max_quotas: usize, every_ms: u64) -> History {
        History {
            per_quota,
            max_quotas,
            every_ms,
            quotas: BTreeMap::new(),
            left_out: 0,
        }
    }

    /// How long the samples of a full ring cover, ms.
    pub(crate) fn window_ms(&self) -> u64 {
        self.every_ms.saturating_mul(self.per_quota as u64)
    }

    /// Records the rows of one `status` taken at `at_ms`, in their order (by key).
    pub(crate) fn record(&mut self, at_ms: u64, rows: &[Row]) {
        let window = self.window_ms();
        self.quotas.retain(|_, charted| {
            charted
                .samples
                .newest()
                .is_some_and(|s| s.at_ms.saturating_add(window) > at_ms)
        });
        self.left_out = 0;
        for row in rows {
            let sample = Sample::of(row, at_ms);
            if let Some(charted) = self.quotas.get_mut(&row.key) {
                charted.capacity = row.capacity;
                charted.rate.clone_from(&row.rate);
                charted.samples.push(sample);
            } else if self.quotas.len() < self.max_quotas {
                let mut samples = Ring::new(self.per_quota);
                samples.push(sample);
                self.quotas.insert(
                    row.key.clone(),
                    Charted {
                        capacity: row.capacity,
                        rate: row.rate.clone(),
                        samples,
                    },
                );
            } else {
                self.left_out += 1;
            }
        }
    }

    /// The quotas kept, by key.
    pub(crate) fn quotas(&self) -> impl Iterator<Item = (&String, &Charted)> {
        self.quotas.iter()
    }

    /// The oldest sample kept, if any.
    pub(crate) fn oldest_ms(&self) -> Option<u64> {
        self.quotas
            .values()
            .filter_map(|charted| charted.samples.iter().next().map(|s| s.at_ms))
            .min()
    }

    /// Quotas of the last record left out for want of room.
    pub(crate) fn left_out(&self) -> usize {
        self.left_out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::tests::row;

    #[test]
    fn a_ring_keeps_the_newest() {
        let mut ring = Ring::new(3);
        assert_eq!(ring.newest(), None);
        for i in 0..5 {
            ring.push(i);
        }
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!((ring.len(), ring.newest()), (3, Some(&4)));
        let mut one = Ring::new(0);
        one.push('a');
        one.push('b');
        assert_eq!(one.iter().collect::<String>(), "b");
    }

    #[test]
    fn a_sample_is_taken_from_a_row() {
        let sample = Sample::of(&row("a"), 5);
        assert_eq!(
            sample,
            Sample {
                at_ms: 5,
                tokens: Some(4),
                paused_ms: 1500,
                factor_bp: 5000,
                wait_p99_ms: Some(100_000),
                responses_429: Some(3),
                grants_per_s: Some(2.5),
                // The server's count, not the reported 2.
                in_flight: Some(3),
                max_in_flight: Some(4),
            }
        );
        let mut unread = row("c");
        unread.slots = None;
        assert_eq!(
            Sample::of(&unread, 5).in_flight,
            Some(2),
            "the reported sum"
        );
        let mut bare = row("b");
        bare.state = None;
        bare.slots = None;
        bare.fleet = None;
        let sample = Sample::of(&bare, 5);
        assert_eq!(
            (sample.tokens, sample.factor_bp, sample.wait_p99_ms),
            (None, 10_000, None)
        );
        assert_eq!((sample.in_flight, sample.max_in_flight), (None, None));
    }

    #[test]
    fn history_is_bounded_in_samples_and_quotas_and_forgets_the_gone() {
        // 3 samples of 2 quotas at most, one a second: a window of 3 s.
        let mut history = History::new(3, 2, 1000);
        assert_eq!(history.window_ms(), 3000);
        for t in 0..5 {
            history.record(t * 1000, &[row("a"), row("b"), row("c")]);
        }
        let kept: Vec<(&String, usize)> = history
            .quotas()
            .map(|(k, c)| (k, c.samples.len()))
            .collect();
        assert_eq!(kept, [(&"a".to_owned(), 3), (&"b".to_owned(), 3)]);
        assert_eq!(history.left_out(), 1);
        let times: Vec<u64> = history
            .quotas()
            .next()
            .unwrap()
            .1
            .samples
            .iter()
            .map(|s| s.at_ms)
            .collect();
        assert_eq!(times, [2000, 3000, 4000]);
        assert_eq!(history.oldest_ms(), Some(2000));
        // "a" goes away; within the window it stays, after it "c" takes its place.
        history.record(6000, &[row("b"), row("c")]);
        let keys = |history: &History| -> Vec<String> {
            history.quotas().map(|(k, _)| k.clone()).collect()
        };
        assert_eq!(keys(&history), ["a", "b"]);
        assert_eq!(history.left_out(), 1);
        history.record(7000, &[row("b"), row("c")]);
        assert_eq!(keys(&history), ["b", "c"]);
        assert_eq!(history.left_out(), 0);
    }
}
