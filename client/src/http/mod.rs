//! HTTP clients that take a token before every request and obey the supplier's pushback:
//! `ThrottleLayer`, a tower `Layer` for hyper, tonic or any `Service<http::Request<B>>`
//! (feature `tower`), and `ThrottleMiddleware`, a `reqwest-middleware` middleware (feature
//! `reqwest`).
//!
//! For each request both:
//! 1. choose the limiter: a fixed [`Limiter`], [`MultiLimiter`] or [`PartitionedLimiter`],
//!    or a closure from the [`RequestHead`] to a limiter or a [`Pick`] (per supplier host,
//!    per integrator header, ...), see [`PickLimiter`]; whatever it is, the layers use it as
//!    a [`Throttle`];
//! 2. take the request's cost: a call's cost, or what the picker's [`Pick`] says (its tokens,
//!    priority, deadline: [`Throttle::acquire_with`]), waiting as long as the bucket needs,
//!    then send;
//! 3. read the supplier's own count in the response's rate-limit headers
//!    ([`read_supplier_count`]: `RateLimit`, `X-RateLimit-Remaining`,
//!    `x-ratelimit-remaining-requests`, ...) and, when it says less is left than the bucket
//!    holds, lower the bucket to it ([`Throttle::sync`]; off with
//!    [`RetryPolicy::sync_with_supplier`]). Each count is weighed in its own unit: a
//!    [`MultiLimiter`]'s per-call limits against the requests count, its per-token limits
//!    against `x-ratelimit-remaining-tokens`, and a response that gives only one of them
//!    syncs only the limits of that unit;
//! 4. on 429 or 503, read `Retry-After` (delta seconds or an HTTP date; absent or
//!    unreadable: `x-ms-retry-after-ms`, else [`RetryPolicy::default_pause`], 1 s) and cut
//!    the limiter ([`Throttle::cut`]: the whole fleet pauses for that long plus a jitter,
//!    and its rate drops to 0.7 and climbs back over 30 s, once per episode however many
//!    replicas saw it; [`RetryPolicy::no_cut`] only pauses, [`Throttle::pause`]);
//! 5. take the request's cost again and resend, up to [`RetryPolicy::max_attempts`] sends in
//!    all;
//! 6. settle the final send's grant to the call's actual cost ([`Throttle::settle`]), from
//!    the response head by the picker's [`Pick::settle_from`], or from the body by the
//!    [`SettleHandle`] the layers put in the response's extensions.
//!
//! Every 429, 503 and retry is counted in the limiter's
//! [`PushbackMetrics`](crate::PushbackMetrics), with its pauses, cuts and syncs; so is each
//! 429 or 503 passed on as the response, in `attempts_ran_out` when every attempt was sent,
//! in `not_resent` when attempts were left but the request is not to be resent.
//!
//! # Cost per request, settled from the response
//!
//! An LLM API limits requests and tokens per minute, and a call's tokens are known only from
//! its response. The picker returns a [`Pick`]: the limiter (a [`MultiLimiter`] of a requests
//! limit and a per-token limit), the call's estimate ([`Pick::tokens`]), its priority. After
//! the final response, the grant is settled to the actual cost: the extra is debited (into
//! debt if need be: `THROTTLE.DEBIT`), the unused part given back under `THROTTLE.GIVE`'s rule,
//! only while nothing was taken after the grant. So estimate low: the extra always counts,
//! the unused part comes back only if no other call took tokens meanwhile.
//!
//! - A cost in a header: [`Pick::settle_from`] reads it from the [`ResponseHead`] (status,
//!   headers) and the layer settles before it reads the supplier's count (which already
//!   holds the call's cost). The response's [`SettleHandle`] then says it is settled.
//! - A cost in the body (`usage.total_tokens`): read the body, then settle the
//!   [`SettleHandle`] in the response's extensions
//!   (`response.extensions().get::<SettleHandle>()`; tower: `http::Response::extensions`,
//!   reqwest: `reqwest::Response::extensions`), once; a second settle does nothing and
//!   returns `Ok(None)`. A grant never settled keeps its estimate.
//!
//! # Retries and their grants
//!
//! Each send takes the request's cost again: the supplier counts each send it answers, a
//! 429 included, so each is a call against its quota. The settle (the closure or the handle)
//! settles the final send's grant only. The grants of the sends that got a 429 or 503 are
//! kept as they are, never given back: those sends reached the supplier and were counted by
//! it (OpenAI's requests limit counts a refused request), and giving them back would let the
//! fleet send more than the supplier allows right after it said it was overloaded. (By
//! `THROTTLE.GIVE`'s rule they could seldom come back anyway: the pause and the retry's take
//! came after them.) A grant whose send failed before any response (a connection error) also
//! keeps its tokens.
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
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use ::http::{Extensions, HeaderMap, Method, StatusCode};
use redis::aio::ConnectionLike;

