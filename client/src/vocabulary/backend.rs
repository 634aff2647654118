//! Where a limiter's commands run: the module, the function library or the script (the
//! wire carries each out, `crate::wire::backend`).

#[cfg(doc)]
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
    /// keep it. The first call reads the server's copy (`FUNCTION LIST LIBRARYNAME throttle
    /// WITHCODE`) and uses it only if its code is this client's [`LIBRARY`](crate::script::LIBRARY),
    /// byte for byte: a library runs with its caller's permissions, and the version it
    /// claims proves nothing. Missing, or older by its version, it is loaded (`FUNCTION
    /// LOAD REPLACE`) where the user may, else the call fails with
    /// [`Error::LibraryNotLoaded`]; a user that may not read it fails with
    /// [`Error::LibraryNotVerified`]; any other code under the name fails with
    /// [`Error::ForeignLibrary`] and is neither run nor replaced. A server that lacks the
    /// library later (`FUNCTION FLUSH`, a new cluster node, a replica promoted before it
    /// arrived) answers "function not found", and the library is loaded and the call sent
    /// once more, which the caller does not see.
    Library,
    /// The same commands as one Lua script (`EVALSHA`), for servers that refuse `FUNCTION`. A
    /// server that forgot the script (restart, failover, `SCRIPT FLUSH`, a new cluster node)
    /// answers `NOSCRIPT`; the script is loaded again and the call sent once more, which the
    /// caller does not see.
    Script,
    /// The module if the server has it, else the library, else the script. The first call is
    /// the probe: it goes to the module, and only an "unknown command" answer moves the
    /// limiter (and its clones) on to the library, and only a server without `FUNCTION`, or a
    /// user that may not use the library safely ([`Error::LibraryNotVerified`],
    /// [`Error::LibraryNotLoaded`]: `NOPERM` on `FUNCTION LIST` or `FUNCTION LOAD`), on to the
    /// script; a server with the module pays nothing for it. A limiter on the module that is
    /// later told "unknown command" (a failover to a replica without the module, a `MODULE
    /// UNLOAD`) probes again on that call and carries on with the library or the script, so
    /// the caller sees no error where either is there. Any other answer stops
    /// the probe with its error: `NOPERM` on the module's command or on `FCALL` itself (a user
    /// set up for that backend but not allowed the call, to fix rather than work around), and
    /// a foreign library ([`Error::ForeignLibrary`], which needs a person to look). Calls
    /// made while the probe is out wait for its answer instead of probing too.
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
