//! The server's clock, in nanoseconds since the Unix epoch, read in microseconds.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

use redis_module::raw;

/// The time of the current command, at microsecond resolution on every supported server.
///
/// - Redis 7.2+ and Valkey: the cached command time (`RedisModule_CachedMicroseconds`),
///   frozen for a whole MULTI or script, so a transaction sees one instant.
/// - Redis 7.0 has no cached microseconds, and its wall clock (`RedisModule_Milliseconds`)
///   has whole milliseconds only: at capacity 1 and 100 000 tokens/s that grants at most one
///   call per millisecond, a hundredth of the rate. Its monotonic counter
///   (`RedisModule_MonotonicMicroseconds`) gives the microseconds: see [`wall_micros`].
/// - Anything older: milliseconds.
pub(crate) fn now_ns() -> i64 {
    // SAFETY: plain getters with no arguments, valid whenever a command runs; the pointers are
    // written once by RedisModule_Init before OnLoad and only read afterwards.
    let micros = unsafe {
        match (
            raw::RedisModule_CachedMicroseconds,
            raw::RedisModule_Milliseconds,
            raw::RedisModule_MonotonicMicroseconds,
        ) {
            (Some(cached_us), _, _) => cached_us(),
            (None, Some(ms), Some(mono_us)) => wall_micros(ms(), mono_us()),
            (None, Some(ms), None) => ms().saturating_mul(1000),
            (None, None, _) => 0,
        }
    };
    micros.saturating_mul(1000)
}

/// `wall - monotonic`, in µs, once anchored. Commands run on Redis's one thread; atomics
/// keep this free of `static mut`.
static OFFSET_US: AtomicI64 = AtomicI64::new(0);
static ANCHORED: AtomicBool = AtomicBool::new(false);

/// Microseconds since the epoch from the wall clock's whole `wall_ms` and the monotonic
/// counter `mono_us` (Redis 7.0).
///
/// The monotonic counter is anchored to the wall clock once (an offset); the result is
/// `mono_us + offset`, kept inside the wall clock's current millisecond
/// `[wall_ms * 1000, wall_ms * 1000 + 999]`. When it would leave it (the first call, the wall
/// clock stepped by NTP or by hand, or the two clocks drifted apart), the offset moves by just
/// enough to bring it back to the nearer edge. So:
/// - the result never differs from the wall clock by a millisecond or more, and follows a
///   stepped wall clock (forward or back) on the next call, as the millisecond clock did;
/// - between steps it advances exactly with the monotonic counter, so calls within one
///   millisecond get distinct, increasing instants;
/// - each correction is the smallest that fits, so the result does not jump about: after
///   the first anchor (which may lag the true time by up to 999 µs) a call that lands early
///   in a millisecond pulls the lag down, and it never lags more than that again.
///
/// Buckets never move back in time whatever the clock does (the stored state only
/// increases), so a small step back here can only make a bucket stricter.
fn wall_micros(wall_ms: i64, mono_us: u64) -> i64 {
    let low = wall_ms.saturating_mul(1000);
    let high = low.saturating_add(999);
    let mono = i64::try_from(mono_us).unwrap_or(i64::MAX);
    let anchored = ANCHORED.load(Relaxed);
    let guess = mono.saturating_add(OFFSET_US.load(Relaxed));
    let micros = if !anchored {
        low
    } else {
        guess.clamp(low, high)
    };
    if !anchored || micros != guess {
        OFFSET_US.store(micros.saturating_sub(mono), Relaxed);
        ANCHORED.store(true, Relaxed);
    }
    micros
}
