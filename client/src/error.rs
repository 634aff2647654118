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
/// };
/// assert_eq!(describe(&err), "busy, retry in 300ms");
/// ```
#[derive(Debug, thiserror::Error)]
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
    #[error("{}", deadline_text(*needed, *deadline))]
    DeadlineExceeded {
        /// How long the call would have had to wait, counted from the server's answer;
        /// `None` when no one can tell (a partitioned limiter waited for a lease until the
        /// deadline).
        needed: Option<Duration>,
        /// The deadline the call was given.
        deadline: Duration,
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

fn deadline_text(needed: Option<Duration>, deadline: Duration) -> String {
    match needed {
        Some(needed) => format!(
            "the tokens would be available only in {needed:?}, later than the deadline of \
             {deadline:?}; nothing was taken"
        ),
        None => format!(
            "the tokens were not there within the deadline of {deadline:?}; nothing was taken"
        ),
    }
}

impl Error {
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
