//! A runtime failure: what went wrong and what to do, printed as is; the tool exits 1.

use std::fmt;

/// What went wrong, and what to do about it.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A failure from any message.
pub(crate) fn fail<T>(message: impl Into<String>) -> Result<T, Failure> {
    Err(Failure(message.into()))
}

/// What the server said to a command, for a failure.
pub(crate) fn redis_failure(url: &str, doing: &str, err: &redis::RedisError) -> Failure {
    if err.is_io_error() || err.is_timeout() || err.is_connection_dropped() {
        Failure(format!(
            "{url}: the server did not answer {doing} ({err}); check that it runs and that the URL is right"
        ))
    } else {
        Failure(format!("{url}: {doing} failed: {err}"))
    }
}
