//! The server's clock, in nanoseconds since the Unix epoch.

use redis_module::raw;

/// The time of the current command: the cached command time in microseconds where the server
/// has it (Redis 7.2+, Valkey; frozen for a whole MULTI or script, so a transaction sees one
/// instant), the millisecond clock otherwise (Redis 7.0).
pub fn now_ns() -> i64 {
    // SAFETY: both are plain getters with no arguments, valid whenever a command runs.
    let micros = unsafe {
        match (
            raw::RedisModule_CachedMicroseconds,
            raw::RedisModule_Milliseconds,
        ) {
            (Some(cached_us), _) => cached_us(),
            (None, Some(ms)) => ms().saturating_mul(1000),
            (None, None) => 0,
        }
    };
    micros.saturating_mul(1000)
}
