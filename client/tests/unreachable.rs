//! Failure that is fast and chosen: a limiter over [`redis_throttle::connect`] fails in a
//! fraction of a second when nothing answers (redis-rs's defaults take about 9 s a call), and
//! a server stopped mid-run fails every call at once (`Unreachable::FailClosed`, the default)
//! or lets it through, counted (`Unreachable::FailOpen`), until it is back. Also the default
//! longest wait, on paused time.
//!
//! Times are bounded loosely (a loaded machine decides them); what is exact is what the
//! limiter answered and counted. `-- --nocapture` prints the times measured.

use redis_throttle::prelude::*;
use std::time::{Duration, Instant};

use redis_throttle::{
    Backend, Error, Limiter, MultiLimiter, Quota, TryAcquire, Unreachable, DEFAULT_MAX_WAIT,
};
use throttle_e2e::fake::FakeServer;
use throttle_testkit::{Flavor, Server};

/// What "fails fast" allows on a loaded machine: several times the 200 ms timeouts, far below
/// the default's 9 s.
const FAST: Duration = Duration::from_secs(3);

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

#[tokio::test]
async fn connect_fails_fast_where_nothing_listens() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let err = redis_throttle::connect(&url)
        .await
        .expect_err("nothing listens there");
    let took = started.elapsed();
    println!("connect to a closed port failed in {took:?}: {err}");
    assert!(err.is_unreachable(), "{err}");
    assert!(took < FAST, "connect took {took:?}");
}

/// `test` on every server, each in a runtime of its own.
fn per_server<F: std::future::Future<Output = ()>>(test: impl Fn(Flavor) -> F) {
    for flavor in Flavor::ALL {
        tokio::runtime::Runtime::new()
            .expect("a runtime")
            .block_on(test(flavor));
    }
}

#[test]
fn a_stopped_server_fails_each_call_at_once_or_lets_it_through() {
    per_server(stopped_mid_run);
}

async fn stopped_mid_run(flavor: Flavor) {
    let mut server = Server::start(flavor);
    let conn = redis_throttle::connect(&server.url())
        .await
        .expect("connect");
    let quota = Quota::new(100, 100).unwrap();
    let closed = Limiter::builder("down:closed", quota.clone())
        .backend(Backend::Module)
        .build(conn.clone())
        .unwrap();
    let open = Limiter::builder("down:open", quota.clone())
        .backend(Backend::Module)
        .on_unreachable(Unreachable::FailOpen)
        .build(conn.clone())
        .unwrap();
    let multi = MultiLimiter::builder()
        .limit("{down}:a", quota.clone(), 1)
        .limit("{down}:b", quota, 1)
        .backend(Backend::Module)
        .on_unreachable(Unreachable::FailOpen)
        .build(conn)
        .unwrap();
    for limiter in [&closed, &open] {
        assert!(!limiter.acquire().await.expect("up").unchecked);
    }
    assert!(!multi.acquire().await.expect("up").unchecked);

    server.stop();
    let started = Instant::now();
    let err = closed.acquire().await.expect_err("fails closed");
    let took = started.elapsed();
    println!("{flavor}: an acquire with the server stopped failed in {took:?}: {err}");
    assert!(err.is_unreachable(), "{flavor}: {err}");
    assert!(took < FAST, "{flavor}: took {took:?}");

    for _ in 0..3 {
        let grant = open.acquire().await.expect("fails open");
        assert!(grant.unchecked, "{flavor}");
        assert_eq!(grant.remaining, 0);
    }
    let tried = open.try_acquire().await.expect("fails open");
    assert!(
        matches!(tried, TryAcquire::Granted(ref g) if g.unchecked),
        "{flavor}: {tried:?}"
    );
    assert!(multi.acquire().await.expect("fails open").unchecked);
    let counted = open.metrics();
    assert_eq!((counted.failed_open, counted.granted), (4, 1), "{flavor}");
    assert_eq!(multi.metrics().failed_open, 1, "{flavor}");
    assert_eq!(closed.metrics().failed_open, 0, "{flavor}");

    // Back: the connection comes back by itself, and calls are checked again.
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match open.acquire().await {
            Ok(grant) if !grant.unchecked => break,
            Ok(_) => assert!(Instant::now() < deadline, "{flavor}: never reconnected"),
            Err(err) => panic!("{flavor}: {err}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!closed.acquire().await.expect("up again").unchecked);
}

/// A server that answers slowly is not an unreachable one: with every client paused for longer
/// than the response timeout (as another user's long script would hold the server), a
/// fail-open limiter's call fails with a timeout, and lets nothing through unchecked.
#[test]
fn a_slow_server_does_not_open_a_fail_open_limiter() {
    per_server(slow_server);
}

async fn slow_server(flavor: Flavor) {
    let server = Server::start(flavor);
    let conn = redis_throttle::connect(&server.url())
        .await
        .expect("connect");
    let open = Limiter::builder("slow:open", Quota::new(1, 1).unwrap())
        .backend(Backend::Module)
        .on_unreachable(Unreachable::FailOpen)
        .build(conn)
        .unwrap();
    assert!(!open.acquire().await.expect("up").unchecked);
    let mut admin = server.conn();
    // Longer than `connect`'s response timeout, shorter than the test's patience.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("ALL")
        .query(&mut admin)
        .expect("CLIENT PAUSE");
    let err = open
        .acquire()
        .await
        .expect_err("a timeout fails the call, fail-open or not");
    assert!(
        matches!(err, Error::Connection(ref e) if e.is_timeout()),
        "{flavor}: {err}"
    );
    assert!(!err.is_unreachable(), "{flavor}: {err}");
    assert_eq!(
        open.metrics().failed_open,
        0,
        "{flavor}: nothing let through"
    );
}

/// An empty bucket whose next token is 100 s away: `acquire()` refuses at once under the
/// default longest wait (a minute), taking nothing, and waits it out where the builder allows
/// longer. Paused time, the fake server: exact.
#[tokio::test(start_paused = true)]
async fn a_wait_past_the_default_max_wait_fails_at_once() {
    let fake = FakeServer::new();
    let quota = Quota::new(1, "0.01").unwrap();
    let build = |max_wait: Option<Duration>| {
        let builder = Limiter::builder("slow", quota.clone()).backend(Backend::Module);
        let builder = match max_wait {
            Some(max_wait) => builder.max_wait(max_wait),
            None => builder,
        };
        builder.pause_check(false).build(fake.clone()).unwrap()
    };
    let limiter = build(None);
    assert!(limiter.try_acquire().await.unwrap().is_granted());
    let start = tokio::time::Instant::now();
    match limiter.acquire().await {
        Err(Error::DeadlineExceeded {
            needed: Some(needed),
            deadline,
            paused: false,
        }) => {
            assert_eq!(deadline, DEFAULT_MAX_WAIT);
            assert_eq!(needed, Duration::from_secs(100));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "at once");
    let patient = build(Some(Duration::MAX));
    let grant = patient.acquire().await.expect("waits as long as it takes");
    assert_eq!(grant.waited, Duration::from_secs(100));
    assert_eq!(limiter.metrics().gave_up, 1);
}