use crate::grant::SlotHold;
use crate::partitioned::PartitionedLimiter;
use crate::pushback::SyncBounds;
use crate::{
    Demand, Grant, HttpEvent, Limiter, MultiLimiter, Prioritized, Priority, Settled, SupplierCount,
    Throttle,
};
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

/// The parts of a response a [`Pick::settle_from`] closure reads: its status and headers.
#[derive(Clone, Copy, Debug)]
pub struct ResponseHead<'a> {
    status: StatusCode,
    headers: &'a HeaderMap,
}

impl<'a> ResponseHead<'a> {
    /// The response status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// A header's value, if it is there and is text.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// All the response's headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }
}

type SettleFrom = Box<dyn Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync>;

/// What a per-request picker chose for one request: its limiter, what each send takes from it
/// (tokens, priority, deadline), and how the response settles it.
///
/// A picker may return a plain limiter instead ([`IntoPick`]): each send then takes the
/// limiter's cost per call, at the limiter's priority.
///
/// ```
/// use redis_throttle::http::{Pick, RequestHead, ResponseHead};
/// use redis_throttle::{Priority, Throttle};
///
/// /// Estimates a call at its `x-max-tokens` header (or 100), in bulk for the nightly jobs,
/// /// settled to the `x-usage-tokens` header the supplier answers with.
/// fn pick<T: Throttle>(limiter: T, request: &RequestHead<'_>) -> Pick<T> {
///     let estimate = request.header("x-max-tokens").and_then(|v| v.parse().ok());
///     let pick = Pick::new(limiter)
///         .tokens(estimate.unwrap_or(100))
///         .settle_from(|response: &ResponseHead<'_>| response.header("x-usage-tokens")?.parse().ok());
///     match request.header("x-workflow") {
///         Some("nightly") => pick.priority(Priority::Bulk { floor: 500 }),
///         _ => pick,
///     }
/// }
/// # let _ = pick::<redis_throttle::MultiLimiter<redis_throttle::redis::aio::MultiplexedConnection>>;
/// ```
pub struct Pick<L> {
    limiter: L,
    demand: Demand,
    settle_from: Option<SettleFrom>,
}

impl<L: Throttle> Pick<L> {
    /// Each send takes the limiter's cost per call, interactive, waiting as long as needed.
    pub fn new(limiter: L) -> Pick<L> {
        Pick {
            limiter,
            demand: Demand::call(),
            settle_from: None,
        }
    }

    /// Each send takes `tokens` (an estimate of the call's cost: an LLM call's tokens); a
    /// [`MultiLimiter`]'s per-token limits take them, its per-call limits a call's cost.
    /// Estimate low: an estimate above the actual cost is given back only while nothing was
    /// taken after it (see [`Throttle::settle`]), one below it is always debited.
    pub fn tokens(self, tokens: u64) -> Pick<L> {
        Pick {
            demand: Demand {
                tokens: Some(tokens),
                ..self.demand
            },
            ..self
        }
    }

    /// Each send takes at `priority` ([`Priority::Bulk`] keeps its floor for the interactive
    /// requests). A [`Prioritized`] limiter's own priority wins over it.
    pub fn priority(self, priority: Priority) -> Pick<L> {
        Pick {
            demand: self.demand.priority(priority),
            ..self
        }
    }

