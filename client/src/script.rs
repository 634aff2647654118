//! The THROTTLE commands as one Lua script, for servers that cannot load the module (managed
//! Redis and Valkey services refuse `MODULE LOAD`).
//!
//! The same semantics, stored state, replies and error messages as the module's commands, so
//! a key written by one can be used by the other and a client can switch between them. The
//! first argument names the command (case-insensitive); the keys come first, as for any
//! script:
//!
//! ```text
//! EVALSHA sha 1 key take capacity rate [TOKENS n] [MAXWAIT ms] [TICKET]
//!     -> [granted, remaining, wait_ms, reset_ms(, ticket)]
//! EVALSHA sha N key_1 .. key_N mtake capacity rate tokens [capacity rate tokens ...] [MAXWAIT ms]
//!     -> [granted, wait_ms, remaining_1, reset_ms_1, ...]        (N from 1 to 16)
//! EVALSHA sha 1 key pause capacity rate ms          -> ms until the next token
//! EVALSHA sha 1 key give capacity rate n ticket     -> tokens given back
//! EVALSHA_RO sha 1 key peek capacity rate           -> [1, remaining, 0, reset_ms]
//! ```
//!
//! Load it once with `SCRIPT LOAD` (its SHA1 is stable) and call it with `EVALSHA`; a server
//! that forgot it (restart, failover, `SCRIPT FLUSH`) answers `NOSCRIPT`, and loading it
//! again is all it takes. `peek` never writes, so it runs under `EVALSHA_RO`: on a read-only
//! replica and during `CLIENT PAUSE WRITE`. The script reads the server's clock (`TIME`) and
//! is replicated by its effects (`SET key <state> PXAT <ms>`), the default from Redis 7 on.
//!
//! ```no_run
//! # fn run(con: &mut redis::Connection) -> redis::RedisResult<()> {
//! let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(redis_throttle::script::SOURCE).query(con)?;
//! let reply: Vec<i64> = redis::cmd("EVALSHA")
//!     .arg(&sha).arg(1).arg("quota:payments")
//!     .arg("take").arg(10).arg(10).arg("MAXWAIT").arg(5000)
//!     .query(con)?;
//! # Ok(())
//! # }
//! ```

/// The script's Lua source (`client/lua/throttle.lua`).
pub const SOURCE: &str = include_str!("../lua/throttle.lua");
