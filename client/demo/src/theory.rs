//! What the scenario should show, derived from the knobs rather than written down: the
//! bucket's ideal schedule, the upstream's verdicts replayed on it, the allowance left
//! over a run, and whether a bucket shape fits the upstream's rule at all.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use demo_support::bucket::retry_after_seconds;

use crate::cli::{RunArgs, StrategyArg, MAX_ATTEMPTS};
use crate::limit::{Allowance, UpstreamMode, Verdict};

/// The bucket phase on an ideal machine (no time on the wire, no time in Redis), with the
/// replicas obeying the supplier: every 429 pauses the shared bucket for its `Retry-After`
/// (`THROTTLE.PAUSE`'s rule), and the call takes a token again and is sent again, at most
/// `max_attempts` sends in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Obeyed {
    /// Every send, in arrival order, and whether the upstream served it.
    pub arrivals: Vec<(Duration, bool)>,
    /// Each pause: from the 429 to the end of its `Retry-After`.
    pub pauses: Vec<(Duration, Duration)>,
    /// Calls refused on their last attempt.
    pub failed: u64,
}

impl Obeyed {
    pub fn refused(&self) -> u64 {
        self.arrivals.iter().filter(|a| !a.1).count() as u64
    }

    pub fn served(&self) -> u64 {
        self.arrivals.len() as u64 - self.refused()
    }

    /// The last arrival.
    pub fn last(&self) -> Duration {
        self.arrivals.last().map_or(Duration::ZERO, |a| a.0)
    }
}

/// The bucket phase the knobs make, on an ideal machine: [`obey`] with the knobs' quota,
/// calls, bucket and strategy, and `interval` the bucket's time per token as the server
/// computes it.
pub fn ideal_bucket_phase(args: &RunArgs, interval: Duration) -> Obeyed {
    obey(
        args.upstream_mode,
        args.quota,
        args.total_calls(),
        args.capacity,
        interval,
        args.strategy(),
        MAX_ATTEMPTS,
    )
}

/// Runs the bucket phase of `calls` simultaneous calls through a full bucket of `capacity`
/// refilling one token per `interval` (GCRA, in nanoseconds, as the server keeps it):
/// - reserve: every call reserves its slot at the start; a call refused reserves again at
///   the end of the queue. A pause never moves a slot already granted.
/// - poll: a call takes a token only when one is there, so the bucket holds no slot for
///   anyone, and a pause holds back every call that has not sent yet.
pub fn obey(
    mode: UpstreamMode,
    quota: u32,
    calls: u64,
    capacity: u64,
    interval: Duration,
    strategy: StrategyArg,
    max_attempts: u32,
) -> Obeyed {
    let i = interval.as_nanos();
    let burst = u128::from(capacity) * i;
    // The instant the bucket is full again, in ns after the start (full at the start).
    let mut state: u128 = 0;
    let mut upstream = Allowance::new(mode, quota);
    let mut out = Obeyed::default();
    let at = |t: u128| Duration::from_nanos(u64::try_from(t).unwrap_or(u64::MAX));
    // Sends `(t, attempt)` and applies the answer; true when the call must send again.
    let mut send = |t: u128, attempt: u32, state: &mut u128, out: &mut Obeyed| -> bool {
        match upstream.check(at(t)) {
            Verdict::Served => {
                out.arrivals.push((at(t), true));
                false
            }
            Verdict::Refused { retry_after } => {
                out.arrivals.push((at(t), false));
                let pause = u128::from(retry_after_seconds(retry_after)) * 1_000_000_000;
                // THROTTLE.PAUSE: the next token `pause` from now, then one per interval.
                *state = (*state).max(t + pause + burst - i);
                out.pauses.push((at(t), at(t + pause)));
                if attempt < max_attempts {
                    true
                } else {
                    out.failed += 1;
                    false
                }
            }
        }
    };
    match strategy {
        StrategyArg::Reserve => {
            // A reservation at `t`: the slot after the last one granted.
            let reserve = |state: &mut u128, t: u128| -> u128 {
                *state = (*state).max(t) + i;
                state.saturating_sub(burst).max(t)
            };
            let mut slots = BinaryHeap::new();
            for call in 0..calls {
                slots.push(Reverse((reserve(&mut state, 0), call, 1u32)));
            }
            while let Some(Reverse((t, call, attempt))) = slots.pop() {
                if send(t, attempt, &mut state, &mut out) {
                    slots.push(Reverse((reserve(&mut state, t), call, attempt + 1)));
                }
            }
        }
        StrategyArg::Poll => {
            let mut waiting: VecDeque<u32> = (0..calls).map(|_| 1).collect();
            let mut now = 0;
            while let Some(attempt) = waiting.pop_front() {
                // The first instant a token is there, and whoever asks first takes it.
                let t = state.saturating_sub(burst - i).max(now);
                state = state.max(t) + i;
                now = t;
                if send(t, attempt, &mut state, &mut out) {
                    waiting.push_back(attempt + 1);
                }
            }
        }
    }
    out
}

