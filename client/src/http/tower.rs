//! The tower layer: any `Service<http::Request<B>>` (hyper's client, tonic's channel, ...).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use ::http::{Request, Response};
use ::tower::{Layer, Service};
use tracing::Instrument;

use super::run::Run;
use super::{IntoPick, PerRequest, PickLimiter, RequestHead, RetryPolicy};
use crate::Throttle;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Takes a token from a shared bucket before each request, and obeys the supplier's 429 and
/// 503 (see [the module](super)).
///
/// Errors are boxed, as tower's own layers do: the inner service's, or a
/// [`LimiterError`](super::LimiterError) (`err.downcast_ref::<LimiterError>()`).
///
/// To resend a request the layer copies it first, with `K` ([`CloneBody`] by default, for
/// bodies that are `Clone`: `Full<Bytes>`, `String`, `Empty`). For a streaming body (tonic's,
/// hyper's `Incoming`) use [`ThrottleLayer::clone_requests`] with [`NeverClone`]: every
/// request still takes a token and a 429 still pauses the bucket, but comes back as it is.
///
/// The token is taken after the inner service said it is ready, so a service that reserves
/// something in `poll_ready` (a concurrency permit) holds it while the bucket makes the
/// request wait.
///
/// ```no_run
/// # #[cfg(feature = "connection-manager")]
/// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
/// use redis_throttle::http::{RetryPolicy, ThrottleLayer};
/// use redis_throttle::{Limiter, Quota};
///
/// let limiter = Limiter::new(conn, "quota:supplier", Quota::new(10, 10u64)?);
/// let layer = ThrottleLayer::new(limiter).policy(RetryPolicy::default().max_attempts(4));
/// // let client = tower::ServiceBuilder::new().layer(layer).service(hyper_client);
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ThrottleLayer<P, K = CloneBody> {
    pick: P,
    policy: RetryPolicy,
    clone: K,
}

impl<P: PickLimiter> ThrottleLayer<P> {
    /// Every request takes its token from `limiter`: any [`Throttle`](crate::Throttle) that is
    /// `Clone` (a [`Limiter`](crate::Limiter), a [`MultiLimiter`](crate::MultiLimiter), a
    /// [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter), any of them
    /// [`Prioritized`](crate::Prioritized), or a limiter of your own), or a
    /// [`PickLimiter`] of your own that chooses one per request.
    ///
    /// ```
    /// use http::{Request, Response};
    /// use redis_throttle::http::ThrottleLayer;
    /// use redis_throttle::redis::aio::MultiplexedConnection;
    /// use redis_throttle::{Limiter, Prioritized};
    /// use tower::{Layer, Service};
    ///
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    ///
    /// /// A bulk client: the layered service is a `Service`, checked when this compiles.
    /// fn bulk<S>(
    ///     limiter: Prioritized<Limiter<MultiplexedConnection>>,
    ///     inner: S,
    /// ) -> impl Service<Request<String>, Response = Response<String>, Error = BoxError>
    /// where
    ///     S: Service<Request<String>, Response = Response<String>> + Clone + Send + 'static,
    ///     S::Future: Send,
    ///     S::Error: Into<BoxError>,
    /// {
    ///     ThrottleLayer::new(limiter).layer(inner)
    /// }
    /// # let _ = bulk::<tower::util::BoxCloneService<Request<String>, Response<String>, BoxError>>;
    /// ```
    pub fn new(limiter: P) -> Self {
        ThrottleLayer {
            pick: limiter,
            policy: RetryPolicy::default(),
            clone: CloneBody,
        }
    }
}

