//! The THROTTLE commands in Lua, for servers that cannot load the module (managed Redis and
//! Valkey services refuse `MODULE LOAD`): one source, as a function library ([`LIBRARY`]) and as
//! a script ([`SOURCE`]).
//!
//! The same semantics, stored state, replies and error messages as the module's commands, so
//! a key written by one can be used by the other and a client can switch between them.
//!
//! The library (Redis 7.0+, Valkey) is loaded once per server with `FUNCTION LOAD`, by an
//! administrator: it runs with its caller's permissions, so whoever may replace it can act as
//! every fleet that calls it (docs/trust-model.md). The server keeps it in its RDB and AOF and
//! sends it to replicas. Each command is a function taking the
//! module command's arguments after the keys:
//!
//! ```text
//! FCALL throttle_take 1 key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f]
//!     [INFLIGHT n] [LEASE ms] [LINE place_ms] [WAITER id]
//!     -> [granted, remaining, wait_ms, reset_ms(, ticket)(, slot)(, place)(, reason)]
//! FCALL throttle_mtake N key_1 .. key_N capacity rate tokens [...] [MAXWAIT ms] [FLOOR f ...]
//!     [TICKET] [INFLIGHT n] [LEASE ms] [LINE place_ms] [WAITER id]
//!     -> [granted, wait_ms, remaining_1, reset_ms_1, ...(, ticket_1, ...)(, slot)(, place)
//!         (, reason)]
//!                                                                (N from 1 to 16)
//! FCALL throttle_pause 1 key capacity rate ms                  -> ms until the next token
//! FCALL throttle_give 1 key capacity rate n ticket             -> tokens given back
//! FCALL_RO throttle_peek 1 key capacity rate
//!     -> [1, remaining, 0, reset_ms, paused_ms, factor_bp]
//! FCALL throttle_cut 1 key capacity rate ms factor recovery_ms
//!     -> [cut, next_ms, factor_bp, recovered_ms]
//! FCALL throttle_sync 1 key capacity rate remaining reset_ms   -> [lowered, remaining, reset_ms]
//! FCALL throttle_debit 1 key capacity rate n                   -> [remaining, reset_ms]
//! FCALL throttle_renew 1 key capacity rate slot ms             -> 1 if held (renewed), else 0
//! FCALL throttle_release 1 key capacity rate slot [INFLIGHT n] -> 1 if held (freed), else 0
//! FCALL_RO throttle_slots 1 key capacity rate                  -> [held, first_lease_ms]
//! FCALL throttle_resume 1 key capacity rate                    -> 1 if a pause or cut ended, else 0
//! FCALL_RO throttle_version 0                                  -> LIBRARY_VERSION
//! ```
//!
//! The script is for servers that refuse `FUNCTION`: the same calls with the command's name
//! first, `EVALSHA sha 1 key take capacity rate ...` (`EVALSHA_RO` for `peek` and `slots`).
//! Load it with `SCRIPT LOAD` (its SHA1 is stable); a server that forgot it (restart, failover,
//! `SCRIPT FLUSH`) answers `NOSCRIPT`, and loading it again is all it takes. Both read the server's
//! clock (`TIME`) and are replicated by their effects (`SET key <state> PXAT <ms>`), the
//! default from Redis 7 on.
//!
//! ```no_run
//! # use redis_throttle::redis;
//! # fn run(con: &mut redis::Connection) -> redis::RedisResult<()> {
//! use redis_throttle::redis;
//! use redis_throttle::script::LIBRARY;
//!
//! let _: String = redis::cmd("FUNCTION").arg("LOAD").arg("REPLACE").arg(LIBRARY).query(con)?;
//! let reply: Vec<i64> = redis::cmd("FCALL")
//!     .arg("throttle_take").arg(1).arg("quota:payments")
//!     .arg(10).arg(10).arg("MAXWAIT").arg(5000)
//!     .query(con)?;
//! # Ok(())
//! # }
//! ```

/// The script's Lua source, for `SCRIPT LOAD` and `EVALSHA`.
pub const SOURCE: &str = include_str!("../../lua/throttle.lua");

/// The same source as a function library, for `FUNCTION LOAD`: the `#!lua name=throttle` line
/// in front.
pub const LIBRARY: &str = concat!(
    "#!lua name=throttle\n",
    include_str!("../../lua/throttle.lua")
);

/// The library's version, which `FCALL_RO throttle_version 0` answers and its code says
/// (`local VERSION = n`). A client uses the server's library only if its code is [`LIBRARY`],
/// byte for byte (a version proves nothing: the loader writes it); it loads its own (`FUNCTION
/// LOAD REPLACE`, where its user may) over none or one whose code says an older version, and
/// refuses any other ([`Error::ForeignLibrary`](crate::Error::ForeignLibrary)).
pub const LIBRARY_VERSION: u64 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_librarys_own() {
        let line = format!("local VERSION = {LIBRARY_VERSION} ");
        assert!(
            SOURCE.contains(&line),
            "the Lua says another version than {LIBRARY_VERSION}"
        );
        assert!(LIBRARY.starts_with("#!lua name=throttle\n--"));
    }
}