    /// Each send takes what `demand` asks: its tokens (`None`: the limiter's cost), its
    /// deadline (a send that would wait longer fails with
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded), as a [`LimiterError`]),
    /// its priority.
    pub fn demand(self, demand: Demand) -> Pick<L> {
        Pick { demand, ..self }
    }

    /// Settles the final send's grant to the cost `actual` reads from the response head
    /// (`None`: the estimate stands), before the supplier's count is read: a cost the
    /// supplier puts in a header. For a cost only the body says, use the response's
    /// [`SettleHandle`] instead.
    pub fn settle_from<F>(self, actual: F) -> Pick<L>
    where
        F: Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync + 'static,
    {
        Pick {
            settle_from: Some(Box::new(actual)),
            ..self
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.limiter
    }
}

impl<L: Throttle> fmt::Debug for Pick<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pick")
            .field("limiter", &self.limiter.name())
            .field("demand", &self.demand)
            .field("settle_from", &self.settle_from.is_some())
            .finish()
    }
}

/// What a per-request picker may return: a limiter (any [`Throttle`]: each send takes a
/// call's cost) or a [`Pick`] (its tokens, its priority, its settle).
pub trait IntoPick {
    /// The limiter.
    type Limiter: Throttle + 'static;

    /// As a [`Pick`].
    fn into_pick(self) -> Pick<Self::Limiter>;
}

impl<T: Throttle + 'static> IntoPick for T {
    type Limiter = T;

    fn into_pick(self) -> Pick<T> {
        Pick::new(self)
    }
}

impl<L: Throttle + 'static> IntoPick for Pick<L> {
    type Limiter = L;

    fn into_pick(self) -> Pick<L> {
        self
    }
}

/// Chooses the bucket for a request, and what each of its sends takes: a fixed [`Limiter`],
/// [`MultiLimiter`] or [`PartitionedLimiter`] (a call's cost), or any
/// `Fn(&RequestHead) -> R` where `R` is a [`Throttle`] or a [`Pick`] ([`IntoPick`]).
///
/// A closure should hand out clones of limiters it keeps (a map per host, say), not build one
/// per request: a limiter's counters ([`Throttle::metrics`]) live in it and its clones.
pub trait PickLimiter {
    /// The limiter: any [`Throttle`].
    type Limiter: Throttle + 'static;

    /// The limiter for this request, and what each send takes.
    fn pick(&self, request: &RequestHead<'_>) -> Pick<Self::Limiter>;
}

impl<C> PickLimiter for Limiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Limiter = Limiter<C>;

    fn pick(&self, _request: &RequestHead<'_>) -> Pick<Limiter<C>> {
        Pick::new(self.clone())
    }
}

impl<C> PickLimiter for MultiLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Limiter = MultiLimiter<C>;

    fn pick(&self, _request: &RequestHead<'_>) -> Pick<MultiLimiter<C>> {
        Pick::new(self.clone())
    }
}

impl<C> PickLimiter for PartitionedLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Limiter = PartitionedLimiter<C>;

    fn pick(&self, _request: &RequestHead<'_>) -> Pick<PartitionedLimiter<C>> {
        Pick::new(self.clone())
    }
}

impl<T> PickLimiter for Prioritized<T>
where
    T: Throttle + Clone + 'static,
{
    type Limiter = Prioritized<T>;

    fn pick(&self, _request: &RequestHead<'_>) -> Pick<Prioritized<T>> {
        Pick::new(self.clone())
    }
}

