//! What can go wrong, as a typed enum.

use std::time::Duration;

use redis::RedisError;

use crate::QuotaError;

/// Everything a limiter call can fail with.
///
/// Only [`Error::Connection`] is usually worth retrying as it is; the others say something
/// about the setup ([`Error::ModuleNotLoaded`], [`Error::InvalidQuota`],
/// [`Error::Rejected`]) or about the demand ([`Error::DeadlineExceeded`],
/// [`Error::GaveUp`]).
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::Error;
///
/// fn describe(err: &Error) -> String {
///     match err {
///         Error::DeadlineExceeded { needed: Some(needed), .. } => {
///             format!("busy, retry in {needed:?}")
///         }
///         Error::ModuleNotLoaded { .. } => "deploy the module".to_owned(),
///         other => other.to_string(),
///     }
/// }
/// let err = Error::DeadlineExceeded {
///     needed: Some(Duration::from_millis(300)),
///     deadline: Duration::from_millis(100),
///     paused: false,
/// };
/// assert_eq!(describe(&err), "busy, retry in 300ms");
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server could not be reached or did not answer in time, the connection dropped,
    /// or the server refused the call for a reason other than its arguments (`LOADING`,
    /// `READONLY`, `CLUSTERDOWN`, `NOPERM`, ...). Usually transient: a reconnecting
    /// connection recovers by itself, and the next call may succeed.
    #[error("redis connection or server error: {0}")]
    Connection(#[source] RedisError),

    /// The server does not know the `THROTTLE.*` commands: the redis-throttle module is not
    /// loaded (and the limiter was told to use it: [`Backend::Module`](crate::Backend::Module)).
    #[error(
        "the THROTTLE commands are not available on this server: the redis-throttle module is \
         not loaded. Load it at startup with `redis-server --loadmodule \
         /path/to/libredis_throttle_module.so`, or add `loadmodule \
         /path/to/libredis_throttle_module.so` to redis.conf, or load it into the running server \
         with `MODULE LOAD /path/to/libredis_throttle_module.so`; where modules cannot be loaded \
         (managed Redis), build the limiter with `.backend(Backend::Script)` or the default \
         `Backend::Auto` (server said: {server_message})"
    )]
    ModuleNotLoaded {
        /// The server's error reply, as it came.
        server_message: String,
    },

    /// The limiter was told to use the function library ([`Backend::Library`](crate::Backend::Library))
    /// on a server without `FUNCTION` (before Redis 7.0, or one that refuses it).
    #[error(
        "this server cannot run the redis-throttle function library: it has no FCALL (Redis \
         7.0 or later, or Valkey, is needed). Build the limiter with `.backend(Backend::Script)` \
         (EVALSHA) or the default `Backend::Auto` (server said: {server_message})"
    )]
    LibraryUnavailable {
        /// The server's error reply, as it came.
        server_message: String,
    },

    /// The server has no redis-throttle function library, or an older one, and this user may
    /// not load it (`NOPERM` on `FUNCTION LOAD`): loading the library is an administrator's
    /// act (a library runs with its caller's permissions, so whoever may replace it can act
    /// as every user that calls it; see docs/trust-model.md).
    /// [`Backend::Auto`](crate::Backend::Auto) uses the script instead.
    #[error(
        "the server has {}, and this user may not load it (server said: {server_message}). Ask \
         an administrator to load this client's library (version {}): `FUNCTION LOAD REPLACE` \
         with the text of `redis_throttle::script::LIBRARY`, e.g. `(printf '#!lua \
         name=throttle\\n'; cat client/lua/throttle.lua) | redis-cli -x FUNCTION LOAD REPLACE` \
         from this client's release; or build the limiter with `.backend(Backend::Script)` \
         (EVALSHA; the user needs `+evalsha +evalsha_ro +script|load`) or the default \
         `Backend::Auto`, which falls back to the script",
        library_found_text(*server_version),
        crate::script::LIBRARY_VERSION
    )]
    LibraryNotLoaded {
        /// The version of the older library the server has, if it has one.
        server_version: Option<u64>,
        /// The server's refusal, as it came.
        server_message: String,
    },

    /// This user may not read the server's function library (`NOPERM` on `FUNCTION LIST`),
    /// so the client cannot check that the library called `throttle` is its own code, and it
    /// does not run code it has not checked. [`Backend::Auto`](crate::Backend::Auto) uses the
    /// script instead.
    #[error(
        "this user may not run FUNCTION LIST, so the client cannot check that the server's \
         `throttle` function library is this client's own code, and it runs no library it has \
         not checked (server said: {server_message}). Grant the user `+function|list` (it \
         only reads the libraries' names and code), or build the limiter with \
         `.backend(Backend::Script)` (EVALSHA) or the default `Backend::Auto`, which falls \
         back to the script"
    )]
    LibraryNotVerified {
        /// The server's refusal, as it came.
        server_message: String,
    },

    /// The server's function library `throttle` is not this client's: its code differs from
    /// [`script::LIBRARY`](crate::script::LIBRARY) and it does not say it is older, so the
    /// client neither replaces it nor runs it (under every backend choice, `Auto` included):
    /// code the client has not checked would run with this user's permissions.
    #[error(
        "the server's function library `throttle` is not this client's: its code differs from \
         `redis_throttle::script::LIBRARY` (version {}) and it says {}, so the client neither \
         replaces it nor runs it (code the client has not checked would run with this user's \
         permissions). If an administrator loaded a newer redis-throttle release's library, \
         upgrade this client; otherwise have one look at it (`FUNCTION LIST LIBRARYNAME \
         throttle WITHCODE`) and load this client's (`FUNCTION LOAD REPLACE` with the text of \
         `redis_throttle::script::LIBRARY`), or build the limiter with \
         `.backend(Backend::Script)`",
        crate::script::LIBRARY_VERSION,
        foreign_version_text(*server_version)
    )]
    ForeignLibrary {
        /// The version the server's library says it is (`local VERSION = n` in its code), if
        /// it says one.
        server_version: Option<u64>,
    },

    /// The quota, or the number of tokens a call asked for, cannot be used. Quotas are
    /// checked when they are built, so this comes from [`Quota::new`](crate::Quota::new),
    /// [`LimiterBuilder::build`](crate::LimiterBuilder::build) or a call asking for more
    /// tokens than the capacity, never from the server.
    #[error("invalid quota: {0}")]
    InvalidQuota(#[from] QuotaError),

    /// The server refused the call's arguments, or the key holds something that is not a
    /// bucket (an `ERR` or `WRONGTYPE` reply other than an unknown command).
    #[error("the server refused the call: {message}")]
    Rejected {
        /// The server's error reply, starting with `ERR` or `WRONGTYPE`.
        message: String,
    },

    /// The tokens will not be there within the deadline. Nothing was taken from the bucket.
    #[error("{}", deadline_text(*needed, *deadline, *paused))]
    DeadlineExceeded {
        /// How long the call would have had to wait, counted from the server's answer;
        /// `None` when no one can tell (a partitioned limiter waited for a lease until the
        /// deadline).
        needed: Option<Duration>,
        /// The deadline the call was given.
        deadline: Duration,
        /// Whether what holds the call back is a pause the supplier asked for
        /// ([`Throttle::pause`](crate::Throttle::pause), a cut, a sync, or an operator's
        /// `throttle pause`), confirmed by the server, that runs `needed` more: the call gave
        /// up at once instead of sleeping past its deadline.
        paused: bool,
    },

    /// The [`Poll`](crate::Strategy::Poll) strategy used up its attempts without being
    /// granted. Nothing is held in the bucket.
    #[error("gave up after {attempts} polls over {waited:?} without getting the tokens")]
    GaveUp {
        /// Round trips made.
        attempts: u32,
        /// Time spent in the call.
        waited: Duration,
    },

    /// A configuration that cannot work (a partitioned quota's partitions, leases and
    /// margins); the message says what to change.
    #[error("{problem}")]
    Config {
        /// What is wrong, and what to do.
        problem: String,
    },

    /// The limiter was shut down (a partitioned limiter's
    /// [`shutdown`](crate::partitioned::PartitionedLimiter::shutdown)): it holds no leases any
    /// more.
    #[error("the limiter was shut down; build a new one")]
    Stopped,

    /// The limiter needs a tokio runtime to be built in: it runs a task of its own (a
    /// partitioned limiter's leases).
    #[error("build the limiter inside a tokio runtime: it runs its leases in a task")]
    NoRuntime,

    /// The server answered with something other than `THROTTLE.TAKE`'s reply: probably a
    /// different command of the same name, or a proxy in between that mangles replies.
    #[error("unexpected reply to a THROTTLE command: {reply}")]
    UnexpectedReply {
        /// What came back, described.
        reply: String,
    },
}