/// The most of `calls` the upstream's rule can serve when they arrive over `span` (from the
/// first arrival to the last) and its allowance is whole at the first: `quota`, plus one per
/// whole token its refill brings in the span for a bucket, plus `quota` per further second
/// begun for a window. The first `quota` are always served, so the count lies between
/// `min(quota, calls)` and this.
pub fn most_served(mode: UpstreamMode, quota: u32, calls: u64, span: Duration) -> u64 {
    let (quota, span_ns) = (u128::from(quota), span.as_nanos());
    let most = match mode {
        UpstreamMode::Bucket => quota + span_ns * quota / 1_000_000_000,
        UpstreamMode::Window => quota * (span_ns / 1_000_000_000 + 1),
    };
    u64::try_from(most).unwrap_or(u64::MAX).min(calls)
}

/// The least room the upstream's rule left over a phase, given the arrivals' offsets in
/// seconds from a moment its allowance was whole (negative: the fleet went over it).
/// Bucket: under `quota + quota·t`. Window: under `quota` in each arrival's trailing second.
pub fn headroom(mode: UpstreamMode, quota: u32, arrivals: &[f64]) -> Option<f64> {
    let q = f64::from(quota);
    match mode {
        UpstreamMode::Bucket => arrivals
            .iter()
            .enumerate()
            .map(|(i, &t)| q + q * t.max(0.0) - (i + 1) as f64)
            .reduce(f64::min),
        UpstreamMode::Window => trailing_counts(arrivals)
            .into_iter()
            .map(|inside| q - inside as f64)
            .reduce(f64::min),
    }
}

/// For each arrival (sorted, in seconds), the arrivals in its window (t - 1 s, t], itself
/// included.
pub fn trailing_counts(arrivals: &[f64]) -> Vec<usize> {
    let mut oldest = 0;
    arrivals
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            while arrivals[oldest] <= t - 1.0 {
                oldest += 1;
            }
            i + 1 - oldest
        })
        .collect()
}

/// Why a bucket of `capacity` and `rate` does or does not keep the fleet inside the
/// upstream's rule, with a shape that does when it does not.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub fits: bool,
    /// One sentence: the condition, with the numbers.
    pub reason: String,
    /// `(capacity, rate)` that would fit, when this one does not.
    pub example: Option<(u64, u64)>,
}

