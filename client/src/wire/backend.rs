//! Where a limiter's bucket arithmetic runs: the module's commands, or their Lua twin (a
//! function library, or a script) for servers that cannot load modules. They keep the same
//! state and give the same replies, so this is only about how a call is sent.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{RedisError, Value};
use throttle_bucket::{Command, Word};
use tokio::sync::{Mutex, OnceCell};

use crate::script::{LIBRARY, LIBRARY_VERSION};
use crate::{Backend, Error};

static SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(crate::script::SOURCE));

/// One command, before it is given a backend.
pub(crate) struct Call<'a> {
    pub command: Command,
    pub keys: &'a [&'a str],
    /// The words after the keys, as the command's definition writes them.
    pub args: Vec<Word<'a>>,
}

impl Call<'_> {
    /// Appends the words after the keys to `cmd`.
    fn add_args(&self, cmd: &mut redis::Cmd) {
        for word in &self.args {
            match *word {
                Word::Text(text) => cmd.arg(text),
                Word::Number(n) => cmd.arg(n),
                other => cmd.arg(other.to_text()),
            };
        }
    }
}

/// A limiter's backend: the caller's choice, or what `Auto` settled on.
#[derive(Debug)]
pub(crate) struct Dispatch {
    choice: Backend,
    /// What serves the calls ([`Dispatch::code`]; 0: not settled yet): set from the start for
    /// `Module`, `Library` and `Script`; for `Auto`, by the probe's answer, and again by a
    /// probe after the module went missing.
    resolved: AtomicU8,
    /// Held by `Auto`'s probe, so that calls made meanwhile wait for its answer rather than
    /// probe too.
    probing: Mutex<()>,
    /// The server's library has been checked: its code is this client's (loaded if it was
    /// missing or older). Once per limiter, off the calls' path.
    library_checked: OnceCell<()>,
}

impl Dispatch {
    pub(crate) fn new(choice: Backend) -> Dispatch {
        Dispatch {
            choice,
            resolved: AtomicU8::new(Dispatch::code(choice)),
            probing: Mutex::new(()),
            library_checked: OnceCell::new(),
        }
    }

    /// A backend as [`Dispatch::resolved`] keeps it.
    fn code(backend: Backend) -> u8 {
        match backend {
            Backend::Auto => 0,
            Backend::Module => 1,
            Backend::Library => 2,
            Backend::Script => 3,
        }
    }

    /// What serves the calls: `Auto` until the first answer says.
    pub(crate) fn serving(&self) -> Backend {
        match self.resolved.load(Ordering::Acquire) {
            1 => Backend::Module,
            2 => Backend::Library,
            3 => Backend::Script,
            _ => Backend::Auto,
        }
    }

