//! The limiter's failures around a request, as the layers hand them to the caller.

use std::fmt;

/// The limiter failed around an HTTP request: Redis unreachable, the module missing, ... The
/// request was not sent (when taking a token failed) or its pushback could not be passed on to
/// the fleet (when pausing failed).
#[derive(Debug)]
pub struct LimiterError {
    name: String,
    during: &'static str,
    source: crate::Error,
}

impl LimiterError {
    /// The limiter `name` failed to `during` (an infinitive: "take a token before sending").
    pub(super) fn new(name: &str, during: &'static str, source: crate::Error) -> LimiterError {
        LimiterError {
            name: name.to_owned(),
            during,
            source,
        }
    }

    /// The limiter's name ([`Throttle::name`](crate::Throttle::name): its key unless it was named).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The limiter's own error.
    pub fn error(&self) -> &crate::Error {
        &self.source
    }

    /// The limiter's own error, by value.
    pub fn into_error(self) -> crate::Error {
        self.source
    }
}

impl fmt::Display for LimiterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "redis-throttle could not {} on limiter {:?}: {}",
            self.during, self.name, self.source
        )
    }
}

impl std::error::Error for LimiterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}
