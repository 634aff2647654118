//! Sending THROTTLE.TAKE (and any other command) and reading its reply.

use redis::{Connection, Value};

/// `[granted, remaining, wait_ms, reset_ms]`.
pub type Reply = [i64; 4];

/// `THROTTLE.TAKE key <args>`, the arguments given as one whitespace-separated string.
pub fn take_cmd(key: impl redis::ToRedisArgs, args: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("THROTTLE.TAKE");
    cmd.arg(key);
    for word in args.split_whitespace() {
        cmd.arg(word);
    }
    cmd
}

/// `THROTTLE.TAKE` with raw byte arguments (the key first).
pub fn raw_cmd(args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("THROTTLE.TAKE");
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}

/// Runs `THROTTLE.TAKE key <args>` and checks the reply is four integers.
#[track_caller]
pub fn take(con: &mut Connection, key: impl redis::ToRedisArgs, args: &str) -> Reply {
    let cmd = take_cmd(key, args);
    match send(con, &cmd) {
        Ok(value) => as_reply(&value),
        Err(e) => panic!("THROTTLE.TAKE {args}: {e}"),
    }
}

/// A command from one whitespace-separated line: `line("THROTTLE.PEEK k 8 9")`.
pub fn line(words: &str) -> redis::Cmd {
    let mut parts = words.split_whitespace();
    let mut cmd = redis::cmd(parts.next().expect("a command name"));
    for word in parts {
        cmd.arg(word);
    }
    cmd
}

/// Runs a [`line`]: its reply, or the server's error as the text it sent.
pub fn run(con: &mut Connection, words: &str) -> Result<Value, String> {
    send(con, &line(words))
}

/// Runs a [`line`] that must succeed.
#[track_caller]
pub fn ok(con: &mut Connection, words: &str) -> Value {
    run(con, words).unwrap_or_else(|e| panic!("{words}: {e}"))
}

/// Sends a command: its reply, or the server's error as the text it sent (`ERR ...`).
pub fn send(con: &mut Connection, cmd: &redis::Cmd) -> Result<Value, String> {
    cmd.query::<Value>(con).map_err(|e| error_text(&e))
}

/// The error line as the server sent it: `CODE detail`.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => format!("(not a server error) {e}"),
    }
}

/// A THROTTLE.TAKE reply: exactly an array of four integers, in RESP2 and RESP3 alike.
#[track_caller]
pub fn as_reply(value: &Value) -> Reply {
    let Value::Array(items) = value else {
        panic!("expected an array of 4 integers, got {value:?}");
    };
    let ints: Vec<i64> = items
        .iter()
        .map(|item| match item {
            Value::Int(n) => *n,
            other => panic!("expected an integer in the reply, got {other:?} in {value:?}"),
        })
        .collect();
    ints.try_into()
        .unwrap_or_else(|_| panic!("expected 4 integers, got {value:?}"))
}

/// Runs a command that must succeed.
#[track_caller]
pub fn query<T: redis::FromRedisValue>(con: &mut Connection, cmd: &redis::Cmd) -> T {
    cmd.query(con)
        .unwrap_or_else(|e| panic!("{:?}: {}", cmd_name(cmd), error_text(&e)))
}

fn cmd_name(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .take(2)
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The strings in an array or set reply (flags, categories, keys).
#[track_caller]
pub fn strings(value: &Value) -> Vec<String> {
    let items = match value {
        Value::Array(items) | Value::Set(items) => items,
        other => panic!("expected an array of strings, got {other:?}"),
    };
    items
        .iter()
        .map(|item| match item {
            Value::SimpleString(s) => s.clone(),
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Okay => "OK".to_owned(),
            other => panic!("expected a string, got {other:?} in {value:?}"),
        })
        .collect()
}