    /// Sends `call` to the backend. Under `Auto` the first call is the probe: it goes to the
    /// module, then the library, then the script, and calls made meanwhile wait for its answer
    /// rather than probe too.
    ///
    /// Returns the answer and the round trips it took (the probe's, a library check or load,
    /// a script loaded again: each counts).
    pub(crate) async fn send<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
    ) -> (Result<Value, Error>, u32) {
        let mut counted = Counted {
            conn,
            round_trips: 0,
        };
        let answer = self.send_counted(&mut counted, call).await;
        (answer, counted.round_trips)
    }

    /// `calls` in one pipeline (one round trip), each its reply or its error. Under `Auto`
    /// the first call goes alone while the backend is not settled (it is the probe). A
    /// library the server lost or a script it forgot is loaded, and the pipeline sent once
    /// more.
    pub(crate) async fn send_each<C: ConnectionLike>(
        &self,
        conn: &mut C,
        calls: &[Call<'_>],
    ) -> Result<Vec<Result<Value, Error>>, Error> {
        let mut replies = Vec::with_capacity(calls.len());
        let mut calls = calls;
        if self.serving() == Backend::Auto {
            let Some((first, rest)) = calls.split_first() else {
                return Ok(replies);
            };
            replies.push(self.send_counted(conn, first).await);
            calls = rest;
        }
        if calls.is_empty() {
            return Ok(replies);
        }
        let backend = self.serving();
        if backend == Backend::Library {
            self.library_checked
                .get_or_try_init(|| check_library(conn))
                .await
                .map_err(Fcall::into_error)?;
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for call in calls {
            pipe.add_command(match backend {
                Backend::Script => script_cmd(call),
                Backend::Library => library_cmd(call),
                _ => module_cmd(call),
            });
        }
        let mut values: Vec<Value> = pipe.query_async(conn).await.map_err(Error::from_redis)?;
        let forgotten = |value: &Value| match value {
            Value::ServerError(err) => {
                let err = RedisError::from(err.clone());
                err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                    || function_not_found(&err)
            }
            _ => false,
        };
        if values.iter().any(forgotten) {
            match backend {
                Backend::Script => {
                    SCRIPT.load_async(conn).await.map_err(Error::from_redis)?;
                }
                _ => load_library(conn, None).await.map_err(Fcall::into_error)?,
            }
            values = pipe.query_async(conn).await.map_err(Error::from_redis)?;
        }
        replies.extend(values.into_iter().map(|value| match value {
            Value::ServerError(err) => Err(Error::from_redis(RedisError::from(err))),
            value => Ok(value),
        }));
        Ok(replies)
    }

    async fn send_counted<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
    ) -> Result<Value, Error> {
        let serving = match self.serving() {
            Backend::Auto => return self.probe_once(conn, call, Backend::Auto).await,
            settled => settled,
        };
        match self.send_to(serving, conn, call).await {
            // The module is gone from the server `Auto` found it on (a failover to a replica
            // without it, a MODULE UNLOAD): probe again, on this call.
            Err(Error::ModuleNotLoaded { server_message }) if self.choice == Backend::Auto => {
                tracing::warn!(
                    server = %server_message,
                    "the redis-throttle module is no longer loaded on this server; probing \
                     for the function library or the script"
                );
                self.probe_once(conn, call, Backend::Module).await
            }
            other => other,
        }
    }

    /// `call` on `backend`, settled.
    async fn send_to<C: ConnectionLike>(
        &self,
        backend: Backend,
        conn: &mut C,
        call: &Call<'_>,
    ) -> Result<Value, Error> {
        match backend {
            Backend::Script => script(conn, call).await,
            Backend::Library => self.library(conn, call).await.map_err(Fcall::into_error),
            _ => module(conn, call).await,
        }
    }

    /// Probes with `call`, unless another call did while this one waited for its turn: the
    /// limiter is no longer served by `stale` (what this call saw), and the call goes to what
    /// serves it now.
    async fn probe_once<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
        stale: Backend,
    ) -> Result<Value, Error> {
        let _probing = self.probing.lock().await;
        let serving = self.serving();
        if serving != stale {
            return self.send_to(serving, conn, call).await;
        }
        let (backend, value) = self.probe(conn, call).await?;
        self.resolved
            .store(Dispatch::code(backend), Ordering::Release);
        Ok(value)
    }

    /// The module, else the library, else the script: the first that answers, and its answer.
    /// An error that says nothing about which one the server has (a dropped connection)
    /// settles nothing: the next call probes again.
    async fn probe<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
    ) -> Result<(Backend, Value), Error> {
        match module(conn, call).await {
            Ok(value) => return Ok((Backend::Module, value)),
            Err(Error::ModuleNotLoaded { server_message }) => {
                tracing::info!(
                    server = %server_message,
                    "the redis-throttle module is not loaded; trying the function library"
                );
            }
            Err(other) => return Err(other),
        }
        let refused = match self.library(conn, call).await {
            Ok(value) => return Ok((Backend::Library, value)),
            Err(Fcall::Unavailable(err)) => {
                tracing::info!(
                    server = %err,
                    "this server has no FUNCTION; using the Lua script"
                );
                None
            }
            // A user given only the script cannot read the library: the normal case, not worth
            // a warning; a missing library that an admin may want to load is.
            Err(Fcall::Refused(err @ Error::LibraryNotVerified { .. })) => {
                tracing::info!(reason = %err, "using the Lua script");
                Some(err)
            }
            Err(Fcall::Refused(err)) => {
                tracing::warn!(reason = %err, "using the Lua script");
                Some(err)
            }
            Err(Fcall::Failed(other)) => return Err(other),
        };
        match (script(conn, call).await, refused) {
            (Ok(value), _) => Ok((Backend::Script, value)),
            // Refused both: the library's error says what to do for either.
            (Err(Error::Connection(err)), Some(library)) if is_noperm(&err) => Err(library),
            (Err(other), _) => Err(other),
        }
    }

    /// `FCALL throttle_<command> numkeys keys args` (`FCALL_RO` for a read-only command). The
    /// first call checks the server's library; one that is missing later is loaded and the
    /// call sent once more.
    async fn library<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
    ) -> Result<Value, Fcall> {
        self.library_checked
            .get_or_try_init(|| check_library(conn))
            .await?;
        let cmd = library_cmd(call);
        match cmd.query_async(conn).await {
            Err(err) if function_not_found(&err) => {
                load_library(conn, None).await?;
                cmd.query_async(conn).await.map_err(Fcall::from_redis)
            }
            other => other.map_err(Fcall::from_redis),
        }
    }
}

/// A connection that counts what is sent through it: a command or a pipeline is one round
/// trip.
struct Counted<'c, C> {
    conn: &'c mut C,
    round_trips: u32,
}

