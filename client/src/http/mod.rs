//! HTTP clients that take a token before every request and obey the supplier's pushback:
//! `ThrottleLayer`, a tower `Layer` for hyper, tonic or any `Service<http::Request<B>>`
//! (feature `tower`), and `ThrottleMiddleware`, a `reqwest-middleware` middleware (feature
//! `reqwest`).
//!
//! For each request both:
//! 1. choose the limiter: a fixed [`Limiter`], [`MultiLimiter`] or [`PartitionedLimiter`],
//!    or a closure from the [`RequestHead`] to a limiter (per supplier host, per integrator
//!    header, ...), see [`PickLimiter`]; whatever it is, the layers use it as a [`Throttle`];
//! 2. take a call's cost ([`Throttle::acquire`]), waiting as long as the bucket needs, then
//!    send;
//! 3. on 429 or 503, read `Retry-After` (delta seconds or an HTTP date; absent or
//!    unreadable: [`RetryPolicy::default_pause`]) and pause the limiter for that long plus a
//!    jitter ([`Throttle::pause`]): the whole fleet stops on it, not only this caller;
//! 4. take a token again and resend, up to [`RetryPolicy::max_attempts`] sends in all.
//!
//! Requests whose method is not idempotent (POST, PATCH, ...) are not resent unless
//! [`RetryPolicy::retry_non_idempotent`] says so; neither are requests whose body cannot be
//! copied. Their 429 comes back as it is, after the pause. So does the last 429 once the
//! attempts are used up: it is a response, not an error. Errors from the limiter (Redis
//! unreachable, module missing) are a [`LimiterError`].
//!
//! Each request runs in a debug span `throttle_http` (method, key); each pause and resend is a
//! debug event in it.

#[cfg(feature = "reqwest")]
mod reqwest;
mod retry;
#[cfg(feature = "tower")]
mod tower;

use std::fmt;
use std::time::{Duration, SystemTime};

use ::http::{Extensions, HeaderMap, HeaderValue, Method, StatusCode};
use redis::aio::ConnectionLike;

use crate::partitioned::PartitionedLimiter;
use crate::{Limiter, MultiLimiter, Throttle};
use retry::Step;

#[cfg(feature = "reqwest")]
pub use self::reqwest::ThrottleMiddleware;
#[cfg(feature = "tower")]
pub use self::tower::{CloneBody, CloneRequest, NeverClone, ThrottleLayer, ThrottleService};
pub use retry::{is_idempotent, is_pushback, parse_retry_after, RetryPolicy, MAX_PAUSE};

/// What a bucket can be chosen by: the parts of an outgoing request that every client has.
#[derive(Clone, Copy, Debug)]
pub struct RequestHead<'a> {
    method: &'a Method,
    host: Option<&'a str>,
    path: &'a str,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The request method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The host the request goes to, without the port: the URL's, or else the `Host`
    /// header's (a tower request may carry only a path, as tonic's do).
    pub fn host(&self) -> Option<&'a str> {
        self.host
    }

    /// The URL path.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// A header's value, if it is there and is text.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// All the request's headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The request's extensions (tower: the `http::Request`'s; reqwest-middleware: the
    /// middleware chain's, where `RequestBuilder::with_extension` puts them).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

/// Chooses the bucket for a request: a fixed [`Limiter`], [`MultiLimiter`] or
/// [`PartitionedLimiter`], or any `Fn(&RequestHead) -> L` where `L` is a [`Throttle`].
///
/// A closure should hand out clones of limiters it keeps (a map per host, say), not build one
/// per request: a limiter's counters ([`Limiter::metrics`]) live in it and its clones.
pub trait PickLimiter {
    /// The limiter: any [`Throttle`].
    type Limiter: Throttle + 'static;

    /// The limiter for this request.
    fn pick(&self, request: &RequestHead<'_>) -> Self::Limiter;
}

impl<C> PickLimiter for Limiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Limiter = Limiter<C>;

    fn pick(&self, _request: &RequestHead<'_>) -> Limiter<C> {
        self.clone()
    }
}

impl<C> PickLimiter for MultiLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Limiter = MultiLimiter<C>;

    fn pick(&self, _request: &RequestHead<'_>) -> MultiLimiter<C> {
        self.clone()
    }
}

impl<C> PickLimiter for PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Limiter = PartitionedLimiter<C>;

    fn pick(&self, _request: &RequestHead<'_>) -> PartitionedLimiter<C> {
        self.clone()
    }
}

impl<L, F> PickLimiter for F
where
    F: Fn(&RequestHead<'_>) -> L,
    L: Throttle + 'static,
{
    type Limiter = L;

    fn pick(&self, request: &RequestHead<'_>) -> L {
        self(request)
    }
}

/// The limiter failed around an HTTP request: Redis unreachable, the module missing, ... The
/// request was not sent (when taking a token failed) or its pushback could not be passed on to
/// the fleet (when pausing failed).
#[derive(Debug)]
pub struct LimiterError {
    key: String,
    during: &'static str,
    source: crate::Error,
}

impl LimiterError {
    /// The bucket's key.
    pub fn key(&self) -> &str {
        &self.key
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
            "redis-throttle could not {} on bucket {:?}: {}",
            self.during, self.key, self.source
        )
    }
}

impl std::error::Error for LimiterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// One request's run through the limiter, shared by the adapters: they send, this does the
/// rest.
struct Run<L> {
    limiter: L,
    policy: RetryPolicy,
    method: Method,
    attempt: u32,
}

impl<L: Throttle> Run<L> {
    fn new(limiter: L, policy: RetryPolicy, method: Method) -> Self {
        Run {
            limiter,
            policy,
            method,
            attempt: 1,
        }
    }

    fn span(&self) -> tracing::Span {
        tracing::debug_span!("throttle_http", method = %self.method, key = %self.limiter.name())
    }

    /// Whether to keep a copy of the request before this send.
    fn may_retry(&self) -> bool {
        self.policy.may_retry(&self.method, self.attempt)
    }

    /// Takes a token before a send.
    async fn acquire(&self) -> Result<(), LimiterError> {
        self.limiter
            .acquire()
            .await
            .map(drop)
            .map_err(|source| self.error("take a token before sending", source))
    }

    /// After a response: pauses the bucket on pushback. `Ok(true)`: send the copy again.
    async fn after(
        &mut self,
        status: StatusCode,
        retry_after: Option<&HeaderValue>,
        has_copy: bool,
    ) -> Result<bool, LimiterError> {
        let step = self.policy.after_response(
            status,
            retry_after,
            self.attempt,
            has_copy,
            SystemTime::now(),
            fastrand::f64(),
        );
        let Step::Pause { pause, retry } = step else {
            return Ok(false);
        };
        let next_token: Duration = self
            .limiter
            .pause(pause)
            .await
            .map_err(|source| self.error("pause after the supplier's pushback", source))?;
        tracing::debug!(
            status = status.as_u16(),
            retry_after = ?retry_after,
            ?pause,
            ?next_token,
            attempt = self.attempt,
            retry,
            "supplier pushed back; bucket paused"
        );
        if retry {
            self.attempt += 1;
            tracing::debug!(attempt = self.attempt, "sending again");
        }
        Ok(retry)
    }

    fn error(&self, during: &'static str, source: crate::Error) -> LimiterError {
        LimiterError {
            key: self.limiter.name().to_owned(),
            during,
            source,
        }
    }
}
