//! The upstream's own limit per integrator, as the supplier enforces it. Pure: time comes in
//! as an argument (a duration since any fixed epoch), so the rules are tested on explicit
//! instants and the theory can replay them on an ideal schedule.

use std::collections::VecDeque;
use std::time::Duration;

use clap::ValueEnum;
use demo_support::bucket::Bucket;
use serde::{Deserialize, Serialize};

const SECOND: Duration = Duration::from_secs(1);

/// How the upstream counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamMode {
    /// A bucket of `quota` calls refilling at `quota` per second (a card-network style API).
    Bucket,
    /// At most `quota` calls in any one-second span (the strictest reading of "per second").
    Window,
}

impl UpstreamMode {
    /// The upstream's rule in words, as the report and the log say it.
    pub fn rule(self, quota: u32) -> String {
        match self {
            UpstreamMode::Bucket => {
                format!("a burst of {quota} refilling at {quota}/s per integrator")
            }
            UpstreamMode::Window => format!("{quota} in any one second per integrator"),
        }
    }
}

/// The upstream's answer to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Served,
    /// 429: come back after this long.
    Refused {
        retry_after: Duration,
    },
}

/// One integrator's allowance.
#[derive(Debug, Clone)]
pub struct Allowance {
    quota: u32,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Bucket(Bucket),
    /// The instants of the calls served in the last second.
    Window {
        served: VecDeque<Duration>,
    },
}

impl Allowance {
    pub fn new(mode: UpstreamMode, quota: u32) -> Allowance {
        assert!(quota > 0, "a quota of 0 would refuse everything");
        let kind = match mode {
            UpstreamMode::Bucket => Kind::Bucket(Bucket::new(quota.into(), quota.into())),
            UpstreamMode::Window => Kind::Window {
                served: VecDeque::with_capacity(quota as usize),
            },
        };
        Allowance { quota, kind }
    }

    /// Serves or refuses a call arriving at `now`. `now` must not go backwards.
    pub fn check(&mut self, now: Duration) -> Verdict {
        let quota = self.quota;
        match &mut self.kind {
            Kind::Bucket(bucket) => match bucket.take(1, now) {
                Ok(()) => Verdict::Served,
                Err(retry_after) => Verdict::Refused { retry_after },
            },
            Kind::Window { served } => {
                // The window is (now - 1 s, now]: a call exactly one second old has left it.
                while served.front().is_some_and(|&t| t + SECOND <= now) {
                    served.pop_front();
                }
                if served.len() < quota as usize {
                    served.push_back(now);
                    Verdict::Served
                } else {
                    let oldest = served[0];
                    Verdict::Refused {
                        retry_after: oldest + SECOND - now,
                    }
                }
            }
        }
    }

    /// What is left at `now`, as the supplier would tell its callers: the calls it would
    /// serve at once, and how long until one more is back (zero when the allowance is whole).
    /// For the bucket "one more" is the next token; for the window, the oldest call leaving
    /// it.
    pub fn remaining(&self, now: Duration) -> (u64, Duration) {
        match &self.kind {
            Kind::Bucket(bucket) => bucket.remaining(now),
            Kind::Window { served } => {
                let live: Vec<_> = served.iter().filter(|&&t| t + SECOND > now).collect();
                let left = (self.quota as usize).saturating_sub(live.len()) as u64;
                let back_in = live
                    .first()
                    .map_or(Duration::ZERO, |&&t| (t + SECOND).saturating_sub(now));
                (left, back_in)
            }
        }
    }