impl<C: ConnectionLike> ConnectionLike for Counted<'_, C> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        self.round_trips = self.round_trips.saturating_add(1);
        self.conn.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        self.round_trips = self.round_trips.saturating_add(1);
        self.conn.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

/// Why a library call failed: the server has no `FUNCTION` at all, this user may not check or
/// load the library (`Auto` falls back to the script for either), or something else.
enum Fcall {
    Unavailable(RedisError),
    Refused(Error),
    Failed(Error),
}

impl Fcall {
    fn from_redis(err: RedisError) -> Fcall {
        let unknown = err.code() == Some("ERR")
            && err
                .detail()
                .is_some_and(|d| d.to_ascii_lowercase().starts_with("unknown command"));
        if unknown {
            Fcall::Unavailable(err)
        } else {
            Fcall::Failed(Error::from_redis(err))
        }
    }

    fn into_error(self) -> Error {
        match self {
            Fcall::Unavailable(err) => Error::LibraryUnavailable {
                server_message: err.to_string(),
            },
            Fcall::Refused(err) | Fcall::Failed(err) => err,
        }
    }
}

fn is_noperm(err: &RedisError) -> bool {
    err.code() == Some("NOPERM")
}

fn function_not_found(err: &RedisError) -> bool {
    err.detail()
        .is_some_and(|d| d.to_ascii_lowercase().contains("function not found"))
}

/// Checks that the server's library `throttle` is this client's, by its code: a library runs
/// with its caller's permissions, so a foreign one (whatever version it claims) is never run,
/// not even its `throttle_version`. Missing, or older by the version in its code, it is
/// replaced with this client's where the user may load it. A newer one is refused too: the
/// client cannot tell a newer release's library from any other code.
async fn check_library<C: ConnectionLike>(conn: &mut C) -> Result<(), Fcall> {
    let listed = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(LIBRARY_NAME)
        .arg("WITHCODE")
        .query_async::<Value>(conn)
        .await;
    let code = match listed {
        Ok(reply) => library_code(&reply)?,
        Err(err) if is_noperm(&err) => {
            return Err(Fcall::Refused(Error::LibraryNotVerified {
                server_message: error_line(&err),
            }))
        }
        Err(err) => return Err(Fcall::from_redis(err)),
    };
    match code {
        None => load_library(conn, None).await,
        Some(code) if code == LIBRARY.as_bytes() => Ok(()),
        Some(code) => match version_in(&code) {
            Some(older) if older < LIBRARY_VERSION => {
                tracing::info!(
                    older,
                    LIBRARY_VERSION,
                    "replacing the server's older redis-throttle library"
                );
                load_library(conn, Some(older)).await
            }
            server_version => Err(Fcall::Failed(Error::ForeignLibrary { server_version })),
        },
    }
}

/// The library's name, as its `#!lua name=` line says.
const LIBRARY_NAME: &str = "throttle";

/// The code of the library named [`LIBRARY_NAME`] in a `FUNCTION LIST ... WITHCODE` reply
/// (RESP2: each library a flat array of names and values; RESP3: a map), or `None` if there
/// is none. `LIBRARYNAME` is a pattern, matched without case: the name is compared here.
fn library_code(reply: &Value) -> Result<Option<Vec<u8>>, Fcall> {
    let unexpected = || {
        Fcall::Failed(Error::UnexpectedReply {
            reply: format!("FUNCTION LIST answered {reply:?}"),
        })
    };
    let Value::Array(libraries) = reply else {
        return Err(unexpected());
    };
    for library in libraries {
        let fields: Vec<(&Value, &Value)> = match library {
            Value::Array(items) if items.len() % 2 == 0 => {
                items.chunks(2).map(|pair| (&pair[0], &pair[1])).collect()
            }
            Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
            _ => return Err(unexpected()),
        };
        let field = |name: &str| {
            fields
                .iter()
                .find(|(key, _)| text_of(key) == Some(name.as_bytes()))
                .and_then(|(_, value)| text_of(value))
        };
        if field("library_name") == Some(LIBRARY_NAME.as_bytes()) {
            return field("library_code")
                .map(|code| Some(code.to_vec()))
                .ok_or_else(unexpected);
        }
    }
    Ok(None)
}

fn text_of(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(bytes) => Some(bytes),
        Value::SimpleString(text) => Some(text.as_bytes()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes()),
        _ => None,
    }
}

/// The version a library's code says it is (`local VERSION = n`, as this client's does), if
/// it says one. Only ever used to decide to replace it with this client's, never to run it.
fn version_in(code: &[u8]) -> Option<u64> {
    let code = std::str::from_utf8(code).ok()?;
    let (_, rest) = code.split_once("local VERSION = ")?;
    let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// The server's error as it sent it: `CODE detail`.
fn error_line(err: &RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => err.to_string(),
    }
}