fn library_found_text(server_version: Option<u64>) -> String {
    match server_version {
        Some(version) => format!("an older redis-throttle function library (version {version})"),
        None => "no redis-throttle function library".to_owned(),
    }
}

fn foreign_version_text(server_version: Option<u64>) -> String {
    match server_version {
        Some(version) => format!("version {version}"),
        None => "no version".to_owned(),
    }
}

fn deadline_text(needed: Option<Duration>, deadline: Duration, paused: bool) -> String {
    match needed {
        Some(needed) if paused => format!(
            "the supplier's pause runs {needed:?} more, past this call's deadline of \
             {deadline:?}: the call gave up at once; nothing was taken (retry after the pause, \
             or allow a longer wait with `Demand::within` or the builder's `max_wait`, 60 s by \
             default)"
        ),
        Some(needed) => format!(
            "the tokens would be available only in {needed:?}, later than the deadline of \
             {deadline:?}; nothing was taken (demand has outgrown the quota: retry later, or \
             allow a longer wait with `Demand::within` or the builder's `max_wait`, 60 s by \
             default)"
        ),
        None => format!(
            "the tokens were not there within the deadline of {deadline:?}; nothing was taken"
        ),
    }
}

/// The message, which says what went wrong and what to do: `fn main() -> Result<(), Box<dyn
/// Error>>` prints an error it returns with `Debug`, and so does `unwrap`.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl Error {
    /// Redis could not be reached: the connection was refused, reset or dropped, or there is
    /// no route to it (not a reply the server sent). A timeout is not: a server that answers
    /// slowly (a long script of another user's, a `CLIENT PAUSE`, a busy machine) can be
    /// reached, and [`Unreachable::FailOpen`](crate::Unreachable::FailOpen) must not let calls
    /// through unthrottled because of it.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::Connection(err) => {
                !err.is_timeout()
                    && (err.is_io_error()
                        || err.is_connection_dropped()
                        || err.is_connection_refusal())
            }
            _ => false,
        }
    }

    /// Sorts a redis-rs error: server error replies by their code, everything else is a
    /// connection problem.
    pub(crate) fn from_redis(err: RedisError) -> Error {
        let Some(code) = err.code() else {
            return Error::Connection(err);
        };
        let detail = err.detail().unwrap_or_default();
        let message = format!("{code} {detail}");
        match code {
            "ERR" if detail.to_ascii_lowercase().starts_with("unknown command") => {
                Error::ModuleNotLoaded {
                    server_message: message,
                }
            }
            "ERR" | "WRONGTYPE" => Error::Rejected { message },
            _ => Error::Connection(err),
        }
    }

    /// A deadline or a poll bound ran out (as opposed to a failure).
    pub(crate) fn is_give_up(&self) -> bool {
        matches!(self, Error::DeadlineExceeded { .. } | Error::GaveUp { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::{ErrorKind, ServerErrorKind};

    #[test]
    fn unknown_command_means_the_module_is_missing() {
        let err = Error::from_redis(RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "An error was signalled by the server",
            "unknown command 'THROTTLE.TAKE', with args beginning with: 'k' '8' '9' ".to_owned(),
        )));
        assert!(matches!(err, Error::ModuleNotLoaded { .. }), "{err:?}");
        let text = err.to_string();
        for needle in [
            "--loadmodule",
            "MODULE LOAD",
            "loadmodule /path",
            "unknown command",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from {text}");
        }
    }

    #[test]
    fn library_errors_say_what_to_do() {
        let not_loaded = Error::LibraryNotLoaded {
            server_version: Some(3),
            server_message: "NOPERM User b has no permissions to run the 'function|load' \
                             command"
                .to_owned(),
        }
        .to_string();
        for needle in [
            "an older redis-throttle function library (version 3)",
            "'function|load'",
            "Ask an administrator",
            "printf '#!lua name=throttle\\n'",
            "FUNCTION LOAD REPLACE",
            "Backend::Script",
        ] {
            assert!(
                not_loaded.contains(needle),
                "{needle:?} missing from {not_loaded}"
            );
        }
        let foreign = Error::ForeignLibrary {
            server_version: None,
        }
        .to_string();
        for needle in [
            "not this client's",
            "says no version",
            "neither replaces it nor runs it",
        ] {
            assert!(
                foreign.contains(needle),
                "{needle:?} missing from {foreign}"
            );
        }
        let unverified = Error::LibraryNotVerified {
            server_message: "NOPERM".to_owned(),
        }
        .to_string();
        assert!(unverified.contains("+function|list"), "{unverified}");
    }

    #[test]
    fn debug_is_the_message() {
        // What `fn main() -> Result<(), Box<dyn std::error::Error>>` prints.
        let err = Error::ModuleNotLoaded {
            server_message: "ERR unknown command 'THROTTLE.TAKE'".to_owned(),
        };
        assert_eq!(format!("{err:?}"), err.to_string());
        let boxed: Box<dyn std::error::Error> = Box::new(err);
        assert!(format!("{boxed:?}").contains("MODULE LOAD"), "{boxed:?}");
    }

    #[test]
    fn argument_errors_are_rejections() {
        let err = Error::from_redis(RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "An error was signalled by the server",
            "TOKENS must be a whole number from 0 to the capacity (8)".to_owned(),
        )));
        match err {
            Error::Rejected { message } => assert_eq!(
                message,
                "ERR TOKENS must be a whole number from 0 to the capacity (8)"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wrongtype_is_a_rejection() {
        let err = Error::from_redis(redis::make_extension_error(
            "WRONGTYPE".to_owned(),
            Some("Operation against a key holding the wrong kind of value".to_owned()),
        ));
        match err {
            Error::Rejected { message } => assert!(message.starts_with("WRONGTYPE Operation")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn io_errors_are_connection_errors() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = Error::from_redis(RedisError::from(io));
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
        assert!(!err.is_give_up());
    }

    #[test]
    fn other_server_codes_are_connection_errors() {
        let err = Error::from_redis(RedisError::from((
            ErrorKind::Server(ServerErrorKind::BusyLoading),
            "loading",
        )));
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
    }
}
