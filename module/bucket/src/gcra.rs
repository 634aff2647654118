//! One take from a bucket at a given instant: the whole of THROTTLE.TAKE's arithmetic.

use crate::limits::MAX_NOW_NS;
use crate::{TakeArgs, NS_PER_MS};

/// What a take decided. Durations are nanoseconds; [`Outcome::reply`] rounds them up to ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the tokens were taken.
    pub granted: bool,
    /// Whole tokens left after the call (0 while the bucket is in debt).
    pub remaining: u64,
    /// Granted: how long to wait before using the tokens. Denied: until they would be there.
    pub wait_ns: i64,
    /// Until the bucket is full again.
    pub reset_ns: i64,
    /// The state to store, or `None` when nothing changes (a denial, `TOKENS 0`).
    pub write: Option<Write>,
}

/// A new bucket state to store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// The instant the bucket is full again, ns since the Unix epoch.
    pub tat_ns: i64,
    /// When the key may expire (the same instant, rounded up to ms): a missing key is a full
    /// bucket, so expiring any earlier would hand out tokens early.
    pub expire_at_ms: i64,
}

impl Outcome {
    /// The reply: `[granted, remaining, wait_ms, reset_ms]`, durations rounded up.
    pub fn reply(&self) -> [i64; 4] {
        [
            i64::from(self.granted),
            i64::try_from(self.remaining).unwrap_or(i64::MAX),
            ceil_ms(self.wait_ns),
            ceil_ms(self.reset_ns),
        ]
    }
}

/// Takes `args.tokens` from a bucket whose stored state is `stored` (`None`: no key, a full
/// bucket), at the server time `now_ns`.
///
/// Time never runs backwards for a bucket: the bucket is read as of `max(stored, now)`, so a
/// clock reading earlier than the state adds no tokens, and a written state is never earlier
/// than the stored one. A reading outside `0..=MAX_NOW_NS` is clamped, which can only make the
/// bucket stricter.
pub fn take(args: &TakeArgs, stored: Option<i64>, now_ns: i64) -> Outcome {
    let now = i128::from(now_ns.clamp(0, MAX_NOW_NS));
    let interval = i128::from(args.rate.interval_ns());
    let fill = i128::from(args.capacity) * interval;
    let cost = i128::from(args.tokens) * interval;

    // `base` is when the bucket is full, seen from now; `debt` is how far that is ahead.
    let base = stored.map_or(now, |tat| now.max(i128::from(tat)));
    let debt = base - now;
    // The tokens are there once the bucket has refilled to `cost` below full.
    let wait = (debt + cost - fill).max(0);

    let granted_now =
        args.tokens > 0 && wait <= i128::from(args.max_wait_ms) * i128::from(NS_PER_MS);
    let write = if granted_now {
        // Bounded by now + fill + MAXWAIT, far inside i64; a state that would not fit is
        // refused rather than wrapped.
        i64::try_from(base + cost).ok().map(|tat_ns| Write {
            tat_ns,
            expire_at_ms: ceil_ms(tat_ns),
        })
    } else {
        None
    };
    let inspect = args.tokens == 0;
    let debt_after = if write.is_some() { debt + cost } else { debt };
    Outcome {
        granted: inspect || write.is_some(),
        remaining: u64::try_from((fill - debt_after).max(0) / interval).unwrap_or(0),
        wait_ns: if inspect { 0 } else { saturate(wait) },
        reset_ns: saturate(debt_after),
        write,
    }
}

fn saturate(ns: i128) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

/// Rounds a non-negative duration up to whole ms, so a caller that sleeps it is never early.
fn ceil_ms(ns: i64) -> i64 {
    ns / NS_PER_MS + i64::from(ns % NS_PER_MS > 0)
}
