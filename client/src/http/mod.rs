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
//! 4. on pushback, read `Retry-After` (delta seconds or an HTTP date; absent or
//!    unreadable: `x-ms-retry-after-ms`, else [`RetryPolicy::default_pause`], 1 s) and cut
//!    the limiter ([`Throttle::cut`]: the whole fleet pauses for that long plus a jitter,
//!    and its rate drops to 0.7 and climbs back over 30 s, once per episode however many
//!    replicas saw it; [`RetryPolicy::no_cut`] only pauses, [`Throttle::pause`]). Pushback is
//!    a 429 or 503, or a 403 that says it is a rate limit (a `Retry-After`, or a remaining
//!    count of 0: GitHub's; [`RetryPolicy::pushback_status`] adds others); a plain 403 is the
//!    caller's. A pushback whose headers say the supplier's window is spent (0 left and when
//!    it resets) pauses the fleet until the reset without a cut;
//! 5. take the request's cost again and resend, up to [`RetryPolicy::max_attempts`] sends in
//!    all;
//! 6. settle the final send's grant to the call's actual cost ([`Throttle::settle`]), from
//!    the response head by the picker's [`Pick::settle_from`], or from the body by the
//!    [`SettleHandle`] the layers put in the response's extensions.
//!
//! Every 429, 503, other pushback (`responses_other`) and retry is counted in the limiter's
//! [`PushbackMetrics`](crate::PushbackMetrics), with its pauses, cuts and syncs; so is each
//! pushback passed on as the response, in `attempts_ran_out` when every attempt was sent,
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
//!
//! [`Limiter`]: crate::Limiter
//! [`MultiLimiter`]: crate::MultiLimiter
//! [`PartitionedLimiter`]: crate::partitioned::PartitionedLimiter
//! [`Throttle`]: crate::Throttle
//! [`Throttle::acquire_with`]: crate::Throttle::acquire_with
//! [`Throttle::cut`]: crate::Throttle::cut
//! [`Throttle::pause`]: crate::Throttle::pause
//! [`Throttle::settle`]: crate::Throttle::settle
//! [`Throttle::sync`]: crate::Throttle::sync

mod error;
mod head;
mod pick;
#[cfg(feature = "reqwest")]
mod reqwest;
mod retry;
mod run;
mod settle;
mod supplier;
#[cfg(feature = "tower")]
mod tower;

pub use error::LimiterError;
pub use head::{RequestHead, ResponseHead};
pub use pick::{IntoPick, PerRequest, Pick, PickLimiter};
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub use reqwest::ThrottleMiddleware;
pub use retry::{is_idempotent, is_pushback, parse_retry_after, RetryPolicy, MAX_PAUSE};
pub use settle::SettleHandle;
pub use supplier::read_supplier_count;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use tower::{CloneBody, CloneRequest, NeverClone, ThrottleLayer, ThrottleService};
