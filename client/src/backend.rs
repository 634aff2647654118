//! Where a limiter's bucket arithmetic runs: the module's commands, or their Lua twin for
//! servers that cannot load modules. The two keep the same state and give the same replies,
//! so this is only about how a call is sent.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::Value;
use throttle_bucket::Command;

use crate::Error;

/// Where a limiter's commands run.
///
/// ```
/// use redis_throttle::{Backend, Limiter, Quota};
///
/// // On a managed Redis that refuses MODULE LOAD:
/// let builder = Limiter::builder("quota:payments", Quota::new(10, 10u64)?).backend(Backend::Script);
/// # let _ = builder;
/// # Ok::<(), redis_throttle::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The module's `THROTTLE.*` commands: the fastest, where the module is loaded.
    Module,
    /// The same commands as one Lua script (`EVALSHA`, see [`crate::script`]), for servers
    /// that cannot load modules. A server that forgot the script (restart, failover,
    /// `SCRIPT FLUSH`, a new cluster node) answers `NOSCRIPT`; the script is loaded again and
    /// the call sent once more, which the caller does not see.
    Script,
    /// The module if the server has it, else the script. The first call is the probe: it
    /// goes to the module, and only an "unknown command" answer switches the limiter (and its
    /// clones) to the script for good, so a server with the module pays nothing for it.
    #[default]
    Auto,
}

impl Backend {
    /// The name in metrics and spans: `module` or `script` (`auto` before the first call).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Module => "module",
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
    /// The words after the keys, as the module takes them.
    pub args: Vec<String>,
}

/// A limiter's backend: the caller's choice, or what `Auto` settled on.
#[derive(Debug)]
pub(crate) struct Dispatch {
    /// 0: not known yet (Auto before its first answer); 1: module; 2: script.
    resolved: AtomicU8,
}

impl Dispatch {
    pub(crate) fn new(choice: Backend) -> Dispatch {
        let resolved = match choice {
            Backend::Module => 1,
            Backend::Script => 2,
            Backend::Auto => 0,
        };
        Dispatch {
            resolved: AtomicU8::new(resolved),
        }
    }

    /// What serves the calls: `Auto` until the first answer says.
    pub(crate) fn serving(&self) -> Backend {
        match self.resolved.load(Ordering::Relaxed) {
            1 => Backend::Module,
            2 => Backend::Script,
            _ => Backend::Auto,
        }
    }

    /// Sends `call` to the backend; `Auto` settles on its first answer.
    pub(crate) async fn send<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
    ) -> Result<Value, Error> {
        match self.serving() {
            Backend::Module => module(conn, call).await,
            Backend::Script => script(conn, call).await,
            Backend::Auto => match module(conn, call).await {
                Err(Error::ModuleNotLoaded { server_message }) => {
                    tracing::info!(
                        server = %server_message,
                        "the redis-throttle module is not loaded; using the Lua script"
                    );
                    self.resolved.store(2, Ordering::Relaxed);
                    script(conn, call).await
                }
                Err(other) => Err(other),
                Ok(value) => {
                    self.resolved.store(1, Ordering::Relaxed);
                    Ok(value)
                }
            },
        }
    }
}

async fn module<C: ConnectionLike>(conn: &mut C, call: &Call<'_>) -> Result<Value, Error> {
    let mut cmd = redis::cmd(call.command.name());
    if call.command == Command::MTake {
        cmd.arg(call.keys.len());
    }
    cmd.arg(call.keys).arg(&call.args);
    cmd.query_async(conn).await.map_err(Error::from_redis)
}

async fn script<C: ConnectionLike>(conn: &mut C, call: &Call<'_>) -> Result<Value, Error> {
    let mut invocation = SCRIPT.prepare_invoke();
    invocation
        .key(call.keys)
        .arg(call.command.name().trim_start_matches("throttle."))
        .arg(&call.args);
    invocation
        .invoke_async(conn)
        .await
        .map_err(Error::from_redis)
}
