//! Deadlines against a real server: a wait beyond the deadline is refused at once and the
//! bucket is left exactly as it was; a wait within it is granted, never early.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis_throttle::{BucketState, Error, Limiter, Quota, Strategy};
use throttle_e2e::{calls, manager};
use throttle_testkit::{Flavor, Server};
use tokio::time::Instant;

const KEY: &str = "deadline:bucket";

/// Capacity 2, one token every 2 s: once drained, the next token needs about 2 s.
fn quota() -> Quota {
    Quota::new(2, "0.5").unwrap()
}

async fn peek<C>(limiter: &Limiter<C>) -> BucketState
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    limiter.peek().await.expect("peek")
}

/// A limiter on `key` with `strategy`, whose bucket it has just drained, and the instant just
/// before the drain.
async fn drained(
    server: &Server,
    key: &str,
    strategy: Strategy,
) -> (Limiter<ConnectionManager>, Instant) {
    let limiter = Limiter::builder(key, quota())
        .strategy(strategy)
        .build(manager(&server.url()).await)
        .unwrap();
    let drained = Instant::now();
    assert!(limiter
        .try_acquire_with(Demand::tokens(2))
        .await
        .unwrap()
        .is_granted());
    (limiter, drained)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_too_short_fails_at_once_and_takes_nothing() {
    let server = Server::start(Flavor::Redis82);
    let mut con = server.conn();
    for strategy in [Strategy::Reserve, Strategy::poll()] {
        let key = format!("{KEY}:{strategy:?}");
        let (limiter, _) = drained(&server, &key, strategy).await;

        let stored_before: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        let calls_before = calls(&mut con, "throttle.take");
        let peeked = Instant::now();
        let before = peek(&limiter).await;
        assert_eq!(before.remaining, 0);

        let called = Instant::now();
        let result = limiter
            .acquire_with(Demand::call().within(Duration::from_secs(1)))
            .await;
        let took = called.elapsed();
        match result {
            Err(Error::DeadlineExceeded {
                needed: Some(needed),
                deadline,
                paused: false,
            }) => {
                assert_eq!(deadline, Duration::from_secs(1));
                assert!(
                    needed > Duration::from_secs(1) && needed <= Duration::from_secs(2),
                    "{strategy:?}: needed {needed:?}"
                );
            }
            other => panic!("{strategy:?}: {other:?}"),
        }
        // At once: one round trip, no waiting for the deadline (a loose bound).
        assert!(took < Duration::from_secs(1), "{strategy:?}: took {took:?}");

        // Nothing taken, nothing written.
        let after = peek(&limiter).await;
        let between = peeked.elapsed();
        let stored_after: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        assert_eq!(
            stored_after, stored_before,
            "{strategy:?}: the stored state changed"
        );
        assert_eq!(after.remaining, 0);
        assert!(
            after.until_full <= before.until_full,
            "{strategy:?}: {before:?} -> {after:?}"
        );
        let tolerance = Duration::from_millis(2); // reset_ms is rounded up
        assert!(
            before.until_full - after.until_full <= between + tolerance,
            "{strategy:?}: {before:?} -> {after:?} in {between:?}"
        );
        // The refusal was one THROTTLE.TAKE (the peeks are THROTTLE.PEEK).
        assert_eq!(calls(&mut con, "throttle.take") - calls_before, 1);
        assert_eq!(limiter.metrics().gave_up, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_long_enough_is_granted_never_early() {
    let server = Server::start(Flavor::Redis82);
    for strategy in [Strategy::Reserve, Strategy::poll()] {
        let key = format!("{KEY}:{strategy:?}");
        let (limiter, drained) = self::drained(&server, &key, strategy).await;

        let grant = limiter
            .acquire_with(Demand::call().within(Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| panic!("{strategy:?}: {e}"));
        // The bucket was empty after the drain: the next token is 2 s later, not before.
        assert!(
            drained.elapsed() >= Duration::from_secs(2),
            "{strategy:?}: early"
        );
        assert!(
            grant.waited < Duration::from_secs(10),
            "{strategy:?}: {grant:?}"
        );
        if strategy == Strategy::Reserve {
            assert_eq!(grant.round_trips, 1 + u32::from(!grant.slept.is_zero()));
        }
    }
}
