//! The client on each of the four servers: the basic calls, a missing module, and keys
//! that are not buckets.

mod common;

use std::time::Duration;

use common::multiplexed;
use redis_throttle::{Error, Limiter, Quota, Strategy, TryAcquire};
use throttle_testkit::{Flavor, Server};

#[tokio::test]
async fn every_server_grants_reserves_and_refuses() {
    for flavor in Flavor::ALL {
        let server = Server::start(flavor);
        let conn = multiplexed(&server.url()).await;
        // 3 at once, then one every 100 ms.
        let limiter = Limiter::new(conn, "servers:bucket", Quota::new(3, 10u64).unwrap());

        let state = limiter.peek().await.unwrap();
        assert_eq!(
            (state.remaining, state.until_full),
            (3, Duration::ZERO),
            "{flavor}"
        );
        let grant = limiter.acquire_n(3).await.unwrap();
        assert_eq!((grant.round_trips, grant.remaining), (1, 0), "{flavor}");
        match limiter.try_acquire().await.unwrap() {
            TryAcquire::Denied { retry_after } => {
                assert!(
                    retry_after > Duration::ZERO && retry_after <= Duration::from_millis(100),
                    "{flavor}: {retry_after:?}"
                );
            }
            granted => panic!("{flavor}: {granted:?}"),
        }
        let start = std::time::Instant::now();
        let grant = limiter.acquire().await.unwrap();
        assert_eq!(grant.round_trips, 1, "{flavor}");
        assert!(grant.slept > Duration::ZERO, "{flavor}: {grant:?}");
        assert!(start.elapsed() >= grant.slept, "{flavor}");
        match limiter.acquire_within(Duration::from_millis(10)).await {
            Err(Error::DeadlineExceeded { .. }) => {}
            other => panic!("{flavor}: {other:?}"),
        }
        let metrics = limiter.metrics();
        assert_eq!(
            (
                metrics.granted,
                metrics.denied,
                metrics.gave_up,
                metrics.errors
            ),
            (2, 1, 1, 0),
            "{flavor}"
        );
    }
}

#[tokio::test]
async fn a_missing_module_says_how_to_load_it() {
    for flavor in Flavor::ALL {
        let server = Server::builder(flavor).module(false).start();
        let conn = multiplexed(&server.url()).await;
        let limiter = Limiter::builder("k", Quota::new(5, 1u64).unwrap())
            .strategy(Strategy::poll())
            .build(conn)
            .unwrap();
        for result in [
            limiter.acquire().await.map(|_| ()),
            limiter.try_acquire().await.map(|_| ()),
            limiter.peek().await.map(|_| ()),
        ] {
            let err = result.expect_err("no module, no THROTTLE.TAKE");
            assert!(
                matches!(err, Error::ModuleNotLoaded { .. }),
                "{flavor}: {err:?}"
            );
            let message = err.to_string();
            for needle in [
                "--loadmodule /path/to/libredis_throttle.so",
                "`loadmodule /path/to/libredis_throttle.so` to redis.conf",
                "MODULE LOAD /path/to/libredis_throttle.so",
            ] {
                assert!(
                    message.contains(needle),
                    "{flavor}: {needle:?} not in {message}"
                );
            }
            assert!(message.contains("unknown command"), "{flavor}: {message}");
        }
        if flavor == Flavor::Redis82 {
            println!("{}", limiter.acquire().await.unwrap_err());
        }
    }
}

#[tokio::test]
async fn keys_that_are_not_buckets_are_rejected_with_the_servers_message() {
    let server = Server::start(Flavor::Redis82);
    let mut con = server.conn();
    let _: () = redis::cmd("HSET")
        .arg("a-hash")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("a-string")
        .arg("hello")
        .query(&mut con)
        .unwrap();
    let conn = multiplexed(&server.url()).await;
    let quota = Quota::new(5, 1u64).unwrap();

    let hash = Limiter::new(conn.clone(), "a-hash", quota.clone());
    match hash.acquire().await {
        Err(Error::Rejected { message }) => assert!(message.starts_with("WRONGTYPE"), "{message}"),
        other => panic!("{other:?}"),
    }
    let string = Limiter::new(conn, "a-string", quota);
    match string.acquire().await {
        Err(Error::Rejected { message }) => {
            assert!(
                message.starts_with("ERR ") && message.contains("bucket"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Nothing was overwritten.
    let value: String = redis::cmd("GET").arg("a-string").query(&mut con).unwrap();
    assert_eq!(value, "hello");
    assert_eq!(string.metrics().errors, 1);
}
