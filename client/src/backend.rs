//! Where a limiter's bucket arithmetic runs: the module's commands, or their Lua twin for
//! servers that cannot load modules. The two keep the same state and give the same replies,
//! so this is only about how a call is sent.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::Value;
use throttle_bucket::{Command, Word};
use tokio::sync::OnceCell;

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
    /// clones) to the script for good, so a server with the module pays nothing for it. Calls
    /// made while the probe is out wait for its answer (one round trip) instead of probing too.
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
            };
        }
    }
}

/// A limiter's backend: the caller's choice, or what `Auto` settled on.
#[derive(Debug)]
pub(crate) struct Dispatch {
    /// Set from the start for `Module` and `Script`; for `Auto`, by the first call's answer.
    resolved: OnceCell<Backend>,
}

impl Dispatch {
    pub(crate) fn new(choice: Backend) -> Dispatch {
        let resolved = match choice {
            Backend::Auto => OnceCell::new(),
            fixed => OnceCell::new_with(Some(fixed)),
        };
        Dispatch { resolved }
    }

    /// What serves the calls: `Auto` until the first answer says.
    pub(crate) fn serving(&self) -> Backend {
        self.resolved.get().copied().unwrap_or(Backend::Auto)
    }

    /// Sends `call` to the backend. Under `Auto` the first call is the probe: it goes to the
    /// module, and calls made meanwhile wait for its answer rather than probe too.
    pub(crate) async fn send<C: ConnectionLike>(
        &self,
        conn: &mut C,
        call: &Call<'_>,
    ) -> Result<Value, Error> {
        let mut probe_answer = None;
        let backend = *self
            .resolved
            .get_or_try_init(|| async {
                match module(conn, call).await {
                    Err(Error::ModuleNotLoaded { server_message }) => {
                        tracing::info!(
                            server = %server_message,
                            "the redis-throttle module is not loaded; using the Lua script"
                        );
                        Ok(Backend::Script)
                    }
                    // Not settled: the next call probes again.
                    Err(other) => Err(other),
                    Ok(value) => {
                        probe_answer = Some(value);
                        Ok(Backend::Module)
                    }
                }
            })
            .await?;
        if let Some(value) = probe_answer {
            return Ok(value);
        }
        match backend {
            Backend::Script => script(conn, call).await,
            _ => module(conn, call).await,
        }
    }
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
