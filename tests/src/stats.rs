//! What the server counted: command calls, errors and the replication offset, read from
//! `INFO` (0 for a command that has not run).

use redis::Connection;
use throttle_testkit::{command_stat, info_field};

use crate::keyspace::info;

/// A command's `calls` in `INFO commandstats` (`throttle.take`, `evalsha`, `script|load`);
/// 0 while the command has not run.
#[track_caller]
pub fn calls(con: &mut Connection, command: &str) -> u64 {
    command_stat_of(con, command, "calls")
}

/// One stat of a command in `INFO commandstats` (`failed_calls`: it ran and replied an
/// error, such as `NOSCRIPT`; `rejected_calls`: refused before running); 0 while the
/// command has not run.
#[track_caller]
pub fn command_stat_of(con: &mut Connection, command: &str, stat: &str) -> u64 {
    command_stat(&info(con, "commandstats"), command, stat).unwrap_or(0)
}

/// Error replies with this code (`ERR`, `NOSCRIPT`) the server has sent (`INFO errorstats`).
/// An unknown command is an `ERR` that no `commandstats` line counts.
#[track_caller]
pub fn error_replies(con: &mut Connection, code: &str) -> u64 {
    info_field(&info(con, "errorstats"), &format!("errorstat_{code}"))
        .and_then(|value| value.strip_prefix("count="))
        .map_or(0, |count| count.parse().expect("a count"))
}

/// `master_repl_offset`: how much the primary has sent its replicas; moves with every write
/// the server propagates.
#[track_caller]
pub fn repl_offset(con: &mut Connection) -> i64 {
    info_field(&info(con, "replication"), "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .expect("INFO replication has master_repl_offset")
}
