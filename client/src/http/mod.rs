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
//! 3. read the supplier's own count in the response's rate-limit headers
//!    ([`read_supplier_count`]: `RateLimit`, `X-RateLimit-Remaining`,
//!    `x-ratelimit-remaining-requests`, ...) and, when it says less is left than the bucket
//!    holds, lower the bucket to it ([`Throttle::sync`]; off with
//!    [`RetryPolicy::read_supplier_count`]). Each count is weighed in its own unit: a
//!    [`MultiLimiter`]'s per-call limits against the requests count, its per-token limits
//!    against `x-ratelimit-remaining-tokens`, and a response that gives only one of them
//!    syncs only the limits of that unit;
//! 4. on 429 or 503, read `Retry-After` (delta seconds or an HTTP date; absent or
//!    unreadable: `x-ms-retry-after-ms`, else [`RetryPolicy::default_pause`], 1 s) and cut
//!    the limiter ([`Throttle::cut`]: the whole fleet pauses for that long plus a jitter,
//!    and its rate drops to 0.7 and climbs back over 30 s, once per episode however many
//!    replicas saw it; [`RetryPolicy::no_cut`] only pauses, [`Throttle::pause`]);
//! 5. take a token again and resend, up to [`RetryPolicy::max_attempts`] sends in all.
//!
//! Every 429, 503 and retry is counted in the limiter's
//! [`PushbackMetrics`](crate::PushbackMetrics), with its pauses, cuts and syncs; so is each
//! 429 or 503 passed on as the response, in `attempts_ran_out` when every attempt was sent,
//! in `not_resent` when attempts were left but the request is not to be resent.
//!
//! Pair the layers with the default [`Strategy::Reserve`](crate::Strategy::Reserve): a
//! reserved call looks at the bucket before it is sent
//! ([`LimiterBuilder::pause_check`](crate::LimiterBuilder::pause_check)), so a pause one
//! replica sets after a 429 holds back every call the pause covers, reserved or not.
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
mod supplier;
#[cfg(feature = "tower")]
mod tower;

use std::fmt;
use std::time::SystemTime;

use ::http::{Extensions, HeaderMap, Method, StatusCode};
use redis::aio::ConnectionLike;

use crate::partitioned::PartitionedLimiter;
use crate::pushback::SyncBounds;
use crate::{HttpEvent, Limiter, MultiLimiter, SupplierCount, Throttle};
use retry::Step;

#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub use self::reqwest::ThrottleMiddleware;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use self::tower::{CloneBody, CloneRequest, NeverClone, ThrottleLayer, ThrottleService};
pub use retry::{is_idempotent, is_pushback, parse_retry_after, RetryPolicy, MAX_PAUSE};
pub use supplier::read_supplier_count;

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
    /// Which of the supplier's counts could lower the buckets as the last take left them,
    /// each unit against its own buckets: a count at or above them costs no round trip.
    bounds: SyncBounds,
}

impl<L: Throttle> Run<L> {
    fn new(limiter: L, policy: RetryPolicy, method: Method) -> Self {
        Run {
            limiter,
            policy,
            method,
            attempt: 1,
            bounds: SyncBounds::UNKNOWN,
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
    async fn acquire(&mut self) -> Result<(), LimiterError> {
        let grant = self
            .limiter
            .acquire()
            .await
            .map_err(|source| self.error("take a token before sending", source))?;
        self.bounds = grant
            .sync_bounds
            .unwrap_or_else(|| SyncBounds::single(grant.remaining));
        Ok(())
    }

    /// After a response: passes on what the supplier said (its count, its pushback) to the
    /// fleet's bucket. `Ok(true)`: send the copy again.
    async fn after(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        has_copy: bool,
    ) -> Result<bool, LimiterError> {
        let count = if self.policy.reads_supplier_count() {
            read_supplier_count(headers, SystemTime::now())
        } else {
            SupplierCount::default()
        };
        let retry_after = headers.get(::http::header::RETRY_AFTER);
        let step = self.policy.after_response(
            status,
            retry_after,
            count.retry_after,
            self.attempt,
            has_copy,
            SystemTime::now(),
            fastrand::f64(),
        );
        let Step::Pause { pause, retry } = step else {
            self.sync(&count).await?;
            return Ok(false);
        };
        self.limiter
            .count(if status == StatusCode::TOO_MANY_REQUESTS {
                HttpEvent::Response429
            } else {
                HttpEvent::Response503
            });
        let next_token = match self.policy.cut_for(pause) {
            Some(cut) => self.limiter.cut(cut).await.map(|report| report.next),
            None => self.limiter.pause(pause).await,
        }
        .map_err(|source| self.error("pause after the supplier's pushback", source))?;
        // After the cut, not before: a count of 0 on a 429 would pause the bucket first, and
        // the cut would then find the episode already paused and not cut.
        self.sync(&count).await?;
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
            self.limiter.count(HttpEvent::Retry);
            tracing::debug!(attempt = self.attempt, "sending again");
        } else if self.attempt >= self.policy.attempts() {
            self.limiter.count(HttpEvent::AttemptsRanOut);
        } else {
            // Attempts were left: not an exhaustion, a request that is not to be resent.
            self.limiter.count(HttpEvent::NotResent);
        }
        Ok(retry)
    }

    /// Lowers the buckets to the supplier's counts that say less is left than a bucket of
    /// their unit held after this call's take, or nothing with a reset; the other counts are
    /// left out, so they sync nothing.
    async fn sync(&mut self, count: &SupplierCount) -> Result<(), LimiterError> {
        let count = self.bounds.filter(count);
        if count.requests.is_none() && count.tokens.is_none() {
            return Ok(());
        }
        let changed = self
            .limiter
            .sync(count)
            .await
            .map_err(|source| self.error("lower the bucket to the supplier's count", source))?;
        tracing::debug!(?count, changed, "the supplier's count");
        // Once per run: a retry's count is read against the bucket as it is now.
        self.bounds = SyncBounds::UNKNOWN;
        Ok(())
    }

    fn error(&self, during: &'static str, source: crate::Error) -> LimiterError {
        LimiterError {
            key: self.limiter.name().to_owned(),
            during,
            source,
        }
    }
}
