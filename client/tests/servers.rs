//! The client on each of the four servers: the basic calls, a missing module, and keys
//! that are not buckets.

use redis_throttle::prelude::*;
use std::time::{Duration, Instant};

use redis_throttle::{Backend, Error, Limiter, Quota, Strategy, TryAcquire};
use throttle_e2e::multiplexed;
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
        // The server decides what each call gets; the machine decides when the calls reach
        // it. So each outcome is checked exactly, and only the calls that the clock says
        // came before the next token must have been refused.
        let drained = Instant::now();
        let grant = limiter.acquire_with(Demand::tokens(3)).await.unwrap();
        assert_eq!((grant.round_trips, grant.remaining), (1, 0), "{flavor}");
        let mut expected = Metrics {
            granted: 1,
            ..Metrics::default()
        };

        // The next token is 100 ms after the drain: a try before then is refused.
        let tried = limiter.try_acquire().await.unwrap();
        let before_the_token = drained.elapsed() < TOKEN;
        match tried {
            TryAcquire::Denied { retry_after } => {
                assert!(
                    retry_after > Duration::ZERO && retry_after <= TOKEN,
                    "{flavor}: {retry_after:?}"
                );
                expected.denied += 1;
            }
            TryAcquire::Granted(_) if !before_the_token => expected.granted += 1,
            granted => panic!("{flavor}: before the next token: {granted:?}"),
        }

        // A reservation sleeps until its token, which is never before `TOKEN` after the
        // drain; it did not sleep only if it reached the server after that.
        let start = Instant::now();
        let grant = limiter.acquire().await.unwrap();
        assert_eq!(
            grant.round_trips,
            1 + u32::from(!grant.slept.is_zero()),
            "{flavor}"
        );
        assert!(
            drained.elapsed() >= TOKEN,
            "{flavor}: granted early: {grant:?}"
        );
        assert!(start.elapsed() >= grant.slept, "{flavor}");
        assert!(
            grant.slept > Duration::ZERO || start + grant.waited >= drained + TOKEN,
            "{flavor}: no sleep, yet the call was back before its token was due: {grant:?}"
        );
        expected.granted += 1;

        // The bucket is empty again: one token per grant since the drain has been taken, so
        // the next is `TOKEN` times the grants after it, more than the deadline away unless
        // the machine held this call back until nearly then.
        let deadline = Duration::from_millis(10);
        let next_token = TOKEN * u32::try_from(expected.granted).unwrap();
        match limiter.acquire_with(Demand::call().within(deadline)).await {
            Err(Error::DeadlineExceeded { .. }) => expected.gave_up += 1,
            Ok(_) if drained.elapsed() + deadline >= next_token => expected.granted += 1,
            other => panic!("{flavor}: {other:?}"),
        }
        let metrics = limiter.metrics();
        assert_eq!(
            Metrics {
                granted: metrics.granted,
                denied: metrics.denied,
                gave_up: metrics.gave_up,
                errors: metrics.errors
            },
            expected,
            "{flavor}"
        );
    }
}

/// The bucket's refill time per token in [`every_server_grants_reserves_and_refuses`].
const TOKEN: Duration = Duration::from_millis(100);

/// The limiter's counters that test checks.
#[derive(Debug, Default, PartialEq, Eq)]
struct Metrics {
    granted: u64,
    denied: u64,
    gave_up: u64,
    errors: u64,
}

#[tokio::test]
async fn a_missing_module_says_how_to_load_it() {
    for flavor in Flavor::ALL {
        let server = Server::builder(flavor).module(false).start();
        let conn = multiplexed(&server.url()).await;
        // Told to use the module (the default, Auto, would fall back to the script).
        let limiter = Limiter::builder("k", Quota::new(5, 1u64).unwrap())
            .strategy(Strategy::poll())
            .backend(Backend::Module)
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
                "--loadmodule /path/to/libredis_throttle_module.so",
                "`loadmodule /path/to/libredis_throttle_module.so` to redis.conf",
                "MODULE LOAD /path/to/libredis_throttle_module.so",
                "Backend::Script",
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
