//! The tower layer around hyper's client, against a mock supplier that pushes back, over a real
//! Redis with the module; and the layer over a partitioned limiter (no module: leases are plain
//! commands).

use redis_throttle::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use redis::aio::MultiplexedConnection;
use redis_throttle::http::{
    LimiterError, NeverClone, Pick, RequestHead, ResponseHead, RetryPolicy, SettleHandle,
    ThrottleLayer, ThrottleService,
};
use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::{Backend, Error, Limiter, MultiLimiter, Priority, Quota, Rate, Unreachable};
use throttle_e2e::fake::FakeServer;
use throttle_e2e::http_supplier::{Hit, RetryAfter, Script, Supplier};
use throttle_e2e::multiplexed;
use throttle_testkit::{Flavor, Server};
use tower::{Layer, ServiceBuilder, ServiceExt};

type Hyper = Client<HttpConnector, Full<Bytes>>;

mod http_support;
use http_support::{assert_redis_gone, bounded, limiter, plain_403, rate_limit_403, start, LIMIT};

/// A limiter on `key` with `quota`, on a connection of its own.
async fn limiter_of(server: &Server, key: &str, quota: Quota) -> Limiter<MultiplexedConnection> {
    Limiter::new(multiplexed(&server.url()).await, key, quota)
}

/// A supplier that answers every request 200.
fn never_pushes_back() -> Script {
    Script {
        first: 0,
        ..Script::once()
    }
}

fn hyper() -> Hyper {
    Client::builder(TokioExecutor::new()).build_http()
}

fn request(method: Method, url: &str, client: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(url)
        .header("x-client", client)
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap()
}

