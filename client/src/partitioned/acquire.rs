//! What the backlog workers and the HTTP layers need from a limiter, whichever kind it is:
//! take tokens (waiting as long as it takes) and pass on the supplier's pushback.
//! [`Limiter`] (one shared bucket, a round trip per call) and [`PartitionedLimiter`] (leased
//! partitions, spent in process) both implement it.

use std::future::Future;
use std::time::Duration;

use redis::aio::ConnectionLike;

use super::{PartitionError, PartitionedLimiter};
use crate::{Error, Limiter, QuotaError};

/// Takes tokens before a call, and obeys the supplier's pushback.
pub trait Acquire: Send + Sync {
    /// What one call costs (a [`Limiter`]'s [`cost`](crate::LimiterBuilder::cost); one token
    /// of a [`PartitionedLimiter`]), waiting as long as needed; returns how long it waited.
    fn acquire_call(&self) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// Takes `tokens`, waiting as long as needed; returns how long the call waited.
    fn acquire_tokens(&self, tokens: u64) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// The supplier answered 429 with `Retry-After`: stop taking for `retry_after` (for the
    /// whole fleet: see each limiter's `pause`). Returns how long until the next token.
    fn push_back(
        &self,
        retry_after: Duration,
    ) -> impl Future<Output = Result<Duration, Error>> + Send;

    /// A name for logs and errors (a limiter's key, a partitioned quota's name).
    fn label(&self) -> &str;
}

impl<C> Acquire for Limiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn acquire_call(&self) -> Result<Duration, Error> {
        self.acquire().await.map(|grant| grant.waited)
    }

    async fn acquire_tokens(&self, tokens: u64) -> Result<Duration, Error> {
        self.acquire_n(tokens).await.map(|grant| grant.waited)
    }

    fn push_back(
        &self,
        retry_after: Duration,
    ) -> impl Future<Output = Result<Duration, Error>> + Send {
        self.pause(retry_after)
    }

    fn label(&self) -> &str {
        self.key()
    }
}

impl<C> Acquire for PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn acquire_call(&self) -> impl Future<Output = Result<Duration, Error>> + Send {
        self.acquire_tokens(1)
    }

    async fn acquire_tokens(&self, tokens: u64) -> Result<Duration, Error> {
        self.acquire_n(tokens)
            .await
            .map(|grant| grant.waited)
            .map_err(Error::from)
    }

    async fn push_back(&self, retry_after: Duration) -> Result<Duration, Error> {
        self.pause(retry_after).await.map_err(Error::from)
    }

    fn label(&self) -> &str {
        self.quota().name()
    }
}

impl From<PartitionError> for Error {
    /// A call that asks for more than a partition holds is an invalid quota (a backlog
    /// dead-letters its record); a stopped limiter is a connection that is gone.
    fn from(err: PartitionError) -> Error {
        match err {
            PartitionError::Tokens { tokens, capacity } => {
                Error::InvalidQuota(QuotaError::Tokens { tokens, capacity })
            }
            PartitionError::DeadlineExceeded { deadline } => Error::DeadlineExceeded {
                needed: deadline,
                deadline,
            },
            PartitionError::Redis(err) => err,
            PartitionError::Stopped => Error::Connection(redis::RedisError::from(
                std::io::Error::new(std::io::ErrorKind::NotConnected, err.to_string()),
            )),
            other => Error::Rejected {
                message: other.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_convert_to_the_crate_error() {
        let e = Error::from(PartitionError::Tokens {
            tokens: 9,
            capacity: 2,
        });
        assert!(matches!(
            e,
            Error::InvalidQuota(QuotaError::Tokens {
                tokens: 9,
                capacity: 2
            })
        ));
        let e = Error::from(PartitionError::Stopped);
        assert!(matches!(e, Error::Connection(_)), "{e}");
        assert!(e.to_string().contains("shut down"), "{e}");
    }
}
