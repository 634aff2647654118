//! THROTTLE.MTAKE: take from several buckets at once, from every one or from none.

use crate::gcra::{ceil_ms, saturate, View, Write};
use crate::limits::MAX_KEYS;
use crate::{MTakeArgs, NS_PER_MS};

/// One bucket after a multi-take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketAfter {
    /// Whole tokens left.
    pub remaining: u64,
    /// Until this bucket is full again.
    pub reset_ns: i64,
    /// Its state to store, or `None` (a denial, or 0 tokens from this bucket).
    pub write: Option<Write>,
}

/// What a multi-take decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MOutcome {
    /// Whether every bucket gave its tokens.
    pub granted: bool,
    /// Granted: how long to wait before using the tokens (the slowest bucket's wait).
    /// Denied: until every bucket would have its tokens.
    pub wait_ns: i64,
    len: usize,
    buckets: [BucketAfter; MAX_KEYS],
}

impl MOutcome {
    /// One entry per key, in key order.
    pub fn buckets(&self) -> &[BucketAfter] {
        self.buckets.get(..self.len).unwrap_or(&[])
    }

    /// The reply, `granted, wait_ms`, then `remaining, reset_ms` per key, written to `out`;
    /// returns how many values it holds.
    pub fn reply(&self, out: &mut [i64; 2 + 2 * MAX_KEYS]) -> usize {
        let values = [i64::from(self.granted), ceil_ms(self.wait_ns)]
            .into_iter()
            .chain(self.buckets().iter().flat_map(|b| {
                [
                    i64::try_from(b.remaining).unwrap_or(i64::MAX),
                    ceil_ms(b.reset_ns),
                ]
            }));
        let mut written = 0;
        for (slot, value) in out.iter_mut().zip(values) {
            *slot = value;
            written += 1;
        }
        written
    }
}

/// Takes each limit's tokens from its bucket (`stored[i]` is key `i`'s state) if every bucket
/// can give them within MAXWAIT. All the tokens are used at one instant, after the longest
/// wait, so each bucket takes them as of that instant (see `View::taken`): a bucket that
/// alone could have served sooner is not left with a slot that later calls would also use.
pub fn mtake(args: &MTakeArgs, stored: &[Option<i64>], now_ns: i64) -> MOutcome {
    let limits = args.limits();
    let len = limits.len().min(stored.len());
    let mut views = [None; MAX_KEYS];
    let mut wait = 0i128;
    for ((view, limit), state) in views.iter_mut().zip(limits).zip(stored) {
        let bucket = View::at(&limit.quota, *state, now_ns);
        // A bucket asked for nothing is only inspected: its debt delays no one.
        if limit.tokens > 0 {
            wait = wait.max(bucket.wait(bucket.cost(limit.tokens)));
        }
        *view = Some((bucket, limit.tokens));
    }
    let takes_any = limits.iter().any(|l| l.tokens > 0);
    let within = wait <= i128::from(args.max_wait_ms) * i128::from(NS_PER_MS);

    let mut buckets = [BucketAfter::default(); MAX_KEYS];
    let mut granted = takes_any && within;
    if granted {
        for (after, view) in buckets.iter_mut().zip(&views) {
            let Some((bucket, tokens)) = view else { break };
            if *tokens > 0 {
                after.write = Write::at(bucket.taken(bucket.cost(*tokens), bucket.now + wait));
                // A state past i64 (a forged one) refuses the whole call, as for one bucket.
                granted &= after.write.is_some();
            }
        }
        if !granted {
            buckets.iter_mut().for_each(|b| b.write = None);
        }
    }
    for (after, view) in buckets.iter_mut().zip(&views) {
        let Some((bucket, _)) = view else { break };
        let debt = after
            .write
            .map_or(bucket.debt(), |w| i128::from(w.tat_ns) - bucket.now);
        after.remaining = bucket.remaining(debt);
        after.reset_ns = saturate(debt);
    }
    MOutcome {
        granted: granted || !takes_any,
        wait_ns: if takes_any { saturate(wait) } else { 0 },
        len,
        buckets,
    }
}