async fn send<P, K>(
    service: &ThrottleService<Hyper, P, K>,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, Box<dyn std::error::Error + Send + Sync>>
where
    ThrottleService<Hyper, P, K>: tower::Service<
            Request<Full<Bytes>>,
            Response = Response<Incoming>,
            Error = Box<dyn std::error::Error + Send + Sync>,
        > + Clone,
{
    service.clone().oneshot(request).await
}

/// A GET of the supplier's `/` through `service`, sent.
async fn get<P, K>(
    service: &ThrottleService<Hyper, P, K>,
    supplier: &Supplier,
) -> Response<Incoming>
where
    ThrottleService<Hyper, P, K>: tower::Service<
            Request<Full<Bytes>>,
            Response = Response<Incoming>,
            Error = Box<dyn std::error::Error + Send + Sync>,
        > + Clone,
{
    send(service, request(Method::GET, &supplier.url("/"), "a"))
        .await
        .unwrap()
}

/// The status of a GET of the supplier's `/` through the layer on `limiter`, with the default
/// policy.
async fn get_through_the_layer(
    limiter: &Limiter<MultiplexedConnection>,
    supplier: &Supplier,
) -> StatusCode {
    let service = ThrottleLayer::new(limiter.clone()).layer(hyper());
    get(&service, supplier).await.status()
}

/// Every hit after a pushback comes no earlier than the instant its `Retry-After` named, except
/// one already on its way from each replica: a reservation granted before the pause.
fn assert_pause_held(hits: &[Hit], replicas: usize) {
    let Some(first) = hits.iter().position(|h| h.until.is_some()) else {
        return;
    };
    let until = hits[first].until.unwrap();
    let inside: Vec<&Hit> = hits[first + 1..].iter().filter(|h| h.at < until).collect();
    assert!(inside.len() < replicas, "{hits:#?}");
    for hit in &inside {
        let earlier = hits.iter().take_while(|h| h.at < hit.at);
        assert!(
            earlier.filter(|h| h.client == hit.client).count() == 0,
            "{} sent during the pause after it had seen it: {hits:#?}",
            hit.client
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_sending_together_each_meet_at_most_one_429() {
    bounded(async {
        let server = Server::start(Flavor::Redis82);
        // A supplier whose window stays closed for the Retry-After it gave: it answers 429 to
        // anything that comes before then.
        let supplier = Supplier::start(Script {
            closed_window: true,
            ..Script::once()
        })
        .await;
        let url = supplier.url("/status");
        let mut services = Vec::new();
        for name in ["a", "b"] {
            let limiter = limiter(&server, "http:tower:fleet").await;
            services.push((name, limiter.clone(), ThrottleLayer::new(limiter).layer(hyper())));
        }
        // Both start together, once both are connected.
        let replicas: Vec<_> = services
            .into_iter()
            .map(|(name, limiter, service)| {
                let url = url.clone();
                tokio::spawn(async move {
                    for _ in 0..4 {
                        let response = send(&service, request(Method::GET, &url, name))
                            .await
                            .unwrap();
                        assert_eq!(response.status(), StatusCode::OK, "{name}");
                    }
                    limiter.metrics().granted
                })
            })
            .collect();
        let mut granted = 0;
        for replica in replicas {
            granted += replica.await.unwrap();
        }
        let hits = supplier.hits();
        let pushbacks = supplier.pushbacks();
        assert!((1..=2).contains(&pushbacks), "{hits:#?}");
        assert_eq!(hits.len(), 8 + pushbacks, "each 429 resent once");
        assert_eq!(granted, 8 + pushbacks as u64);
        assert_pause_held(&hits, 2);
        let until = hits[0].until.unwrap();
        assert!(hits
            .iter()
            .filter(|h| h.at >= until)
            .all(|h| h.status == StatusCode::OK));
        println!(
            "{pushbacks} 429s in {} requests; the first hit after the pause came {:?} after it ended",
            hits.len(),
            hits.iter().filter(|h| h.at >= until).map(|h| h.at - until).min()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_is_not_resent_unless_the_caller_opts_in() {
    bounded(async {
        let (_server, supplier, limiter) = start(
            Script {
                first: 2,
                ..Script::once()
            },
            "http:tower:post",
        )
        .await;
        let url = supplier.url("/payments");

        let plain = ThrottleLayer::new(limiter.clone()).layer(hyper());
        let response = send(&plain, request(Method::POST, &url, "a"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(supplier.hits().len(), 1);
        // Attempts were left: not resent, not an exhaustion.
        let seen = limiter.metrics().pushback;
        assert_eq!((seen.not_resent, seen.attempts_ran_out), (1, 0), "{seen:?}");

        let opted_in = ThrottleLayer::new(limiter.clone())
            .policy(RetryPolicy::default().retry_non_idempotent(true))
            .layer(hyper());
        let response = send(&opted_in, request(Method::POST, &url, "a"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let hits = supplier.hits();
        assert_eq!(
            hits.iter().map(|h| h.status.as_u16()).collect::<Vec<_>>(),
            [429, 429, 200]
        );
        assert_pause_held(&hits, 1);
        assert_pause_held(&hits[1..], 1);
        let seen = limiter.metrics().pushback;
        assert_eq!((seen.not_resent, seen.retries), (1, 1), "{seen:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supplier_that_always_says_503_gets_max_attempts_and_the_last_503_is_the_response() {
    bounded(async {
        let (_server, supplier, limiter) = start(
            Script {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: RetryAfter::Seconds(0),
                first: usize::MAX,
                closed_window: false,
                count: None,
            },
            "http:tower:always",
        )
        .await;
        for (attempts, expected) in [(None, 3), (Some(4), 4)] {
            let mut policy = RetryPolicy::default();
            if let Some(n) = attempts {
                policy = policy.max_attempts(n);
            }
            let service = ThrottleLayer::new(limiter.clone())
                .policy(policy)
                .layer(hyper());
            let before = supplier.hits().len();
            let response = get(&service, &supplier).await;
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(supplier.hits().len() - before, expected);
        }
        // Both runs used every attempt.
        let seen = limiter.metrics().pushback;
        assert_eq!((seen.attempts_ran_out, seen.not_resent), (2, 0), "{seen:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_cannot_be_copied_is_sent_once_and_still_pauses_the_bucket() {
    bounded(async {
        let (_server, supplier, limiter) = start(Script::once(), "http:tower:stream").await;
        // Per request: the closure sees the URL's host and path.
        let pick = {
            let limiter = limiter.clone();
            move |head: &RequestHead<'_>| {
                assert_eq!(head.host(), Some("127.0.0.1"));
                assert_eq!(head.path(), "/upload");
                limiter.clone()
            }
        };
        let service = ThrottleLayer::per_request(pick)
            .clone_requests(NeverClone)
            .layer(hyper());
        let url = supplier.url("/upload");
        let response = send(&service, request(Method::PUT, &url, "a"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let response = send(&service, request(Method::PUT, &url, "a"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let hits = supplier.hits();
        assert_eq!(hits.len(), 2);
        assert!(hits[1].at >= hits[0].until.unwrap(), "{hits:#?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiter_errors_are_boxed_limiter_errors_and_nothing_is_sent() {
    bounded(async {
        let (mut server, supplier, limiter) = start(Script::once(), "http:tower:gone").await;
        // Redis goes away: the limiter cannot take a token.
        server.kill();
        let service = ThrottleLayer::new(limiter).layer(hyper());
        let err = send(&service, request(Method::GET, &supplier.url("/"), "a"))
            .await
            .unwrap_err();
        let limiter_err = err.downcast_ref::<LimiterError>().expect("a LimiterError");
        assert_redis_gone(limiter_err, &err.to_string(), "http:tower:gone");
        assert!(supplier.hits().is_empty());
    })
    .await;
}

/// The same with a limiter that fails open: the request goes, its grant unchecked; the 429
/// cannot pause the fleet (Redis is gone), so this process waits out the `Retry-After`
/// itself before it sends again, and the 200 comes back. Counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limiter_that_fails_open_sends_and_waits_out_the_pushback_itself() {
    bounded(async {
        let mut server = Server::start(Flavor::Redis82);
        let supplier = Supplier::start(Script::once()).await;
        let limiter = Limiter::builder("http:tower:open", Quota::new(5, 20).unwrap())
            .on_unreachable(Unreachable::FailOpen)
            .build(multiplexed(&server.url()).await)
            .unwrap();
        server.kill();
        let service = ThrottleLayer::new(limiter.clone()).layer(hyper());
        let response = send(&service, request(Method::GET, &supplier.url("/"), "a"))
            .await
            .expect("sent despite Redis");
        assert_eq!(response.status(), StatusCode::OK);
        let hits = supplier.hits();
        assert_eq!(hits.len(), 2, "{hits:#?}");
        assert_eq!(hits[0].status, StatusCode::TOO_MANY_REQUESTS);
        assert!(hits[1].at >= hits[0].until.unwrap(), "{hits:#?}");
        let m = limiter.metrics();
        assert_eq!((m.failed_open, m.granted), (2, 0), "{m:?}");
        assert_eq!(
            (m.pushback.responses_429, m.pushback.retries),
            (1, 1),
            "{m:?}"
        );
    })
    .await;
}

/// The tower layer takes its tokens from a partitioned limiter as from any limiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tower_layer_takes_from_a_partitioned_limiter() {
    let server = Server::builder(Flavor::Redis82).module(false).start();
    // 2 partitions of 2 at once, then 10 per second each.
    let quota = PartitionedQuota::builder("http", Quota::new(4, 20u64).unwrap())
        .partitions(2)
        .lease(Duration::from_millis(1000))
        .build()
        .unwrap();
    let limiter = PartitionedLimiter::builder(quota)
        .build(multiplexed(&server.url()).await)
        .unwrap();
    let service = ServiceBuilder::new()
        .layer(ThrottleLayer::new(limiter.clone()))
        .service(tower::service_fn(
            |_request: hyper::Request<String>| async {
                Ok::<_, std::convert::Infallible>(hyper::Response::new(String::new()))
            },
        ));
    for _ in 0..5 {
        let request = hyper::Request::get("http://supplier.test/status")
            .body(String::new())
            .unwrap();
        let response = tokio::time::timeout(LIMIT, service.clone().oneshot(request))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    assert_eq!(limiter.metrics().granted, 5);
}

/// "10 per second and 500 per minute" goes through the layer as one limiter does: a 429 with
/// `Retry-After: 1` pauses both buckets (one pause, seen by PEEK on each key), the request
/// goes again after it, and each send took one call from both limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tower_layer_takes_from_a_multi_limiter_and_pauses_every_limit() {
    let server = Server::start(Flavor::Redis82);
    let limiter = MultiLimiter::builder()
        .limit("{mt}:second", Quota::new(10, 10u64).unwrap(), 1)
        .limit(
            "{mt}:minute",
            Quota::new(500, Rate::per(500, Duration::from_secs(60))).unwrap(),
            1,
        )
        .build(multiplexed(&server.url()).await)
        .unwrap();
    let sent = Arc::new(AtomicU32::new(0));
    let service = ServiceBuilder::new()
        .layer(ThrottleLayer::new(limiter.clone()))
        .service(tower::service_fn({
            let sent = Arc::clone(&sent);
            move |_request: hyper::Request<String>| {
                let first = sent.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    let mut response = hyper::Response::new(String::new());
                    if first {
                        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                        response
                            .headers_mut()
                            .insert("retry-after", http::HeaderValue::from_static("1"));
                    }
                    Ok::<_, std::convert::Infallible>(response)
                }
            }
        }));
    let request = hyper::Request::get("http://supplier.test/status")
        .body(String::new())
        .unwrap();
    let started = std::time::Instant::now();
    let response = bounded(service.oneshot(request)).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "resent {:?} after a Retry-After of 1 s",
        started.elapsed()
    );
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    let m = limiter.metrics();
    assert_eq!((m.granted, m.pauses), (2, 1), "{m:?}");
    // The minute bucket was paused too: its first token after the pause, then 499 at 120 ms
    // each, put it a minute ahead (without the pause: two calls, 240 ms).
    let mut con = server.conn();
    let ttl: i64 = redis::cmd("PTTL")
        .arg("{mt}:minute")
        .query(&mut con)
        .unwrap();
    assert!(ttl > 50_000, "the minute bucket is full in {ttl} ms");
}

/// A limiter of the caller's own: a [`Limiter`] that counts the takes it passes on.
#[derive(Clone)]
struct Counting {
    inner: Limiter<MultiplexedConnection>,
    takes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Throttle for Counting {
    fn name(&self) -> &str {
        "counting"
    }

    async fn acquire_with(&self, demand: Demand) -> Result<redis_throttle::Grant, Error> {
        self.takes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.acquire_with(demand).await
    }

    async fn try_acquire_with(&self, demand: Demand) -> Result<redis_throttle::TryAcquire, Error> {
        self.inner.try_acquire_with(demand).await
    }

    async fn pause(&self, retry_after: Duration) -> Result<Duration, Error> {
        self.inner.pause(retry_after).await
    }

    async fn give_back(&self, grant: redis_throttle::Grant) -> Result<u64, Error> {
        self.inner.give_back(grant).await
    }

    async fn cut(&self, cut: redis_throttle::Cut) -> Result<redis_throttle::CutReport, Error> {
        self.inner.cut(cut).await
    }

    async fn sync(&self, count: redis_throttle::SupplierCount) -> Result<bool, Error> {
        self.inner.sync(count).await
    }

    async fn settle(
        &self,
        grant: redis_throttle::Grant,
        actual: u64,
    ) -> Result<redis_throttle::Settled, Error> {
        self.inner.settle(grant, actual).await
    }

    fn count(&self, event: redis_throttle::HttpEvent) {
        self.inner.count(event);
    }

    async fn peek(&self) -> Result<redis_throttle::BucketState, Error> {
        self.inner.peek().await
    }

    fn metrics(&self) -> redis_throttle::MetricsSnapshot {
        self.inner.metrics()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limiter_of_the_callers_own_goes_behind_the_layer_as_it_is() {
    bounded(async {
        let (_server, supplier, inner) = start(Script::once(), "http:tower:own").await;
        let own = Counting {
            inner: inner.clone(),
            takes: Default::default(),
        };
        // No `PickLimiter` impl of its own: any `Throttle` that is `Clone` is a picker.
        let service = ThrottleLayer::new(own.clone()).layer(hyper());
        let response = get(&service, &supplier).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            own.takes.load(std::sync::atomic::Ordering::Relaxed),
            2,
            "the 429's send and its retry"
        );
        let seen = inner.metrics().pushback;
        assert_eq!((seen.responses_429, seen.retries), (1, 1), "{seen:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_cuts_the_fleets_rate_and_everything_is_counted() {
    bounded(async {
        let (server, supplier, limiter) = start(Script::once(), "http:tower:cut").await;
        let service = ThrottleLayer::new(limiter.clone()).layer(hyper());
        let start = tokio::time::Instant::now();
        let response = get(&service, &supplier).await;
        assert_eq!(response.status(), StatusCode::OK);
        let seen = limiter.metrics().pushback;
        assert_eq!(
            (
                seen.responses_429,
                seen.retries,
                seen.cuts,
                seen.attempts_ran_out
            ),
            (1, 1, 1, 0),
            "{seen:?}"
        );
        // Cut to 0.7, climbing back linearly over 30 s from the cut (3 000 bp in 30 000 ms):
        // at most what the time since the request started allows.
        let factor = limiter.peek().await.unwrap().factor_bp;
        let climbed = u16::try_from(start.elapsed().as_millis() / 10).unwrap_or(u16::MAX);
        assert!(
            (7_000..=7_000u16.saturating_add(climbed)).contains(&factor),
            "{factor} after {:?}",
            start.elapsed()
        );

        // Opted out: the 429 only pauses, and the rate stays the configured one.
        let plain = self::limiter(&server, "http:tower:no-cut").await;
        let supplier = Supplier::start(Script::once()).await;
        let service = ThrottleLayer::new(plain.clone())
            .policy(RetryPolicy::default().no_cut())
            .layer(hyper());
        let response = get(&service, &supplier).await;
        assert_eq!(response.status(), StatusCode::OK);
        let metrics = plain.metrics();
        assert_eq!((metrics.pauses, metrics.pushback.cuts), (1, 0));
        assert_eq!(plain.peek().await.unwrap().factor_bp, 10_000);
    })
    .await;
}

/// A GET through the layer on `limiter` of a supplier that pushes back once for 1 s: answered
/// 200, resent once, no earlier than 1 s after the first send. The limiter's counts after it.
async fn get_resent_a_second_later(
    limiter: &Limiter<MultiplexedConnection>,
    supplier: &Supplier,
) -> redis_throttle::MetricsSnapshot {
    assert_eq!(
        get_through_the_layer(limiter, supplier).await,
        StatusCode::OK
    );
    let hits = supplier.hits();
    assert_eq!(hits.len(), 2, "{hits:#?}");
    assert!(
        hits[1].at >= hits[0].at + Duration::from_secs(1),
        "{hits:#?}"
    );
    limiter.metrics()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_that_says_the_window_is_spent_pauses_until_the_reset_without_a_cut() {
    bounded(async {
        // GitHub's way: the 429 says 0 left, resetting in 1 s. Nothing is left, the rate is
        // not too high: the fleet waits for the reset, at the rate it had.
        let (_server, supplier, limiter) = start(
            Script {
                count: Some((0, 1)),
                ..Script::once()
            },
            "http:tower:spent",
        )
        .await;
        let metrics = get_resent_a_second_later(&limiter, &supplier).await;
        let seen = &metrics.pushback;
        assert_eq!(
            (
                seen.responses_429,
                seen.retries,
                seen.cuts,
                seen.cuts_same_episode
            ),
            (1, 1, 0, 0),
            "{seen:?}"
        );
        assert_eq!(metrics.pauses, 1, "{metrics:?}");
        assert_eq!(limiter.peek().await.unwrap().factor_bp, 10_000);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_that_says_it_is_a_rate_limit_pauses_and_is_resent() {
    bounded(async {
        // GitHub's secondary rate limit: 403 with `Retry-After: 1`. Pushback, not contention
        // the headers rule out: a pause and a cut, as a 429 would.
        let (server, supplier, limiter) = start(rate_limit_403(), "http:tower:403").await;
        let seen = get_resent_a_second_later(&limiter, &supplier)
            .await
            .pushback;
        assert_eq!(
            (
                seen.responses_other,
                seen.responses_429,
                seen.retries,
                seen.cuts
            ),
            (1, 0, 1, 1),
            "{seen:?}"
        );

        // GitHub's primary rate limit: 403 with `x-ratelimit-remaining: 0` and its reset, no
        // `Retry-After`: the window is spent, the fleet waits for it without a cut.
        let supplier = Supplier::start(Script {
            status: StatusCode::FORBIDDEN,
            retry_after: RetryAfter::Absent,
            count: Some((0, 1)),
            ..Script::once()
        })
        .await;
        let spent = self::limiter(&server, "http:tower:403-spent").await;
        let seen = get_resent_a_second_later(&spent, &supplier).await.pushback;
        assert_eq!(
            (seen.responses_other, seen.retries, seen.cuts),
            (1, 1, 0),
            "{seen:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_403_is_passed_through_untouched() {
    bounded(async {
        let (_server, supplier, limiter) = start(plain_403(), "http:tower:forbidden").await;
        assert_eq!(
            get_through_the_layer(&limiter, &supplier).await,
            StatusCode::FORBIDDEN
        );
        assert_eq!(supplier.hits().len(), 1);
        let metrics = limiter.metrics();
        assert_eq!(metrics.pushback, Default::default(), "{metrics:?}");
        assert_eq!((metrics.pauses, metrics.granted), (0, 1), "{metrics:?}");
        assert_eq!(limiter.peek().await.unwrap().factor_bp, 10_000);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suppliers_count_lowers_the_bucket() {
    bounded(async {
        let server = Server::start(Flavor::Redis82);
        // One call left in the supplier's window, which resets in 30 s.
        let supplier = Supplier::start(Script {
            count: Some((1, 30)),
            ..never_pushes_back()
        })
        .await;
        // 10 at once, 1 per second: nothing refills within the test.
        let limiter = limiter_of(&server, "http:tower:count", Quota::new(10, 1u64).unwrap()).await;
        assert_eq!(
            get_through_the_layer(&limiter, &supplier).await,
            StatusCode::OK
        );
        assert_eq!(limiter.metrics().pushback.syncs, 1);
        assert_eq!(
            limiter.peek().await.unwrap().remaining,
            1,
            "lowered from 9 to 1"
        );

        // Headers ignored on request: the bucket keeps what it holds.
        let other = limiter_of(
            &server,
            "http:tower:count-ignored",
            Quota::new(10, 1u64).unwrap(),
        )
        .await;
        let service = ThrottleLayer::new(other.clone())
            .policy(RetryPolicy::default().sync_with_supplier(false))
            .layer(hyper());
        get(&service, &supplier).await;
        assert_eq!(other.metrics().pushback.syncs, 0);
        assert_eq!(other.peek().await.unwrap().remaining, 9);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_picker_gives_each_request_its_priority() {
    bounded(async {
        let server = Server::start(Flavor::Redis82);
        let supplier = Supplier::start(never_pushes_back()).await;
        // 5 at once, 5 per second; bulk requests leave 4 for the interactive ones.
        let limiter =
            limiter_of(&server, "http:tower:priority", Quota::new(5, 5u64).unwrap()).await;
        let picked = limiter.clone();
        let service = ThrottleLayer::per_request(move |head: &RequestHead<'_>| {
            let priority = match head.header("x-workflow") {
                Some("bulk") => Priority::Bulk { floor: 4 },
                _ => Priority::Interactive,
            };
            picked.clone().at_priority(priority)
        })
        .layer(hyper());
        let info = |con: &mut redis::Connection| -> u64 {
            let info: String = redis::cmd("INFO").arg("throttle").query(con).unwrap();
            throttle_testkit::info_field(&info, "throttle_held_by_floor")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no held_by_floor in\n{info}"))
        };
        let mut con = server.conn();
        let before = info(&mut con);
        // Interactive: 4 left. Bulk: 3 would be left, under its floor of 4, so it reserves its
        // token (there now) and goes once the bucket has 5 again, 200 ms after the interactive
        // take: a reservation, not a refusal.
        let start = std::time::Instant::now();
        send(&service, request(Method::GET, &supplier.url("/"), "i"))
            .await
            .unwrap();
        let mut bulk = request(Method::GET, &supplier.url("/"), "b");
        bulk.headers_mut()
            .insert("x-workflow", http::HeaderValue::from_static("bulk"));
        let response = send(&service, bulk).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(200),
            "the bulk request waited for the floor to refill: {waited:?}"
        );
        assert_eq!(
            info(&mut con),
            before,
            "reserved, never refused by its floor"
        );
        assert_eq!(limiter.metrics().granted, 2);
    })
    .await;
}

mod llm_supplier;

/// The user's case on paused time, over the fake server (the module's arithmetic) and a tower
/// service that answers with each case's headers: nothing refills, so every bucket is exact.
#[tokio::test(start_paused = true)]
async fn a_multi_limiter_syncs_each_limit_from_the_count_in_its_own_unit() {
    for case in llm_supplier::CASES {
        let fake = FakeServer::new();
        let limiter = llm_supplier::multi(fake.clone(), case.name, Backend::Module);
        let supplier = tower::service_fn(move |_: Request<String>| async move {
            let mut response = Response::new(String::new());
            response
                .headers_mut()
                .extend(llm_supplier::header_pairs(case));
            Ok::<_, std::convert::Infallible>(response)
        });
        let service = ThrottleLayer::new(limiter.clone()).layer(supplier);
        let response = service.oneshot(Request::new(String::new())).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{case:?}");
        assert_eq!(
            llm_supplier::buckets(&fake, case.name, Backend::Module).await,
            (case.requests, case.tokens),
            "{case:?}"
        );
        let metrics = limiter.metrics();
        assert_eq!(
            (metrics.pushback.syncs, metrics.pushback.syncs_unchanged),
            case.syncs,
            "{case:?}"
        );
        assert_eq!(metrics.round_trips, case.round_trips, "{case:?}");
    }
}

/// The user's case on every server, through hyper and the tower layer, against a loopback
/// supplier.
fn a_multi_limiter_behind_the_tower_layer_syncs_each_limit_in_its_own_unit(flavor: Flavor) {
    llm_supplier::each_case(
        flavor,
        redis_throttle::Backend::Module,
        "tower",
        |limiter, url| async move {
            let service = ThrottleLayer::new(limiter).layer(hyper());
            let response = send(&service, request(Method::GET, &url, "a"))
                .await
                .unwrap();
            response.status().as_u16()
        },
    );
}

/// A tower service standing for an LLM API: 200 with the request's `x-usage` header as its
/// `x-usage-tokens` and its body's `usage.total_tokens`; no rate-limit headers.
fn usage_supplier(
    request: Request<String>,
) -> std::future::Ready<Result<Response<String>, std::convert::Infallible>> {
    let usage = request
        .headers()
        .get("x-usage")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("0")
        .to_owned();
    let mut response = Response::new(format!(r#"{{"usage":{{"total_tokens":{usage}}}}}"#));
    response.headers_mut().insert(
        "x-usage-tokens",
        http::HeaderValue::from_str(&usage).unwrap(),
    );
    std::future::ready(Ok(response))
}

/// A request to the LLM API estimated at `estimate` tokens (none: the limiter's cost), whose
/// response will report `usage`.
fn llm_request(estimate: Option<u64>, usage: u64) -> Request<String> {
    let mut request = Request::post("http://llm.test/v1/chat/completions").header("x-usage", usage);
    if let Some(estimate) = estimate {
        request = request.header("x-estimate", estimate);
    }
    request.body(String::new()).unwrap()
}

/// The request's estimate, from its `x-estimate` header.
fn estimate(head: &RequestHead<'_>) -> Option<u64> {
    head.header("x-estimate")?.parse().ok()
}

/// Per request, on paused time over the fake server (nothing refills, so the buckets are
/// exact): the picker's tokens are taken (or the limiter's cost without them), the head
/// closure settles the final send to the supplier's usage header, before anything else
/// reads the response, and the response's handle then says it is settled.
#[tokio::test(start_paused = true)]
async fn the_picker_gives_each_request_its_tokens_and_the_response_head_settles_them() {
    let fake = FakeServer::new();
    let limiter = llm_supplier::multi(fake.clone(), "head", Backend::Module);
    let picked = limiter.clone();
    let service = ThrottleLayer::per_request(move |head: &RequestHead<'_>| {
        let pick = Pick::new(picked.clone()).settle_from(|response: &ResponseHead<'_>| {
            assert_eq!(response.status(), StatusCode::OK);
            response.header("x-usage-tokens")?.parse().ok()
        });
        match estimate(head) {
            Some(tokens) => pick.tokens(tokens),
            None => pick,
        }
    })
    .policy(RetryPolicy::default().sync_with_supplier(false))
    .layer(tower::service_fn(usage_supplier));
    let bucket = |fake| async move { llm_supplier::buckets(&fake, "head", Backend::Module).await };

    // 250 taken, 310 used: 60 more debited.
    let response = service
        .clone()
        .oneshot(llm_request(Some(250), 310))
        .await
        .unwrap();
    let handle = response.extensions().get::<SettleHandle>().unwrap().clone();
    assert_eq!((handle.tokens(), handle.is_settled()), (250, true));
    assert!(
        handle.settle(1).await.unwrap().is_none(),
        "settled by the head"
    );
    assert_eq!(bucket(fake.clone()).await, (29, 3_000 - 310));

    // 400 taken, 150 used, nothing taken after it: 250 back.
    service
        .clone()
        .oneshot(llm_request(Some(400), 150))
        .await
        .unwrap();
    assert_eq!(bucket(fake.clone()).await, (28, 3_000 - 310 - 150));

    // No estimate: the limiter's cost per call (100); a head without the usage leaves it.
    let mut request = llm_request(None, 0);
    request.headers_mut().remove("x-usage");
    let service_without_usage = ThrottleLayer::per_request({
        let limiter = limiter.clone();
        move |_: &RequestHead<'_>| {
            Pick::new(limiter.clone())
                .settle_from(|r: &ResponseHead<'_>| r.header("x-missing")?.parse().ok())
        }
    })
    .layer(tower::service_fn(|_: Request<String>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    }));
    let response = service_without_usage.oneshot(request).await.unwrap();
    let handle = response.extensions().get::<SettleHandle>().unwrap();
    assert_eq!((handle.tokens(), handle.is_settled()), (100, false));
    assert_eq!(bucket(fake.clone()).await, (27, 3_000 - 310 - 150 - 100));

    let metrics = limiter.metrics();
    assert_eq!(metrics.granted, 3);
    assert_eq!(
        (metrics.pushback.tokens_debited, metrics.tokens_given_back),
        (60, 250)
    );
}

/// The response's handle, for a cost only the body says, on paused time over the fake server:
/// it settles once (clones included; a second settle does nothing and says so), debits the
/// extra, and gives back the unused part only while nothing was taken after the grant.
#[tokio::test(start_paused = true)]
async fn the_responses_handle_settles_once_and_gives_back_only_while_nothing_was_taken_after() {
    let fake = FakeServer::new();
    let limiter = llm_supplier::multi(fake.clone(), "handle", Backend::Module);
    let picked = limiter.clone();
    let service = ThrottleLayer::per_request(move |head: &RequestHead<'_>| {
        Pick::new(picked.clone()).tokens(estimate(head).unwrap())
    })
    .layer(tower::service_fn(usage_supplier));
    let send = |estimate, usage| {
        let service = service.clone();
        async move {
            let response = service
                .oneshot(llm_request(Some(estimate), usage))
                .await
                .unwrap();
            let handle = response.extensions().get::<SettleHandle>().unwrap().clone();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let usage = llm_supplier::total_tokens(std::str::from_utf8(&body).unwrap());
            (handle, usage.unwrap())
        }
    };
    let bucket = || llm_supplier::buckets(&fake, "handle", Backend::Module);

    let (a, used_a) = send(200, 50).await;
    let (b, used_b) = send(200, 80).await;
    assert_eq!((a.tokens(), b.tokens(), a.is_settled()), (200, 200, false));
    assert_eq!(
        bucket().await,
        (28, 2_600),
        "never settled, the estimates stand"
    );
    // B took after A: A's unused 150 cannot come back.
    let settled = llm_supplier::outcome(a.settle(used_a).await.unwrap());
    assert_eq!(settled, Some((0, 0)));
    // B was the last take: its unused 120 come back.
    let settled = llm_supplier::outcome(b.clone().settle(used_b).await.unwrap());
    assert_eq!(settled, Some((0, 120)));
    assert_eq!(bucket().await, (28, 2_720));
    // Once: again, or through a clone, nothing is done.
    assert!(b.settle(used_b).await.unwrap().is_none());
    assert!(a.clone().settle(0).await.unwrap().is_none());
    assert!(a.is_settled() && b.is_settled());
    assert_eq!(bucket().await, (28, 2_720));

    // 100 taken, 300 used: 200 debited, into the bucket.
    let (c, used_c) = send(100, 300).await;
    let settled = llm_supplier::outcome(c.settle(used_c).await.unwrap());
    assert_eq!(settled, Some((200, 0)));
    assert_eq!(bucket().await, (27, 2_720 - 300));
    let metrics = limiter.metrics();
    assert_eq!(
        (metrics.pushback.tokens_debited, metrics.tokens_given_back),
        (200, 120)
    );
}

/// A request resent after a 429 takes its tokens again for each send, on paused time over
/// the fake server; the settle (by the head closure, or by the handle) settles the final
/// send's grant, and the 429's grant is kept: the supplier counted that send.
#[tokio::test(start_paused = true)]
async fn each_send_takes_the_requests_tokens_and_the_settle_settles_the_last() {
    for by_head in [true, false] {
        let fake = FakeServer::new();
        // 1 000 at once, 1 000 per second.
        let limiter = Limiter::builder("retried", Quota::new(1_000, 1_000u64).unwrap())
            .backend(Backend::Module)
            .build(fake.clone())
            .unwrap();
        let heads_read = Arc::new(AtomicU32::new(0));
        let picked = limiter.clone();
        let read = Arc::clone(&heads_read);
        let service = ThrottleLayer::per_request(move |_: &RequestHead<'_>| {
            let pick = Pick::new(picked.clone()).tokens(100);
            if !by_head {
                return pick;
            }
            let read = Arc::clone(&read);
            pick.settle_from(move |response: &ResponseHead<'_>| {
                read.fetch_add(1, Ordering::SeqCst);
                response.header("x-usage-tokens")?.parse().ok()
            })
        })
        .policy(RetryPolicy::default().no_cut().max_jitter(Duration::ZERO))
        .layer(tower::service_fn({
            let sent = Arc::new(AtomicU32::new(0));
            move |_: Request<String>| {
                let first = sent.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    let mut response = Response::new(String::new());
                    // The 429 reports a usage too: settling it would show.
                    let usage = if first {
                        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                        response
                            .headers_mut()
                            .insert("retry-after", http::HeaderValue::from_static("1"));
                        "0"
                    } else {
                        "40"
                    };
                    response
                        .headers_mut()
                        .insert("x-usage-tokens", http::HeaderValue::from_static(usage));
                    Ok::<_, std::convert::Infallible>(response)
                }
            }
        }));
        let response = service.oneshot(Request::new(String::new())).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let takes: Vec<u64> = fake.calls().iter().map(|c| c.tokens).collect();
        assert_eq!(takes, [100, 100], "by_head {by_head}: each send took 100");
        let handle = response.extensions().get::<SettleHandle>().unwrap();
        assert_eq!(handle.tokens(), 100);
        if by_head {
            assert_eq!(heads_read.load(Ordering::SeqCst), 1, "the final head only");
            assert!(handle.settle(40).await.unwrap().is_none());
        } else {
            let settled = llm_supplier::outcome(handle.settle(40).await.unwrap());
            assert_eq!(settled, Some((0, 60)));
        }
        // The retry's take emptied the paused bucket; its unused 60 came back, the 429's 100
        // did not.
        assert_eq!(
            limiter.peek().await.unwrap().remaining,
            60,
            "by_head {by_head}"
        );
        let metrics = limiter.metrics();
        assert_eq!((metrics.granted, metrics.tokens_given_back), (2, 60));
        let seen = metrics.pushback;
        assert_eq!(
            (
                seen.responses_429,
                seen.retries,
                seen.attempts_ran_out,
                seen.not_resent
            ),
            (1, 1, 0, 0)
        );
    }
}

/// The user's LLM case on every server, through hyper and the tower layer, against a loopback
/// LLM API: each request's estimate is taken, and the usage in its body settles it through the
/// response's handle.
fn a_multi_limiter_behind_the_tower_layer_settles_each_call_to_its_usage(flavor: Flavor) {
    llm_supplier::settles_each_call(
        flavor,
        redis_throttle::Backend::Module,
        "tower",
        |limiter, url, estimate, usage| async move {
            let service = ThrottleLayer::per_request(move |head: &RequestHead<'_>| {
                let tokens = head.header("x-estimate").and_then(|v| v.parse().ok());
                Pick::new(limiter.clone()).tokens(tokens.unwrap())
            })
            .layer(hyper());
            let mut request = request(Method::POST, &url, "a");
            let headers = request.headers_mut();
            headers.insert("x-estimate", estimate.into());
            headers.insert("x-usage", usage.into());
            let response = send(&service, request).await.unwrap();
            let status = response.status().as_u16();
            let handle = response.extensions().get::<SettleHandle>().unwrap().clone();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let body = std::str::from_utf8(&body).unwrap();
            let (first, second) = llm_supplier::settle_twice(&handle, body).await;
            (status, first, second)
        },
    );
}

throttle_testkit::per_server!(
    a_multi_limiter_behind_the_tower_layer_syncs_each_limit_in_its_own_unit,
    a_multi_limiter_behind_the_tower_layer_settles_each_call_to_its_usage,
);

/// The head closure settles before the supplier's count is read, on paused time over the fake
/// server: the count already holds the call's actual cost, so the extra is not counted twice.
#[tokio::test(start_paused = true)]
async fn the_head_settles_before_the_suppliers_count_so_the_cost_counts_once() {
    let fake = FakeServer::new();
    let limiter = llm_supplier::multi(fake.clone(), "head-count", Backend::Module);
    let picked = limiter.clone();
    let service = ThrottleLayer::per_request(move |_: &RequestHead<'_>| {
        Pick::new(picked.clone())
            .tokens(100)
            .settle_from(|r: &ResponseHead<'_>| r.header("x-usage-tokens")?.parse().ok())
    })
    .layer(tower::service_fn(|_: Request<String>| async {
        let mut response = Response::new(String::new());
        // The call used 150; the supplier's ledger says so: 3 000 - 150 left.
        for (name, value) in [
            ("x-usage-tokens", "150"),
            ("x-ratelimit-remaining-tokens", "2850"),
            ("x-ratelimit-reset-tokens", "3s"),
        ] {
            response
                .headers_mut()
                .insert(name, http::HeaderValue::from_static(value));
        }
        Ok::<_, std::convert::Infallible>(response)
    }));
    service.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(
        llm_supplier::buckets(&fake, "head-count", Backend::Module).await,
        (29, 2_850)
    );
    let metrics = limiter.metrics();
    assert_eq!(metrics.pushback.tokens_debited, 50);
    // The settle moved the bucket, so the count is sent, and finds it already there.
    assert_eq!(
        (metrics.pushback.syncs, metrics.pushback.syncs_unchanged),
        (0, 1)
    );
}

/// `THROTTLE.SLOTS key 5 20`: the slots held now.
fn slots_held(server: &Server, key: &str) -> u64 {
    let (held, _): (u64, u64) = redis::cmd("THROTTLE.SLOTS")
        .arg(key)
        .arg(5)
        .arg(20)
        .query(&mut server.conn())
        .unwrap();
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_call_holds_its_slot_until_its_response_is_dropped() {
    bounded(async {
        let server = Server::start(Flavor::Redis82);
        let supplier = Supplier::start(never_pushes_back()).await;
        let key = "http:tower:in-flight";
        let limiter = Limiter::builder(key, Quota::new(5, 20u64).unwrap())
            .max_in_flight(2)
            .build(multiplexed(&server.url()).await)
            .unwrap();
        // Settled from the head, and not: either way the slot goes with the response.
        let plain = ThrottleLayer::new(limiter.clone()).layer(hyper());
        let settled = {
            let limiter = limiter.clone();
            ThrottleLayer::per_request(move |_: &RequestHead<'_>| {
                redis_throttle::http::Pick::new(limiter.clone()).settle_from(|_| Some(1))
            })
            .layer(hyper())
        };
        let url = supplier.url("/status");
        let first = send(&plain, request(Method::GET, &url, "a")).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        let second = send(&settled, request(Method::GET, &url, "a"))
            .await
            .unwrap();
        assert_eq!(second.status(), StatusCode::OK);
        assert_eq!(slots_held(&server, key), 2, "each response holds its slot");
        assert_eq!(limiter.metrics().in_flight.held, 2);
        drop(first);
        drop(second);
        throttle_e2e::within_async("the releases", LIMIT, || {
            (slots_held(&server, key) == 0).then_some(())
        })
        .await;
        assert_eq!(limiter.metrics().in_flight.held, 0);
    })
    .await;
}
