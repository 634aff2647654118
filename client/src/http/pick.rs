//! Which limiter a request takes from, and what each of its sends takes: [`PickLimiter`],
//! one impl for every [`Throttle`] (a user's own included) and one for a closure
//! ([`PerRequest`]).

use std::fmt;

use super::{RequestHead, ResponseHead};
use crate::{Demand, Priority, Throttle};

pub(super) type SettleFrom = Box<dyn Fn(&ResponseHead<'_>) -> Option<u64> + Send + Sync>;

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
    pub(super) limiter: L,
    pub(super) demand: Demand,
    pub(super) settle_from: Option<SettleFrom>,
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
    /// [`MultiLimiter`](crate::MultiLimiter)'s per-token limits take them, its per-call limits a call's cost.
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
    /// requests). A [`Prioritized`](crate::Prioritized) limiter's own priority wins over it.
    pub fn priority(self, priority: Priority) -> Pick<L> {
        Pick {
            demand: self.demand.priority(priority),
            ..self
        }
    }

    /// Each send takes what `demand` asks: its tokens (`None`: the limiter's cost), its
    /// deadline (a send that would wait longer fails with
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded), as a [`LimiterError`](super::LimiterError)),
    /// its priority.
    pub fn demand(self, demand: Demand) -> Pick<L> {
        Pick { demand, ..self }
    }

    /// Settles the final send's grant to the cost `actual` reads from the response head
    /// (`None`: the estimate stands), before the supplier's count is read: a cost the
    /// supplier puts in a header. For a cost only the body says, use the response's
    /// [`SettleHandle`](super::SettleHandle) instead.
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

/// Chooses the bucket for a request, and what each of its sends takes: any [`Throttle`] that is
/// `Clone` (a [`Limiter`](crate::Limiter), [`MultiLimiter`](crate::MultiLimiter),
/// [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter), any of them
/// [`Prioritized`](crate::Prioritized), or a limiter of your own: each send takes a call's
/// cost), a closure `Fn(&RequestHead) -> R` in a [`PerRequest`] where `R` is a [`Throttle`] or
/// a [`Pick`] ([`IntoPick`]), or a picker of your own.
///
/// A picker should hand out clones of limiters it keeps (a map per host, say), not build one
/// per request: a limiter's counters ([`Throttle::metrics`]) live in it and its clones.
pub trait PickLimiter {
    /// The limiter: any [`Throttle`].
    type Limiter: Throttle + 'static;

    /// The limiter for this request, and what each send takes.
    fn pick(&self, request: &RequestHead<'_>) -> Pick<Self::Limiter>;
}

impl<T> PickLimiter for T
where
    T: Throttle + Clone + 'static,
{
    type Limiter = T;

    /// A clone of the limiter, each send taking a call's cost.
    fn pick(&self, _request: &RequestHead<'_>) -> Pick<T> {
        Pick::new(self.clone())
    }
}

/// A closure from the [`RequestHead`] to a limiter or a [`Pick`], as a [`PickLimiter`]: what
/// `per_request` makes of its closure (`ThrottleLayer::per_request`,
/// `ThrottleMiddleware::per_request`).
///
/// A closure is not a [`PickLimiter`] itself, so that any [`Throttle`] can be one (a closure
/// could be both, as far as the compiler knows): wrap it in `PerRequest` to hand it to code
/// that takes a [`PickLimiter`].
#[derive(Clone, Copy)]
pub struct PerRequest<F>(pub F);

impl<F> fmt::Debug for PerRequest<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PerRequest(..)")
    }
}

impl<R, F> PickLimiter for PerRequest<F>
where
    F: Fn(&RequestHead<'_>) -> R,
    R: IntoPick,
{
    type Limiter = R::Limiter;

    fn pick(&self, request: &RequestHead<'_>) -> Pick<R::Limiter> {
        (self.0)(request).into_pick()
    }
}