/// `FUNCTION LOAD REPLACE` of this client's library (on every primary, in a cluster), over
/// none or an older one (`older`, its version). A user that may not load it (`NOPERM`) gets
/// [`Error::LibraryNotLoaded`], which says who can.
async fn load_library<C: ConnectionLike>(conn: &mut C, older: Option<u64>) -> Result<(), Fcall> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query_async::<Value>(conn)
        .await
        .map(drop)
        .map_err(|err| {
            if is_noperm(&err) {
                Fcall::Refused(Error::LibraryNotLoaded {
                    server_version: older,
                    server_message: error_line(&err),
                })
            } else {
                Fcall::from_redis(err)
            }
        })
}

async fn module<C: ConnectionLike>(conn: &mut C, call: &Call<'_>) -> Result<Value, Error> {
    module_cmd(call)
        .query_async(conn)
        .await
        .map_err(Error::from_redis)
}

/// The module's command for `call`: `THROTTLE.X key args` (MTAKE: `numkeys keys args`).
fn module_cmd(call: &Call<'_>) -> redis::Cmd {
    let mut cmd = redis::cmd(call.command.name());
    if call.command == Command::MTake {
        cmd.arg(call.keys.len());
    }
    cmd.arg(call.keys);
    call.add_args(&mut cmd);
    cmd
}

/// The library's call for `call`: `FCALL throttle_x numkeys keys args` (`FCALL_RO` for a
/// read-only command).
fn library_cmd(call: &Call<'_>) -> redis::Cmd {
    let mut cmd = redis::cmd(if call.command.read_only() {
        "FCALL_RO"
    } else {
        "FCALL"
    });
    cmd.arg(format!("throttle_{}", call.command.short_name()))
        .arg(call.keys.len())
        .arg(call.keys);
    call.add_args(&mut cmd);
    cmd
}

/// The script's call for `call`: `EVALSHA sha numkeys keys command args` (`EVALSHA_RO` for a
/// read-only command).
fn script_cmd(call: &Call<'_>) -> redis::Cmd {
    let mut cmd = redis::cmd(if call.command.read_only() {
        "EVALSHA_RO"
    } else {
        "EVALSHA"
    });
    cmd.arg(SCRIPT.get_hash())
        .arg(call.keys.len())
        .arg(call.keys)
        .arg(call.command.short_name());
    call.add_args(&mut cmd);
    cmd
}

/// `EVALSHA sha numkeys keys command args`, or `EVALSHA_RO` for a read-only command, so a peek
/// answers where writes are refused or held (a read-only replica, `CLIENT PAUSE WRITE`). A
/// server that forgot the script answers NOSCRIPT: it is loaded again and the call sent once
/// more.
async fn script<C: ConnectionLike>(conn: &mut C, call: &Call<'_>) -> Result<Value, Error> {
    let cmd = script_cmd(call);
    match cmd.query_async(conn).await {
        Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            SCRIPT.load_async(conn).await.map_err(Error::from_redis)?;
            cmd.query_async(conn).await.map_err(Error::from_redis)
        }
        other => other.map_err(Error::from_redis),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    fn entry(name: &str, code: &str) -> Vec<Value> {
        vec![
            bulk("library_name"),
            bulk(name),
            bulk("engine"),
            bulk("LUA"),
            bulk("functions"),
            Value::Array(vec![]),
            bulk("library_code"),
            bulk(code),
        ]
    }

    #[test]
    fn the_code_of_the_library_named_throttle_only() {
        // LIBRARYNAME is a pattern matched without case: another library can come back too.
        let resp2 = Value::Array(vec![
            Value::Array(entry("THROTTLE", "other")),
            Value::Array(entry("throttle", "ours")),
        ]);
        assert_eq!(library_code(&resp2).ok(), Some(Some(b"ours".to_vec())));
        let pairs = |fields: Vec<Value>| {
            let mut it = fields.into_iter();
            std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect::<Vec<_>>()
        };
        let resp3 = Value::Array(vec![Value::Map(pairs(entry("throttle", "ours")))]);
        assert_eq!(library_code(&resp3).ok(), Some(Some(b"ours".to_vec())));
        assert_eq!(library_code(&Value::Array(vec![])).ok(), Some(None));
        assert!(matches!(
            library_code(&Value::Int(1)),
            Err(Fcall::Failed(Error::UnexpectedReply { .. }))
        ));
    }

    #[test]
    fn the_version_a_library_says() {
        assert_eq!(version_in(LIBRARY.as_bytes()), Some(LIBRARY_VERSION));
        assert_eq!(version_in(b"local VERSION = 12 \nreturn"), Some(12));
        assert_eq!(version_in(b"local VERSION = x"), None);
        assert_eq!(version_in(b"return 1"), None);
    }
}