pub fn fit(mode: UpstreamMode, quota: u32, capacity: u64, rate: f64) -> Fit {
    let q = f64::from(quota);
    match mode {
        UpstreamMode::Bucket => {
            // capacity + rate·t <= quota + quota·t for every t >= 0.
            let fits = capacity <= u64::from(quota) && rate <= q;
            Fit {
                fits,
                reason: format!(
                    "the upstream's bucket holds {quota} and refills {quota}/s, so the shared \
                     bucket fits when capacity <= {quota} and rate <= {quota}/s (here {capacity} \
                     and {}/s)",
                    rate
                ),
                example: (!fits).then(|| (capacity.min(u64::from(quota)), u64::from(quota))),
            }
        }
        UpstreamMode::Window => {
            // In any one-second span a full bucket releases its burst plus one second of
            // refill; the window takes `quota` in any such span.
            let released = capacity as f64 + rate;
            let fits = released <= q;
            let half = u64::from(quota).div_ceil(2);
            Fit {
                fits,
                reason: format!(
                    "a strict sliding window needs capacity + rate <= quota in any second: \
                     {capacity} + {} = {} {} {quota}",
                    rate,
                    released,
                    if fits { "<=" } else { ">" }
                ),
                // Half burst, half refill; with a quota of 1 no refill rate is left.
                example: (!fits && quota >= 2).then(|| (half, u64::from(quota) - half)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL_9: Duration = Duration::from_nanos(111_111_112);

    /// When each of `calls` simultaneous calls may go through a full bucket: `capacity` at
    /// once, then one per interval.
    fn bucket_schedule(calls: u64, capacity: u64, interval: Duration) -> Vec<Duration> {
        (0..calls)
            .map(|k| interval * u32::try_from((k + 1).saturating_sub(capacity)).unwrap())
            .collect()
    }

    /// The upstream's verdicts on calls arriving exactly at `arrivals`: (served, refused).
    fn replay(mode: UpstreamMode, quota: u32, arrivals: &[Duration]) -> (u64, u64) {
        let mut allowance = Allowance::new(mode, quota);
        let served = arrivals
            .iter()
            .filter(|&&t| allowance.check(t) == Verdict::Served)
            .count() as u64;
        (served, arrivals.len() as u64 - served)
    }

    #[test]
    fn one_attempt_reserved_is_the_plain_schedule_replayed() {
        for (mode, capacity) in [(UpstreamMode::Window, 8), (UpstreamMode::Bucket, 11)] {
            let once = obey(mode, 10, 40, capacity, INTERVAL_9, StrategyArg::Reserve, 1);
            let schedule = bucket_schedule(40, capacity, INTERVAL_9);
            assert_eq!(once.refused(), replay(mode, 10, &schedule).1);
            let sent: Vec<Duration> = once.arrivals.iter().map(|a| a.0).collect();
            assert_eq!(sent, schedule);
        }
    }

    #[test]
    fn forty_calls_through_8_at_9_per_second_take_32_intervals() {
        let schedule = bucket_schedule(40, 8, INTERVAL_9);
        assert_eq!(schedule.len(), 40);
        assert!(schedule[..8].iter().all(|t| t.is_zero()));
        assert_eq!(schedule[8], INTERVAL_9);
        assert_eq!(schedule[39], INTERVAL_9 * 32);
        let total = schedule[39].as_secs_f64();
        assert!((total - 3.5556).abs() < 0.0001, "{total}");
        assert_eq!(bucket_schedule(5, 8, INTERVAL_9), vec![Duration::ZERO; 5]);
    }

    #[test]
    fn the_scenario_replayed_on_both_upstreams() {
        let direct = vec![Duration::ZERO; 40];
        let shared = bucket_schedule(40, 8, INTERVAL_9);
        assert_eq!(replay(UpstreamMode::Bucket, 10, &direct), (10, 30));
        assert_eq!(replay(UpstreamMode::Bucket, 10, &shared), (40, 0));
        assert_eq!(replay(UpstreamMode::Window, 10, &direct), (10, 30));
        let (_, refused) = replay(UpstreamMode::Window, 10, &shared);
        assert!(refused > 0, "8 + 9/s is too much for a window of 10");
        // The shape the output suggests for a window does fit it.
        let five = bucket_schedule(40, 5, Duration::from_millis(200));
        assert_eq!(replay(UpstreamMode::Window, 10, &five), (40, 0));
    }

    #[test]
    fn obeying_the_window_pauses_the_fleet_once_when_polling() {
        let poll = obey(
            UpstreamMode::Window,
            10,
            40,
            8,
            INTERVAL_9,
            StrategyArg::Poll,
            5,
        );
        // 8 at once, 2 more refills, and the 11th call in the first second is refused at
        // 3 intervals, told to come back in 1 s (0.667 s rounded up): the whole fleet waits,
        // then goes on at 9/s with no burst, which the window of 10 takes.
        assert_eq!((poll.served(), poll.refused(), poll.failed), (40, 1, 0));
        assert_eq!(
            poll.pauses,
            [(INTERVAL_9 * 3, INTERVAL_9 * 3 + Duration::from_secs(1))]
        );
        assert_eq!(poll.last(), INTERVAL_9 * 32 + Duration::from_secs(1));
        let after: Vec<_> = poll.arrivals.iter().skip(11).collect();
        assert_eq!(after[0].0, INTERVAL_9 * 3 + Duration::from_secs(1));
        assert!(after.iter().all(|a| a.1));
    }

    #[test]
    fn a_pause_does_not_move_reservations_already_granted() {
        let reserve = obey(
            UpstreamMode::Window,
            10,
            40,
            8,
            INTERVAL_9,
            StrategyArg::Reserve,
            5,
        );
        // Every slot was reserved at the start: the 6 the window refuses (as without any
        // pause) still go, each pauses (a no-op: the bucket owes slots 3 s ahead) and
        // reserves again at the end of the queue.
        assert_eq!((reserve.served(), reserve.refused()), (40, 6));
        assert_eq!(reserve.pauses.len(), 6);
        assert_eq!(reserve.last(), INTERVAL_9 * 38);
        // Nothing to obey against a bucket that fits: the plain schedule.
        let fits = obey(
            UpstreamMode::Bucket,
            10,
            40,
            8,
            INTERVAL_9,
            StrategyArg::Reserve,
            5,
        );
        let schedule = bucket_schedule(40, 8, INTERVAL_9);
        assert_eq!(
            fits.arrivals,
            schedule.iter().map(|&t| (t, true)).collect::<Vec<_>>()
        );
        assert!(fits.pauses.is_empty());
        let polled = obey(
            UpstreamMode::Bucket,
            10,
            40,
            8,
            INTERVAL_9,
            StrategyArg::Poll,
            5,
        );
        assert_eq!(polled.arrivals, fits.arrivals);
    }

    #[test]
    fn a_rate_above_the_window_is_paused_again_and_again() {
        // 12/s with no burst is still over a window of 10: every second or so another 429
        // and another pause; the pauses bring the fleet down to what the window takes.
        let fast = obey(
            UpstreamMode::Window,
            10,
            40,
            8,
            Duration::from_nanos(83_333_334),
            StrategyArg::Poll,
            5,
        );
        assert!(fast.pauses.len() > 1, "{fast:?}");
        assert_eq!(fast.served(), 40);
    }

    #[test]
    fn most_served_over_an_arrival_span() {
        let ms = Duration::from_millis;
        // 40 calls at one instant: the burst. Over 225 ms a bucket of 10/s refills 2 more.
        assert_eq!(most_served(UpstreamMode::Bucket, 10, 40, ms(0)), 10);
        assert_eq!(most_served(UpstreamMode::Bucket, 10, 40, ms(225)), 12);
        assert_eq!(most_served(UpstreamMode::Bucket, 10, 40, ms(199)), 11);
        assert_eq!(most_served(UpstreamMode::Bucket, 10, 40, ms(200)), 12);
        assert_eq!(most_served(UpstreamMode::Bucket, 10, 5, ms(900)), 5);
        // A window takes `quota` per second begun, however the calls fall in it.
        assert_eq!(most_served(UpstreamMode::Window, 10, 40, ms(999)), 10);
        assert_eq!(most_served(UpstreamMode::Window, 10, 40, ms(1000)), 20);
        // The bound is tight: 40 arrivals spread evenly over 225 ms get exactly 12 served
        // (the loaded run), 40 at one instant exactly 10.
        let arrivals: Vec<Duration> = (0..40).map(|i| ms(i * 225 / 39)).collect();
        assert_eq!(replay(UpstreamMode::Bucket, 10, &arrivals), (12, 28));
        assert_eq!(replay(UpstreamMode::Bucket, 10, &[ms(0); 40]), (10, 30));
    }

    #[test]
    fn fits_are_derived_from_the_numbers() {
        let bucket = fit(UpstreamMode::Bucket, 10, 8, 9.0);
        assert!(bucket.fits && bucket.example.is_none(), "{bucket:?}");
        assert!(!fit(UpstreamMode::Bucket, 10, 11, 9.0).fits);
        assert!(!fit(UpstreamMode::Bucket, 10, 8, 10.5).fits);

        let window = fit(UpstreamMode::Window, 10, 8, 9.0);
        assert!(!window.fits);
        assert_eq!(window.example, Some((5, 5)));
        assert!(
            window.reason.contains("8 + 9 = 17 > 10"),
            "{}",
            window.reason
        );
        assert!(fit(UpstreamMode::Window, 10, 5, 5.0).fits);
        assert!(fit(UpstreamMode::Window, 10, 1, 9.0).fits);
        assert_eq!(fit(UpstreamMode::Window, 1, 1, 0.5).example, None);
        assert_eq!(fit(UpstreamMode::Window, 7, 8, 9.0).example, Some((4, 3)));
    }

    #[test]
    fn allowance_and_headroom() {
        let secs = |schedule: Vec<Duration>| -> Vec<f64> {
            schedule.iter().map(Duration::as_secs_f64).collect()
        };
        let direct = vec![0.0; 40];
        assert_eq!(headroom(UpstreamMode::Bucket, 10, &direct), Some(-30.0));
        assert_eq!(headroom(UpstreamMode::Window, 10, &direct), Some(-30.0));
        let shared = secs(bucket_schedule(40, 8, INTERVAL_9));
        let room = headroom(UpstreamMode::Bucket, 10, &shared).unwrap();
        assert!((room - 2.0).abs() < 1e-6, "{room}");
        // 8 + 9 in a second is 17 against a window of 10 (16 land in one: the 9th refill
        // comes just as the burst leaves); 5 + 5 fits, with the same one to spare.
        assert_eq!(headroom(UpstreamMode::Window, 10, &shared), Some(-6.0));
        let five = secs(bucket_schedule(40, 5, Duration::from_millis(200)));
        assert_eq!(headroom(UpstreamMode::Window, 10, &five), Some(1.0));
        assert_eq!(headroom(UpstreamMode::Bucket, 10, &[]), None);
        assert_eq!(trailing_counts(&[0.0, 0.5, 1.0, 1.0, 2.5]), [1, 2, 2, 3, 1]);
    }
}