impl<R, F> PickLimiter for F
where
    F: Fn(&RequestHead<'_>) -> R,
    R: IntoPick,
{
    type Limiter = R::Limiter;

    fn pick(&self, request: &RequestHead<'_>) -> Pick<R::Limiter> {
        self(request).into_pick()
    }
}

/// The final send's grant, in the response's extensions (tower: `http::Response::extensions`;
/// reqwest: `reqwest::Response::extensions`), for a cost only the body says (an LLM's
/// `usage.total_tokens`): read the body, then `handle.settle(actual).await`.
///
/// Settles at most once: a second call (or a call after [`Pick::settle_from`] settled) does
/// nothing and returns `Ok(None)`. Never settled, the grant's tokens (the estimate) stand.
/// Clones settle the same grant.
#[derive(Clone)]
pub struct SettleHandle {
    pending: Arc<dyn PendingGrant>,
    tokens: u64,
    key: Arc<str>,
}

impl SettleHandle {
    /// Brings the final send's grant to `actual` with [`Throttle::settle`]: the extra is
    /// debited (into debt if need be), the unused part given back under `THROTTLE.GIVE`'s
    /// rule (only while nothing was taken after it). `Ok(None)`: already settled, nothing
    /// done. An error leaves the grant settled as far as it went; it is not retried.
    pub async fn settle(&self, actual: u64) -> Result<Option<Settled>, LimiterError> {
        let settled = self.pending.settle(actual).await;
        if let Ok(None) = settled {
            tracing::debug!(key = %self.key, actual, "already settled; nothing done");
        }
        settled
    }

    /// The tokens the final send took (its estimate).
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Whether the grant is settled (or being settled).
    pub fn is_settled(&self) -> bool {
        self.pending.is_settled()
    }
}

impl fmt::Debug for SettleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettleHandle")
            .field("key", &self.key)
            .field("tokens", &self.tokens)
            .field("settled", &self.is_settled())
            .finish()
    }
}

type SettleFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Settled>, LimiterError>> + Send + 'a>>;

/// A grant waiting to be settled, whatever its limiter's type.
trait PendingGrant: Send + Sync {
    fn settle(&self, actual: u64) -> SettleFuture<'_>;
    fn is_settled(&self) -> bool;
}

struct Pending<L> {
    limiter: L,
    grant: Mutex<Option<Grant>>,
    /// The call's slot under a cap on calls in flight, once its grant was settled from the
    /// head: held until the response (its body included) is dropped.
    _slot: Option<SlotHold>,
}

