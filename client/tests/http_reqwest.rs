//! The reqwest-middleware middleware against a mock supplier that pushes back, over a real
//! Redis with the module.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_throttle::http::{LimiterError, RetryPolicy, ThrottleMiddleware};
use redis_throttle::Limiter;
use reqwest::StatusCode;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use throttle_e2e::http_supplier::{Hit, RetryAfter, Script, Supplier};
use throttle_testkit::{Flavor, Server};
use tokio::time::Instant;

mod http_support;
use http_support::{assert_redis_gone, bounded, limiter, plain_403, rate_limit_403, start};

fn client(middleware: ThrottleMiddleware<Limiter<MultiplexedConnection>>) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build()
}

/// Waits until the bucket is paused (no token left), as a replica that joins would find it.
async fn until_paused(limiter: &Limiter<MultiplexedConnection>) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while limiter.peek().await.unwrap().remaining > 0 {
        assert!(Instant::now() < deadline, "the bucket was never paused");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every hit after a pushback comes no earlier than the instant its `Retry-After` named.
fn assert_nothing_inside_the_pause(hits: &[Hit]) {
    for (index, pushback) in hits.iter().enumerate() {
        let Some(until) = pushback.until else {
            continue;
        };
        for later in &hits[index + 1..] {
            assert!(
                later.at >= until,
                "{later:?} came {:?} before the pause ended; all hits: {hits:#?}",
                until - later.at
            );
        }
    }
}

/// A GET of `/` through `client` from a supplier that pushes back once: the caller gets the
/// retry's 200, after two sends, none inside the pause the first one set. Returns the sends.
async fn get_resent_after_the_pause(
    client: &ClientWithMiddleware,
    supplier: &Supplier,
) -> Vec<Hit> {
    let response = client.get(supplier.url("/")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let hits = supplier.hits();
    assert_eq!(hits.len(), 2, "{hits:#?}");
    assert_nothing_inside_the_pause(&hits);
    hits
}

async fn one_replicas_429_stops_the_other_replica_too(flavor: Flavor) {
    let server = Server::start(flavor);
    let supplier = Supplier::start(Script::once()).await;
    let key = "http:supplier";
    let replica_a = limiter(&server, key).await;
    let replica_b = limiter(&server, key).await;
    let a = client(ThrottleMiddleware::new(replica_a.clone()));
    let b = client(ThrottleMiddleware::new(replica_b.clone()));

    let start = Instant::now();
    let url = supplier.url("/status");
    let first = tokio::spawn({
        let url = url.clone();
        async move { a.get(url).header("x-client", "a").send().await }
    });
    // Replica B joins while A's pause holds: it must wait for it too.
    until_paused(&replica_b).await;
    for _ in 0..3 {
        let response = b.get(&url).header("x-client", "b").send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let response = first.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::OK, "A's retry went through");
    assert!(start.elapsed() >= Duration::from_secs(1));

    let hits = supplier.hits();
    let clients: Vec<(&str, u16)> = hits
        .iter()
        .map(|h| (h.client.as_str(), h.status.as_u16()))
        .collect();
    assert_eq!(clients.len(), 5, "{hits:#?}");
    assert_eq!(clients[0], ("a", 429), "{hits:#?}");
    assert_eq!(supplier.pushbacks(), 1, "{hits:#?}");
    assert_eq!(clients.iter().filter(|c| c.0 == "b").count(), 3);
    assert_nothing_inside_the_pause(&hits);
    assert_eq!(
        replica_a.metrics().granted,
        2,
        "the first send and the retry"
    );
    let until = hits[0].until.unwrap();
    println!(
        "{flavor}: 429 at {:?}, Retry-After 1 s; next hits at {:?} after the pause ended",
        hits[0].at - start,
        hits[1..]
            .iter()
            .map(|h| (h.client.clone(), h.at - until))
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replicas_429_stops_the_other_replica_too_on_redis_8_2() {
    bounded(one_replicas_429_stops_the_other_replica_too(
        Flavor::Redis82,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replicas_429_stops_the_other_replica_too_on_redis_7_0() {
    bounded(one_replicas_429_stops_the_other_replica_too(
        Flavor::Redis70,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_with_an_http_date_pauses_until_that_date() {
    bounded(async {
        let (_server, supplier, limiter) = start(
            Script {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: RetryAfter::Date,
                first: 1,
                closed_window: false,
                count: None,
            },
            "http:date",
        )
        .await;
        let client = client(ThrottleMiddleware::new(limiter.clone()));
        let hits = get_resent_after_the_pause(&client, &supplier).await;
        assert_eq!(hits[0].status, StatusCode::SERVICE_UNAVAILABLE);
        let until = hits[0].until.unwrap();
        assert!(until - hits[0].at >= Duration::from_millis(500));
        // How long after the date the retry came is the machine's (the jitter is at most
        // 100 ms): printed, not bounded.
        println!("the retry came {:?} after the date", hits[1].at - until);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_gets_its_429_back_but_the_bucket_pauses_all_the_same() {
    bounded(async {
        let (_server, supplier, limiter) = start(Script::once(), "http:post").await;
        let client = client(ThrottleMiddleware::new(limiter.clone()));

        let response = client
            .post(supplier.url("/payments"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["retry-after"], "1");
        assert_eq!(supplier.hits().len(), 1, "not resent");
        let seen = limiter.metrics().pushback;
        assert_eq!((seen.not_resent, seen.attempts_ran_out), (1, 0), "{seen:?}");
        // The supplier's word holds for the next request all the same.
        let response = client.get(supplier.url("/status")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let hits = supplier.hits();
        assert_eq!(hits.len(), 2);
        assert_nothing_inside_the_pause(&hits);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_is_resent_when_the_caller_opts_in() {
    bounded(async {
        let (_server, supplier, limiter) = start(Script::once(), "http:post-opt-in").await;
        let policy = RetryPolicy::default().retry_non_idempotent(true);
        let client = client(ThrottleMiddleware::new(limiter).policy(policy));
        let response = client
            .post(supplier.url("/payments"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let hits = supplier.hits();
        assert_eq!(hits.len(), 2);
        assert!(hits.iter().all(|h| h.method == reqwest::Method::POST));
        assert_nothing_inside_the_pause(&hits);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempts_are_bounded_when_the_supplier_always_says_429() {
    bounded(async {
        let (_server, supplier, limiter) = start(
            Script {
                retry_after: RetryAfter::Seconds(0),
                first: usize::MAX,
                ..Script::once()
            },
            "http:always",
        )
        .await;
        for (policy, sends) in [
            (RetryPolicy::default(), 3),
            (RetryPolicy::default().max_attempts(5), 5),
            (RetryPolicy::default().max_attempts(1), 1),
        ] {
            let before = supplier.hits().len();
            let client = client(ThrottleMiddleware::new(limiter.clone()).policy(policy));
            let response = client.get(supplier.url("/")).send().await.unwrap();
            assert_eq!(
                response.status(),
                StatusCode::TOO_MANY_REQUESTS,
                "the last 429 is the response"
            );
            assert_eq!(supplier.hits().len() - before, sends, "{policy:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_403_pauses_and_is_resent_and_a_plain_403_is_the_response() {
    bounded(async {
        // GitHub's secondary rate limit: 403 with `Retry-After: 1`.
        let (server, supplier, limiter) = start(rate_limit_403(), "http:403").await;
        let client = client(ThrottleMiddleware::new(limiter.clone()));
        get_resent_after_the_pause(&client, &supplier).await;
        let seen = limiter.metrics().pushback;
        assert_eq!((seen.responses_other, seen.retries), (1, 1), "{seen:?}");

        // Forbidden, and nothing says it is a rate limit: the caller's, sent once.
        let forbidden = Supplier::start(plain_403()).await;
        let plain = self::limiter(&server, "http:forbidden").await;
        let client = self::client(ThrottleMiddleware::new(plain.clone()));
        let response = client.get(forbidden.url("/")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(response.text().await.unwrap(), "no");
        assert_eq!(forbidden.hits().len(), 1);
        let metrics = plain.metrics();
        assert_eq!(metrics.pushback, Default::default(), "{metrics:?}");
        assert_eq!(metrics.pauses, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_is_chosen_per_request() {
    bounded(async {
        let server = Server::start(Flavor::Redis82);
        let supplier = Supplier::start(Script::once()).await;
        let acme = limiter(&server, "http:integrator:acme").await;
        let globex = limiter(&server, "http:integrator:globex").await;
        let (a, g) = (acme.clone(), globex.clone());
        let by_integrator = ThrottleMiddleware::per_request(move |head| {
            assert_eq!(head.host(), Some("127.0.0.1"));
            assert_eq!(head.path(), "/status");
            match head.header("x-client") {
                Some("acme") => a.clone(),
                _ => g.clone(),
            }
        });
        let client = ClientBuilder::new(reqwest::Client::new())
            .with(by_integrator)
            .build();
        let url = supplier.url("/status");
        let paused = tokio::spawn({
            let (client, url) = (client.clone(), url.clone());
            async move { client.get(url).header("x-client", "acme").send().await }
        });
        until_paused(&acme).await;
        // Acme's pause is not globex's.
        for _ in 0..3 {
            let response = client
                .get(&url)
                .header("x-client", "globex")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
        }
        assert_eq!(paused.await.unwrap().unwrap().status(), StatusCode::OK);
        let hits = supplier.hits();
        let until = hits[0].until.unwrap();
        let (during, after): (Vec<&Hit>, Vec<&Hit>) = hits[1..].iter().partition(|h| h.at < until);
        assert!(
            during.len() == 3 && during.iter().all(|h| h.client == "globex"),
            "{hits:#?}"
        );
        assert!(after.len() == 1 && after[0].client == "acme", "{hits:#?}");
        assert_eq!((acme.metrics().granted, globex.metrics().granted), (2, 3));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiter_errors_are_middleware_errors_and_nothing_is_sent() {
    bounded(async {
        let (mut server, supplier, limiter) = start(Script::once(), "http:gone").await;
        // Redis goes away: the limiter cannot take a token.
        server.kill();
        let client = client(ThrottleMiddleware::new(limiter));
        let err = client.get(supplier.url("/")).send().await.unwrap_err();
        let reqwest_middleware::Error::Middleware(err) = err else {
            panic!("{err:?}");
        };
        let limiter_err = err.downcast_ref::<LimiterError>().expect("a LimiterError");
        assert_redis_gone(limiter_err, &err.to_string(), "http:gone");
        assert!(supplier.hits().is_empty());
    })
    .await;
}

mod llm_supplier;

/// The user's case on every server, through the reqwest middleware, over the Lua library
/// (the tower test runs the module): a loopback supplier gives an LLM API's counts, and each
/// limit of the multi limiter is synced from the one in its own unit.
fn a_multi_limiter_behind_the_middleware_syncs_each_limit_in_its_own_unit(flavor: Flavor) {
    llm_supplier::each_case(
        flavor,
        redis_throttle::Backend::Library,
        "reqwest",
        |limiter, url| async move {
            let client = ClientBuilder::new(reqwest::Client::new())
                .with(ThrottleMiddleware::new(limiter))
                .build();
            client.get(url).send().await.unwrap().status().as_u16()
        },
    );
}

/// The user's LLM case on every server, through the reqwest middleware, over the Lua library:
/// each request's estimate is taken, and the usage in its JSON body settles it through the
/// handle in the response's extensions, once.
fn a_multi_limiter_behind_the_middleware_settles_each_call_to_its_usage(flavor: Flavor) {
    use redis_throttle::http::{Pick, RequestHead, SettleHandle};

    llm_supplier::settles_each_call(
        flavor,
        redis_throttle::Backend::Library,
        "reqwest",
        |limiter, url, estimate, usage| async move {
            let client = ClientBuilder::new(reqwest::Client::new())
                .with(ThrottleMiddleware::per_request(
                    move |head: &RequestHead<'_>| {
                        let tokens = head.header("x-estimate").and_then(|v| v.parse().ok());
                        Pick::new(limiter.clone()).tokens(tokens.unwrap())
                    },
                ))
                .build();
            let response = client
                .post(url)
                .header("x-estimate", estimate)
                .header("x-usage", usage)
                .body("{}")
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let handle = response.extensions().get::<SettleHandle>().unwrap().clone();
            let body = response.text().await.unwrap();
            let (first, second) = llm_supplier::settle_twice(&handle, &body).await;
            (status, first, second)
        },
    );
}

throttle_testkit::per_server!(
    a_multi_limiter_behind_the_middleware_syncs_each_limit_in_its_own_unit,
    a_multi_limiter_behind_the_middleware_settles_each_call_to_its_usage,
);
