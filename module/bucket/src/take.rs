//! THROTTLE.TAKE (and THROTTLE.PEEK, a take of nothing): one take from a bucket at an instant.

use crate::gcra::{ceil_ms, saturate, View, Write};
use crate::{Quota, TakeArgs, NS_PER_MS};

/// What a take decided. Durations are nanoseconds; [`Outcome::reply`] rounds them up to ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the tokens were taken (always, for a take of 0).
    pub granted: bool,
    /// Whole tokens left after the call (0 while the bucket is in debt).
    pub remaining: u64,
    /// Granted: how long to wait before using the tokens. Denied: until they would be there.
    pub wait_ns: i64,
    /// Until the bucket is full again.
    pub reset_ns: i64,
    /// The state to store, or `None` when nothing changes (a denial, `TOKENS 0`, a peek).
    pub write: Option<Write>,
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

    /// The reply's fifth element with `TICKET`: the state after the take in µs, 0 when
    /// nothing was taken.
    pub fn ticket(&self) -> i64 {
        self.write.map_or(0, |w| w.ticket_us())
    }
}

/// Takes `args.tokens` from a bucket whose stored state is `stored` (`None`: no key, a full
/// bucket), at the server time `now_ns`.
pub fn take(args: &TakeArgs, stored: Option<i64>, now_ns: i64) -> Outcome {
    let bucket = View::at(&args.quota, stored, now_ns);
    if args.tokens == 0 {
        return inspect(&bucket);
    }
    let cost = bucket.cost(args.tokens);
    let wait = bucket.wait(cost);
    let write = if wait <= i128::from(args.max_wait_ms) * i128::from(NS_PER_MS) {
        Write::at(bucket.taken(cost, bucket.now))
    } else {
        None
    };
    let debt_after = match write {
        Some(_) => bucket.debt() + cost,
        None => bucket.debt(),
    };
    Outcome {
        granted: write.is_some(),
        remaining: bucket.remaining(debt_after),
        wait_ns: saturate(wait),
        reset_ns: saturate(debt_after),
        write,
    }
}

/// THROTTLE.PEEK: the bucket as it stands, what `TOKENS 0` replies. Writes nothing.
pub fn peek(quota: &Quota, stored: Option<i64>, now_ns: i64) -> Outcome {
    inspect(&View::at(quota, stored, now_ns))
}

fn inspect(bucket: &View) -> Outcome {
    Outcome {
        granted: true,
        remaining: bucket.remaining(bucket.debt()),
        wait_ns: 0,
        reset_ns: saturate(bucket.debt()),
        write: None,
    }
}