    /// How long after `now` the whole allowance is available again.
    pub fn full_in(&self, now: Duration) -> Duration {
        match &self.kind {
            Kind::Bucket(bucket) => bucket.full_in(now),
            Kind::Window { served } => served
                .back()
                .map_or(Duration::ZERO, |&t| (t + SECOND).saturating_sub(now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn served(allowance: &mut Allowance, now: Duration) -> bool {
        allowance.check(now) == Verdict::Served
    }

    #[test]
    fn bucket_serves_a_burst_of_quota_then_one_per_interval() {
        let mut a = Allowance::new(UpstreamMode::Bucket, 10);
        for _ in 0..10 {
            assert!(served(&mut a, ms(0)));
        }
        assert_eq!(
            a.check(ms(0)),
            Verdict::Refused {
                retry_after: ms(100)
            }
        );
        assert_eq!(a.check(ms(99)), Verdict::Refused { retry_after: ms(1) });
        assert!(served(&mut a, ms(100)));
        assert!(!served(&mut a, ms(150)));
        assert!(served(&mut a, ms(200)));
        assert_eq!(a.full_in(ms(200)), ms(1000));
        assert_eq!(a.full_in(ms(5000)), Duration::ZERO);
    }

    #[test]
    fn remaining_is_what_the_next_calls_would_find() {
        let mut a = Allowance::new(UpstreamMode::Bucket, 10);
        assert_eq!(a.remaining(ms(0)), (10, Duration::ZERO));
        for _ in 0..10 {
            assert!(served(&mut a, ms(0)));
        }
        assert_eq!(a.remaining(ms(0)), (0, ms(100)));
        assert_eq!(a.remaining(ms(40)), (0, ms(60)));
        assert_eq!(a.remaining(ms(100)), (1, ms(100)));
        assert_eq!(a.remaining(ms(250)), (2, ms(50)));
        assert_eq!(a.remaining(ms(1000)), (10, Duration::ZERO));
        // What it says is what it does: at 40 ms the next call is 60 ms away.
        assert!(!served(&mut a, ms(99)));
        assert!(served(&mut a, ms(100)));
        assert_eq!(a.remaining(ms(100)), (0, ms(100)));

        let mut w = Allowance::new(UpstreamMode::Window, 3);
        assert!(served(&mut w, ms(0)));
        assert!(served(&mut w, ms(500)));
        assert_eq!(w.remaining(ms(600)), (1, ms(400)));
        assert!(served(&mut w, ms(600)));
        assert_eq!(w.remaining(ms(700)), (0, ms(300)));
        assert_eq!(w.remaining(ms(1000)), (1, ms(500)));
    }

    #[test]
    fn bucket_lets_through_10_plus_10_per_second() {
        let mut a = Allowance::new(UpstreamMode::Bucket, 10);
        // One call every 10 ms from 0 to 3 s inclusive: 10 at first, then 10 per second.
        let served_count = (0..=300).filter(|i| served(&mut a, ms(i * 10))).count();
        assert_eq!(served_count, 10 + 30);
    }

    #[test]
    fn window_counts_any_one_second_span() {
        let mut a = Allowance::new(UpstreamMode::Window, 10);
        for i in 0..10 {
            assert!(served(&mut a, ms(900 + i)));
        }
        // A bucket would have refilled a token by 1000 ms; the window still holds 10.
        assert_eq!(
            a.check(ms(1000)),
            Verdict::Refused {
                retry_after: ms(900)
            }
        );
        assert!(!served(&mut a, ms(1899)));
        assert!(served(&mut a, ms(1900)));
        assert!(!served(&mut a, ms(1900)));
        assert_eq!(a.full_in(ms(1900)), ms(1000));
    }

    #[test]
    fn window_refuses_what_a_bucket_of_the_same_quota_serves() {
        // 10 at 0, then one every 100 ms: inside a bucket of 10 + 10/s, too much for a window.
        let arrivals: Vec<_> = std::iter::repeat_n(ms(0), 10)
            .chain((1..=10).map(|i| ms(i * 100)))
            .collect();
        let mut bucket = Allowance::new(UpstreamMode::Bucket, 10);
        let mut window = Allowance::new(UpstreamMode::Window, 10);
        assert!(arrivals.iter().all(|&t| served(&mut bucket, t)));
        let refused = arrivals
            .iter()
            .filter(|&&t| !served(&mut window, t))
            .count();
        assert_eq!(
            refused, 9,
            "only the call at 1000 ms finds the first ten gone"
        );
    }
}
