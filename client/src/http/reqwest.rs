//! The `reqwest-middleware` middleware.

use ::http::Extensions;
use ::reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use tracing::Instrument;

use super::run::Run;
use super::{IntoPick, LimiterError, PerRequest, PickLimiter, RequestHead, RetryPolicy};
use crate::Throttle;

/// Takes a token from a shared bucket before each request, and obeys the supplier's 429 and
/// 503 (see [the module](super)).
///
/// A request is resent only if `Request::try_clone` can copy it (not a streamed body).
/// Limiter failures come back as `reqwest_middleware::Error::Middleware`, holding a
/// [`LimiterError`].
///
/// ```no_run
/// # #[cfg(feature = "connection-manager")]
/// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
/// use redis_throttle::http::{RetryPolicy, ThrottleMiddleware};
/// use redis_throttle::{Limiter, Quota};
///
/// let limiter = Limiter::new(conn, "quota:supplier", Quota::new(10, 10u64)?);
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(ThrottleMiddleware::new(limiter).policy(RetryPolicy::default().max_attempts(4)))
///     .build();
/// let response = client.get("http://supplier.example/status").send().await?;
/// # let _ = response;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ThrottleMiddleware<P> {
    pick: P,
    policy: RetryPolicy,
}

impl<P: PickLimiter> ThrottleMiddleware<P> {
    /// Every request takes its token from `limiter`: any [`Throttle`](crate::Throttle) that is
    /// `Clone` (a [`Limiter`](crate::Limiter), a [`MultiLimiter`](crate::MultiLimiter), a
    /// [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter), any of them
    /// [`Prioritized`](crate::Prioritized), or a limiter of your own), or a
    /// [`PickLimiter`] of your own that chooses one per request.
    ///
    /// ```
    /// use redis_throttle::http::ThrottleMiddleware;
    /// use redis_throttle::redis::aio::MultiplexedConnection;
    /// use redis_throttle::{Limiter, Prioritized};
    /// use reqwest_middleware::Middleware;
    ///
    /// /// A bulk client's middleware: a `Middleware`, checked when this compiles.
    /// fn bulk(limiter: Prioritized<Limiter<MultiplexedConnection>>) -> impl Middleware {
    ///     ThrottleMiddleware::new(limiter)
    /// }
    /// # let _ = bulk;
    /// ```
    pub fn new(limiter: P) -> Self {
        ThrottleMiddleware {
            pick: limiter,
            policy: RetryPolicy::default(),
        }
    }
}

impl<F> ThrottleMiddleware<PerRequest<F>> {
    /// Each request takes its token from the limiter `pick` chooses for it, from its
    /// [`RequestHead`]: per supplier host, per integrator header, ... `pick` returns the
    /// limiter (a call's cost) or a [`Pick`](super::Pick): the limiter with the request's
    /// tokens, priority and settle.
    pub fn per_request<R>(pick: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> R,
        R: IntoPick,
    {
        Self::new(PerRequest(pick))
    }
}

impl<P> ThrottleMiddleware<P> {
    /// How pushback is handled (default: [`RetryPolicy::default`]).
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }
}

#[async_trait::async_trait]
impl<P> Middleware for ThrottleMiddleware<P>
where
    P: PickLimiter + Send + Sync + 'static,
{
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let pick = self.pick.pick(&head(&request, extensions));
        let run = Run::new(pick, self.policy, request.method().clone());
        let span = run.span();
        send(run, request, extensions, next).instrument(span).await
    }
}

async fn send<L: Throttle + 'static>(
    mut run: Run<L>,
    mut request: Request,
    extensions: &mut Extensions,
    next: Next<'_>,
) -> reqwest_middleware::Result<Response> {
    loop {
        let copy = if run.may_retry() {
            request.try_clone()
        } else {
            None
        };
        run.acquire().await.map_err(middleware_error)?;
        let mut response = next.clone().run(request, extensions).await?;
        let retry = run
            .after(response.status(), response.headers(), copy.is_some())
            .await
            .map_err(middleware_error)?;
        match copy {
            Some(copy) if retry => request = copy,
            _ => {
                response.extensions_mut().insert(run.into_handle());
                return Ok(response);
            }
        }
    }
}

fn middleware_error(err: LimiterError) -> reqwest_middleware::Error {
    reqwest_middleware::Error::Middleware(anyhow::Error::new(err))
}

fn head<'a>(request: &'a Request, extensions: &'a Extensions) -> RequestHead<'a> {
    RequestHead {
        method: request.method(),
        host: request.url().host_str(),
        path: request.url().path(),
        headers: request.headers(),
        extensions,
    }
}
