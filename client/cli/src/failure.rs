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

/// What the server said to a command, for a failure. `url` is shown without its password.
pub(crate) fn redis_failure(url: &str, doing: &str, err: &redis::RedisError) -> Failure {
    let url = redact(url);
    if err.is_io_error() || err.is_timeout() || err.is_connection_dropped() {
        Failure(format!(
            "{url}: the server did not answer {doing} ({err}); check that it runs and that the URL is right"
        ))
    } else if err.code() == Some("NOPERM") {
        Failure(format!(
            "{url}: {doing} failed: {err}; the tool's user needs the commands client/cli/README.md lists (Permissions)"
        ))
    } else {
        Failure(format!("{url}: {doing} failed: {err}"))
    }
}

/// `url` with its password, if any, as `***`: failures go to logs.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => "***".to_owned(),
    };
    format!("{scheme}://{user}@{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_not_shown() {
        assert_eq!(
            redact("redis://ops:secret@127.0.0.1:6379/2"),
            "redis://ops:***@127.0.0.1:6379/2"
        );
        assert_eq!(redact("redis://:p@ss@h:1"), "redis://:***@h:1");
        assert_eq!(redact("redis://secret@h:1"), "redis://***@h:1");
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact("unix:///run/redis.sock"), "unix:///run/redis.sock");
        assert_eq!(redact("not a url"), "not a url");
    }
}
