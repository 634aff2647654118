//! Building a command and sending it: the one way the end-to-end tests write a command is
//! [`line`], as redis-cli takes it; arguments that are not text (binary keys, the bad-input
//! batteries' bytes) are added to it with redis-rs's own `arg`.

use redis::{Connection, Value};

/// A command from one whitespace-separated line: `line("THROTTLE.PEEK k 8 9")`. For a
/// binary key or argument, start from the words before it and `arg` the rest:
/// `line("THROTTLE.TAKE").arg(b"\xff").arg(["8", "9"])`.
pub fn line(words: &str) -> redis::Cmd {
    let mut parts = words.split_whitespace();
    let mut cmd = redis::cmd(parts.next().expect("a command name"));
    for word in parts {
        cmd.arg(word);
    }
    cmd
}

/// `line(name)`, then `key`, then the words of `args`: the shape of every THROTTLE command,
/// for the helpers that take a key of any type (bytes included).
pub(crate) fn keyed(name: &str, key: impl redis::ToRedisArgs, args: &str) -> redis::Cmd {
    let mut cmd = line(name);
    cmd.arg(key)
        .arg(args.split_whitespace().collect::<Vec<_>>());
    cmd
}

/// Runs a [`line()`]: its reply, or the server's error as the text it sent.
pub fn run(con: &mut Connection, words: &str) -> Result<Value, String> {
    send(con, &line(words))
}

/// Runs a [`line()`] that must succeed.
#[track_caller]
pub fn ok(con: &mut Connection, words: &str) -> Value {
    run(con, words).unwrap_or_else(|e| panic!("{words}: {e}"))
}

/// Sends a command: its reply, or the server's error as the text it sent (`ERR ...`).
pub fn send(con: &mut Connection, cmd: &redis::Cmd) -> Result<Value, String> {
    cmd.query::<Value>(con).map_err(|e| error_text(&e))
}

/// Runs a command that must succeed, its reply read as `T`.
#[track_caller]
pub fn query<T: redis::FromRedisValue>(con: &mut Connection, cmd: &redis::Cmd) -> T {
    cmd.query(con)
        .unwrap_or_else(|e| panic!("{}: {}", shown(cmd), error_text(&e)))
}

/// The error line as the server sent it: `CODE detail`.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => format!("(not a server error) {e}"),
    }
}

/// A command for failure messages: its words, each cut to 40 bytes.
pub fn shown(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) if bytes.len() > 40 => format!("<{} bytes>", bytes.len()),
            redis::Arg::Simple(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}