impl<F> ThrottleLayer<PerRequest<F>> {
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

impl<P, K> ThrottleLayer<P, K> {
    /// How pushback is handled (default: [`RetryPolicy::default`]).
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// How a request is copied to be sent again: [`CloneBody`] (the default), [`NeverClone`],
    /// or a closure `|&Request<B>| -> Option<Request<B>>` (`None`: not resent).
    pub fn clone_requests<K2>(self, clone: K2) -> ThrottleLayer<P, K2> {
        ThrottleLayer {
            pick: self.pick,
            policy: self.policy,
            clone,
        }
    }
}

impl<S, P: Clone, K: Clone> Layer<S> for ThrottleLayer<P, K> {
    type Service = ThrottleService<S, P, K>;

    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner,
            pick: self.pick.clone(),
            policy: self.policy,
            clone: self.clone.clone(),
        }
    }
}

/// The service [`ThrottleLayer`] wraps around another.
#[derive(Clone, Debug)]
pub struct ThrottleService<S, P, K = CloneBody> {
    inner: S,
    pick: P,
    policy: RetryPolicy,
    clone: K,
}

impl<S, P, K> ThrottleService<S, P, K> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// Copies a request so it can be sent again; see [`ThrottleLayer::clone_requests`].
pub trait CloneRequest<B> {
    /// A copy of the request, or `None` if it cannot be copied (then it is not resent).
    fn clone_request(&self, request: &Request<B>) -> Option<Request<B>>;
}

/// Copies requests whose body is `Clone` (`Full<Bytes>`, `String`, `Empty`, ...).
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneBody;

impl<B: Clone> CloneRequest<B> for CloneBody {
    fn clone_request(&self, request: &Request<B>) -> Option<Request<B>> {
        Some(request.clone())
    }
}

/// Never copies: for streaming bodies. Requests are sent once.
#[derive(Clone, Copy, Debug, Default)]
pub struct NeverClone;

impl<B> CloneRequest<B> for NeverClone {
    fn clone_request(&self, _request: &Request<B>) -> Option<Request<B>> {
        None
    }
}

impl<B, F> CloneRequest<B> for F
where
    F: Fn(&Request<B>) -> Option<Request<B>>,
{
    fn clone_request(&self, request: &Request<B>) -> Option<Request<B>> {
        self(request)
    }
}

impl<S, P, K, B, RB> Service<Request<B>> for ThrottleService<S, P, K>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    P: PickLimiter,
    K: CloneRequest<B> + Clone + Send + 'static,
    B: Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let pick = self.pick.pick(&head(&request));
        // The ready service goes with the request; the clone waits for the next poll_ready.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let run = Run::new(pick, self.policy, request.method().clone());
        let span = run.span();
        Box::pin(send(inner, run, self.clone.clone(), request).instrument(span))
    }
}

async fn send<S, L, K, B, RB>(
    mut inner: S,
    mut run: Run<L>,
    clone: K,
    mut request: Request<B>,
) -> Result<Response<RB>, BoxError>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    L: Throttle + 'static,
    K: CloneRequest<B>,
{
    let mut ready = true;
    loop {
        let copy = if run.may_retry() {
            clone.clone_request(&request)
        } else {
            None
        };
        run.acquire().await?;
        if !ready {
            std::future::poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(Into::into)?;
        }
        let mut response = inner.call(request).await.map_err(Into::into)?;
        ready = false;
        let retry = run
            .after(response.status(), response.headers(), copy.is_some())
            .await?;
        match copy {
            Some(copy) if retry => request = copy,
            _ => {
                response.extensions_mut().insert(run.into_handle());
                return Ok(response);
            }
        }
    }
}

fn head<B>(request: &Request<B>) -> RequestHead<'_> {
    let host = request.uri().host().or_else(|| {
        let header = request.headers().get(::http::header::HOST)?.to_str().ok()?;
        // Without the port; an IPv6 host keeps its brackets, as `Uri::host` does.
        Some(
            header
                .rsplit_once(':')
                .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
                .map_or(header, |(host, _)| host),
        )
    });
    RequestHead {
        method: request.method(),
        host,
        path: request.uri().path(),
        headers: request.headers(),
        extensions: request.extensions(),
    }
}
