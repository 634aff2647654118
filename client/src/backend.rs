//! Where a limiter's bucket arithmetic runs: the module's commands, or their Lua twin (a
//! function library, or a script) for servers that cannot load modules. They keep the same
//! state and give the same replies, so this is only about how a call is sent.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{RedisError, Value};
use throttle_bucket::{Command, Word};
use tokio::sync::OnceCell;

use crate::script::{LIBRARY, LIBRARY_VERSION};
use crate::Error;

/// Where a limiter's commands run.
///
/// ```
/// use redis_throttle::{Backend, Limiter, Quota};
///
/// // On a managed Redis that refuses MODULE LOAD:
/// let builder = Limiter::builder("quota:payments", Quota::new(10, 10u64)?).backend(Backend::Library);
/// # let _ = builder;
/// # Ok::<(), redis_throttle::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The module's `THROTTLE.*` commands: the fastest, where the module is loaded.
    Module,
    /// The same commands as a Lua function library (`FCALL throttle_take ...`, see
    /// [`crate::script`]; Redis 7.0+ and Valkey), for servers that cannot load modules. The
    /// server keeps it in its RDB and AOF and sends it to replicas, so restarts and failovers
    /// keep it. The first call checks the server's copy and loads this client's if it is
    /// missing or older; a server that lacks it later (`FUNCTION FLUSH`, a new cluster node, a
    /// replica promoted before it arrived) answers "function not found", and the library is
    /// loaded and the call sent once more, which the caller does not see.
    Library,
    /// The same commands as one Lua script (`EVALSHA`), for servers that refuse `FUNCTION`. A
    /// server that forgot the script (restart, failover, `SCRIPT FLUSH`, a new cluster node)
    /// answers `NOSCRIPT`; the script is loaded again and the call sent once more, which the
    /// caller does not see.
    Script,
    /// The module if the server has it, else the library, else the script. The first call is
    /// the probe: it goes to the module, and only an "unknown command" answer moves the
    /// limiter (and its clones) on to the library, and only a server without `FUNCTION` on to
    /// the script, for good; a server with the module pays nothing for it. Calls made while
    /// the probe is out wait for its answer instead of probing too.
    #[default]
    Auto,
}

impl Backend {
    /// The name in metrics and spans: `module`, `library` or `script` (`auto` before the first
    /// call).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Module => "module",
            Backend::Library => "library",
            Backend::Script => "script",
            Backend::Auto => "auto",
        }
    }
}

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
    /// Set from the start for `Module`, `Library` and `Script`; for `Auto`, by the first
    /// call's answer.
    resolved: OnceCell<Backend>,
    /// The server's library has been checked (and loaded if missing or older).
    library_checked: OnceCell<()>,
}

impl Dispatch {
    pub(crate) fn new(choice: Backend) -> Dispatch {
        let resolved = match choice {
            Backend::Auto => OnceCell::new(),
            fixed => OnceCell::new_with(Some(fixed)),
        };
        Dispatch {
            resolved,
            library_checked: OnceCell::new(),
        }
    }

    /// What serves the calls: `Auto` until the first answer says.
    pub(crate) fn serving(&self) -> Backend {
        self.resolved.get().copied().unwrap_or(Backend::Auto)
    }

    /// Sends `call` to the backend. Under `Auto` the first call is the probe: it goes to the
    /// module, then the library, then the script, and calls made meanwhile wait for its answer
    /// rather than probe too.
    pub(crate) async fn send<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
    ) -> Result<Value, Error> {
        let mut probe_answer = None;
        let backend = *self
            .resolved
            .get_or_try_init(|| async {
                let (backend, value) = self.probe(conn, call).await?;
                probe_answer = Some(value);
                Ok::<_, Error>(backend)
            })
            .await?;
        if let Some(value) = probe_answer {
            return Ok(value);
        }
        match backend {
            Backend::Script => script(conn, call).await,
            Backend::Library => self.library(conn, call).await.map_err(Fcall::into_error),
            _ => module(conn, call).await,
        }
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
        match self.library(conn, call).await {
            Ok(value) => return Ok((Backend::Library, value)),
            Err(Fcall::Unavailable(err)) => {
                tracing::info!(
                    server = %err,
                    "this server has no FUNCTION; using the Lua script"
                );
            }
            Err(Fcall::Failed(other)) => return Err(other),
        }
        script(conn, call)
            .await
            .map(|value| (Backend::Script, value))
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
        let mut cmd = redis::cmd(if call.command.read_only() {
            "FCALL_RO"
        } else {
            "FCALL"
        });
        cmd.arg(format!("throttle_{}", call.command.short_name()))
            .arg(call.keys.len())
            .arg(call.keys);
        call.add_args(&mut cmd);
        match cmd.query_async(conn).await {
            Err(err) if function_not_found(&err) => {
                load_library(conn).await?;
                cmd.query_async(conn).await.map_err(Fcall::from_redis)
            }
            other => other.map_err(Fcall::from_redis),
        }
    }
}

/// Why a library call failed: the server has no `FUNCTION` at all, or something else.
enum Fcall {
    Unavailable(RedisError),
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
            Fcall::Failed(err) => err,
        }
    }
}

fn function_not_found(err: &RedisError) -> bool {
    err.detail()
        .is_some_and(|d| d.to_ascii_lowercase().contains("function not found"))
}

/// Loads this client's library where the server has none or an older one (`FCALL_RO
/// throttle_version 0`). A newer one is left alone: another client of the fleet, upgraded
/// first, loaded it, and it serves this client's calls too.
async fn check_library<C: ConnectionLike>(conn: &mut C) -> Result<(), Fcall> {
    let version = redis::cmd("FCALL_RO")
        .arg("throttle_version")
        .arg(0)
        .query_async::<u64>(conn)
        .await;
    match version {
        Ok(version) if version >= LIBRARY_VERSION => Ok(()),
        Ok(older) => {
            tracing::info!(
                older,
                LIBRARY_VERSION,
                "replacing the server's older redis-throttle library"
            );
            load_library(conn).await
        }
        Err(err) if function_not_found(&err) => load_library(conn).await,
        Err(err) => Err(Fcall::from_redis(err)),
    }
}

/// `FUNCTION LOAD REPLACE` of this client's library (on every primary, in a cluster).
async fn load_library<C: ConnectionLike>(conn: &mut C) -> Result<(), Fcall> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query_async::<Value>(conn)
        .await
        .map(drop)
        .map_err(Fcall::from_redis)
}

async fn module<C: ConnectionLike>(conn: &mut C, call: &Call<'_>) -> Result<Value, Error> {
    let mut cmd = redis::cmd(call.command.name());
    if call.command == Command::MTake {
        cmd.arg(call.keys.len());
    }
    cmd.arg(call.keys);
    call.add_args(&mut cmd);
    cmd.query_async(conn).await.map_err(Error::from_redis)
}

/// `EVALSHA sha numkeys keys command args`, or `EVALSHA_RO` for a read-only command, so a peek
/// answers where writes are refused or held (a read-only replica, `CLIENT PAUSE WRITE`). A
/// server that forgot the script answers NOSCRIPT: it is loaded again and the call sent once
/// more.
async fn script<C: ConnectionLike>(conn: &mut C, call: &Call<'_>) -> Result<Value, Error> {
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
    match cmd.query_async(conn).await {
        Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            SCRIPT.load_async(conn).await.map_err(Error::from_redis)?;
            cmd.query_async(conn).await.map_err(Error::from_redis)
        }
        other => other.map_err(Error::from_redis),
    }
}
