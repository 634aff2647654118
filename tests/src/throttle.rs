//! The module's commands, sent and their replies checked: each must succeed and answer the
//! shape its command documents. The key may be of any type (bytes included), the rest is one
//! whitespace-separated string.

use redis::Connection;

use crate::command::{keyed, line, send, shown};
use crate::reply::{as_reply, int, ints, Reply};

/// Runs `THROTTLE.TAKE key <args>` and checks the reply is four integers.
#[track_caller]
pub fn take(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Reply {
    match send(con, &keyed("THROTTLE.TAKE", key, args)) {
        Ok(value) => as_reply(&value),
        Err(e) => panic!("THROTTLE.TAKE {args}: {e}"),
    }
}

/// `THROTTLE.TAKE key <args>`, any length of reply (five integers with TICKET).
#[track_caller]
pub fn take_any(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    run_ints(con, &keyed("THROTTLE.TAKE", key, args))
}

/// `THROTTLE.PAUSE key <args>`: ms until the next token.
#[track_caller]
pub fn pause(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> i64 {
    run_int(con, &keyed("THROTTLE.PAUSE", key, args))
}

/// `THROTTLE.GIVE key <args>`: tokens given back.
#[track_caller]
pub fn give(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> i64 {
    run_int(con, &keyed("THROTTLE.GIVE", key, args))
}

/// `THROTTLE.PEEK key <args>`: the bucket part of its reply, `[1, remaining, 0, reset_ms]`
/// (what `TOKENS 0` answers), after checking the reply is six integers whose last two, the
/// pause and the rate's factor, are in range. [`peek_full`] gives all six.
#[track_caller]
pub fn peek(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    let mut reply = peek_full(con, key, args);
    reply.truncate(4);
    reply
}

/// `THROTTLE.PEEK key <args>`: `[1, remaining, 0, reset_ms, paused_ms, factor_bp]`.
#[track_caller]
pub fn peek_full(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    let reply = run_sized(con, "THROTTLE.PEEK", key, args, 6);
    assert!(
        reply[4] >= 0 && (100..=10_000).contains(&reply[5]),
        "THROTTLE.PEEK {args}: pause or factor out of range in {reply:?}"
    );
    reply
}

/// `THROTTLE.CUT key <args>`: `[cut, next_ms, factor_bp, recovered_ms]`.
#[track_caller]
pub fn cut(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    run_sized(con, "THROTTLE.CUT", key, args, 4)
}

/// `THROTTLE.SYNC key <args>`: `[lowered, remaining, reset_ms]`.
#[track_caller]
pub fn sync(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    run_sized(con, "THROTTLE.SYNC", key, args, 3)
}

/// `THROTTLE.DEBIT key <args>`: `[remaining, reset_ms]`.
#[track_caller]
pub fn debit(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Vec<i64> {
    run_sized(con, "THROTTLE.DEBIT", key, args, 2)
}

/// `THROTTLE.MTAKE <args>` (numkeys first).
#[track_caller]
pub fn mtake(con: &mut Connection, args: &str) -> Vec<i64> {
    run_ints(con, &line(&format!("THROTTLE.MTAKE {args}")))
}

/// `command key <args>`, which must succeed and answer `len` integers.
#[track_caller]
fn run_sized(
    con: &mut Connection,
    command: &str,
    key: impl redis::ToRedisArgs,
    args: &str,
    len: usize,
) -> Vec<i64> {
    let reply = run_ints(con, &keyed(command, key, args));
    assert_eq!(reply.len(), len, "{command} {args}: {reply:?}");
    reply
}

/// Runs a command that must succeed and answer an integer.
#[track_caller]
pub fn run_int(con: &mut Connection, cmd: &redis::Cmd) -> i64 {
    match send(con, cmd) {
        Ok(value) => int(&value),
        Err(e) => panic!("{}: {e}", shown(cmd)),
    }
}

/// Runs a command that must succeed and answer an array of integers.
#[track_caller]
pub fn run_ints(con: &mut Connection, cmd: &redis::Cmd) -> Vec<i64> {
    match send(con, cmd) {
        Ok(value) => ints(&value),
        Err(e) => panic!("{}: {e}", shown(cmd)),
    }
}