impl<L: Throttle> PendingGrant for Pending<L> {
    fn settle(&self, actual: u64) -> SettleFuture<'_> {
        // Taken under the lock, settled after it: a clone settling at the same time finds
        // nothing.
        let grant = self.grant.lock().unwrap_or_else(|e| e.into_inner()).take();
        Box::pin(async move {
            let Some(grant) = grant else {
                return Ok(None);
            };
            self.limiter
                .settle(grant, actual)
                .await
                .map(Some)
                .map_err(|source| LimiterError {
                    name: self.limiter.name().to_owned(),
                    during: SETTLING,
                    source,
                })
        })
    }

    fn is_settled(&self) -> bool {
        self.grant
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

const SETTLING: &str = "settle the grant to the response's cost";

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
    /// The limiter's name ([`Throttle::name`]: its key unless it was named).
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

/// One request's run through the limiter, shared by the adapters: they send, this does the
/// rest.
struct Run<L> {
    limiter: L,
    /// What each send takes.
    demand: Demand,
    settle_from: Option<SettleFrom>,
    /// The last send's grant, until it is settled or handed to the response.
    grant: Option<Grant>,
    /// The final send's slot once its grant was settled from the head, for the response.
    slot: Option<SlotHold>,
    /// The tokens the last send took.
    taken: u64,
    policy: RetryPolicy,
    method: Method,
    attempt: u32,
    /// Which of the supplier's counts could lower the buckets as the last take left them,
    /// each unit against its own buckets: a count at or above them costs no round trip.
    bounds: SyncBounds,
}

impl<L: Throttle + 'static> Run<L> {
    fn new(pick: Pick<L>, policy: RetryPolicy, method: Method) -> Self {
        Run {
            limiter: pick.limiter,
            demand: pick.demand,
            settle_from: pick.settle_from,
            grant: None,
            slot: None,
            taken: 0,
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

    /// Takes the demand before a send.
    async fn acquire(&mut self) -> Result<(), LimiterError> {
        let grant = self
            .limiter
            .acquire_with(self.demand)
            .await
            .map_err(|source| self.error("take a token before sending", source))?;
        self.bounds = grant
            .sync_bounds
            .unwrap_or_else(|| SyncBounds::single(grant.remaining));
        // The previous send's grant, if any, is dropped as it is: that send was counted by
        // the supplier (see the module's "Retries").
        self.taken = grant.tokens;
        self.grant = Some(grant);
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
        let count = if self.policy.syncs_with_supplier() {
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
            self.settle_from_head(status, headers).await?;
            self.sync(&count).await?;
            return Ok(false);
        };
        self.limiter
            .count(if status == StatusCode::TOO_MANY_REQUESTS {
                HttpEvent::Response429
            } else {
                HttpEvent::Response503
            });
        let paused = match self.policy.cut_for(pause) {
            Some(cut) => self.limiter.cut(cut).await.map(|report| report.next),
            None => self.limiter.pause(pause).await,
        };
        let next_token = self.tolerate("pause after the supplier's pushback", paused)?;
        if next_token.is_none() && retry {
            // The fleet could not be told: this process at least waits out what the supplier
            // asked for before it sends again.
            tokio::time::sleep(pause).await;
        }
        if !retry {
            self.settle_from_head(status, headers).await?;
        }
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

    /// Settles the final send's grant to the cost the picker's closure reads from the
    /// response head, before the supplier's count is read: that count already holds the
    /// call's actual cost, so settling after it would count the difference twice.
    async fn settle_from_head(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Result<(), LimiterError> {
        let Some(actual) = self
            .settle_from
            .as_ref()
            .and_then(|actual| actual(&ResponseHead { status, headers }))
        else {
            return Ok(());
        };
        let Some(mut grant) = self.grant.take() else {
            return Ok(());
        };
        // The call in flight is not over before its body is read: its slot goes with the
        // response.
        self.slot = grant.slot.take();
        let settled = self.limiter.settle(grant, actual).await;
        let Some(settled) = self.tolerate(SETTLING, settled)? else {
            return Ok(());
        };
        if settled != Settled::default() {
            // The buckets moved since the take: read the supplier's count against them as
            // they are now.
            self.bounds = SyncBounds::UNKNOWN;
        }
        tracing::debug!(actual, ?settled, "settled from the response head");
        Ok(())
    }

    /// The handle to the final send's grant, for the response's extensions; already settled
    /// if the head said the cost.
    fn into_handle(self) -> SettleHandle {
        SettleHandle {
            key: Arc::from(self.limiter.name()),
            tokens: self.taken,
            pending: Arc::new(Pending {
                limiter: self.limiter,
                grant: Mutex::new(self.grant),
                _slot: self.slot,
            }),
        }
    }

    /// Lowers the buckets to the supplier's counts that say less is left than a bucket of
    /// their unit held after this call's take, or nothing with a reset; the other counts are
    /// left out, so they sync nothing.
    async fn sync(&mut self, count: &SupplierCount) -> Result<(), LimiterError> {
        let count = self.bounds.filter(count);
        if count.requests.is_none() && count.tokens.is_none() {
            return Ok(());
        }
        let changed = self.limiter.sync(count).await;
        let Some(changed) = self.tolerate("lower the bucket to the supplier's count", changed)?
        else {
            return Ok(());
        };
        tracing::debug!(?count, changed, "the supplier's count");
        // Once per run: a retry's count is read against the bucket as it is now.
        self.bounds = SyncBounds::UNKNOWN;
        Ok(())
    }

    /// A limiter call after a response: its error fails the request, unless Redis is
    /// unreachable and the limiter fails open ([`Unreachable::FailOpen`](crate::Unreachable)):
    /// then the response goes on as if the call had been made (`Ok(None)`), with a warning.
    fn tolerate<T>(
        &self,
        during: &'static str,
        result: Result<T, crate::Error>,
    ) -> Result<Option<T>, LimiterError> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(source)
                if source.is_unreachable()
                    && self.limiter.on_unreachable() == crate::Unreachable::FailOpen =>
            {
                tracing::warn!(during, error = %source, "Redis is unreachable; going on (fail open)");
                Ok(None)
            }
            Err(source) => Err(self.error(during, source)),
        }
    }

    fn error(&self, during: &'static str, source: crate::Error) -> LimiterError {
        LimiterError {
            name: self.limiter.name().to_owned(),
            during,
            source,
        }
    }
}
