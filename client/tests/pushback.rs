//! The supplier's real capacity through the client, on every server and backend: a cut
//! (`Throttle::cut`), the supplier's count (`Throttle::sync`), a cost settled after the call
//! (`Throttle::settle`), and a pause that reaches a call already reserved, for the single and
//! the multi limiter.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test pushback
//! ```

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_throttle::{
    Backend, Cut, Limiter, MultiLimiter, Quota, Rate, Remaining, SupplierCount, SupplierUnit,
};
use throttle_e2e::{assert_granted_after_the_pause, multiplexed, runtime, serial, server_for};
use throttle_testkit::Flavor;

const MS: Duration = Duration::from_millis(1);

/// 10 tokens, 10 a minute: nothing refills within a test's milliseconds (one token per 6 s).
fn slow() -> Quota {
    Quota::new(10, Rate::per(10, Duration::from_secs(60))).unwrap()
}

/// A [`slow`] limiter on `key` over `conn`.
fn slow_limiter(
    key: &str,
    backend: Backend,
    conn: MultiplexedConnection,
) -> Limiter<MultiplexedConnection> {
    Limiter::builder(key, slow())
        .backend(backend)
        .build(conn)
        .unwrap()
}

fn requests(left: u64, reset: Duration) -> SupplierCount {
    SupplierCount {
        requests: Some(Remaining { left, reset }),
        ..SupplierCount::default()
    }
}

/// A cut cuts once per episode, the second replica's cut only pauses; the factor is the
/// default 0.7; the counters say so.
fn cut_once_per_episode(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        let conn = multiplexed(&server.url()).await;
        let one = slow_limiter("cut", backend, conn.clone());
        let two = slow_limiter("cut", backend, conn);
        // A recovery of an hour: the factor climbs 1 bp per 1.2 s, so it reads 0.7 exactly for
        // the few round trips below, however slow the machine.
        let hour = Duration::from_secs(3600);
        let sent = tokio::time::Instant::now();
        let first = one
            .cut(Cut::after(MS * 500).with_recovery(hour))
            .await
            .unwrap();
        assert!(first.cut, "{flavor} {backend:?}: {first:?}");
        assert_eq!(first.factor_bp, 7_000, "{flavor} {backend:?}");
        assert!(first.next >= MS * 500, "{flavor} {backend:?}: {first:?}");
        assert_eq!(first.recovers_in, hour, "{flavor} {backend:?}");
        let second = two
            .cut(Cut::after(MS * 200).with_recovery(hour))
            .await
            .unwrap();
        assert!(
            !second.cut,
            "{flavor} {backend:?}: the same episode: {second:?}"
        );
        assert_eq!(second.factor_bp, 7_000, "{flavor} {backend:?}");
        let state = one.peek().await.unwrap();
        assert_eq!(state.factor_bp, 7_000, "{flavor} {backend:?}");
        // The pause ends 500 ms after the server cut, no earlier than the cut was sent (PEEK
        // rounds to whole ms): what is left and what has passed make at least that.
        assert!(
            state.paused_for + sent.elapsed() >= MS * 499,
            "{flavor} {backend:?}: {state:?}"
        );
        let (m1, m2) = (one.metrics().pushback, two.metrics().pushback);
        assert_eq!(
            (m1.cuts, m1.cuts_same_episode),
            (1, 0),
            "{flavor} {backend:?}"
        );
        assert_eq!(
            (m2.cuts, m2.cuts_same_episode),
            (0, 1),
            "{flavor} {backend:?}"
        );
    });
}

/// The supplier's count lowers the bucket, never raises it, and pauses it with nothing left.
fn sync_lowers_never_raises(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        let conn = multiplexed(&server.url()).await;
        let limiter = slow_limiter("sync", backend, conn);
        assert!(
            limiter.sync(requests(3, Duration::ZERO)).await.unwrap(),
            "{flavor} {backend:?}"
        );
        assert_eq!(
            limiter.peek().await.unwrap().remaining,
            3,
            "{flavor} {backend:?}"
        );
        assert!(
            !limiter.sync(requests(5, Duration::ZERO)).await.unwrap(),
            "{flavor} {backend:?}"
        );
        assert_eq!(
            limiter.peek().await.unwrap().remaining,
            3,
            "{flavor} {backend:?}"
        );
        // A count of tokens says nothing to a bucket of calls: no round trip.
        let trips = limiter.metrics().round_trips;
        let tokens = SupplierCount {
            tokens: Some(Remaining {
                left: 0,
                reset: MS * 100,
            }),
            ..SupplierCount::default()
        };
        assert!(!limiter.sync(tokens).await.unwrap());
        assert_eq!(limiter.metrics().round_trips, trips, "{flavor} {backend:?}");
        let sent = tokio::time::Instant::now();
        assert!(
            limiter.sync(requests(0, MS * 700)).await.unwrap(),
            "{flavor} {backend:?}"
        );
        let state = limiter.peek().await.unwrap();
        assert_eq!(state.remaining, 0, "{flavor} {backend:?}");
        // Paused until the reset, 700 ms after the server synced, as the cut's above.
        assert!(
            state.paused_for + sent.elapsed() >= MS * 699,
            "{flavor} {backend:?}: {state:?}"
        );
        let m = limiter.metrics().pushback;
        assert_eq!((m.syncs, m.syncs_unchanged), (2, 1), "{flavor} {backend:?}");
        // A bucket of tokens takes the tokens count.
        let tpm = Limiter::builder("sync:tokens", slow())
            .supplier_unit(SupplierUnit::Tokens)
            .backend(backend)
            .build(limiter.connection().clone())
            .unwrap();
        let both = SupplierCount {
            tokens: Some(Remaining {
                left: 4,
                reset: Duration::ZERO,
            }),
            ..requests(1, Duration::ZERO)
        };
        assert!(tpm.sync(both).await.unwrap());
        assert_eq!(
            tpm.peek().await.unwrap().remaining,
            4,
            "{flavor} {backend:?}"
        );
    });
}

/// A grant settles to the actual cost: the extra is taken, into debt; what was not used is
/// given back when nothing was taken after it.
fn settle_debits_or_gives_back(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        let conn = multiplexed(&server.url()).await;
        let limiter = slow_limiter("settle", backend, conn);
        let grant = limiter.acquire_with(Demand::tokens(4)).await.unwrap();
        let settled = limiter.settle(grant, 13).await.unwrap();
        assert_eq!(
            (settled.debited, settled.given_back),
            (9, 0),
            "{flavor} {backend:?}"
        );
        let state = limiter.peek().await.unwrap();
        assert_eq!(state.remaining, 0, "{flavor} {backend:?}: 13 taken of 10");
        // 3 tokens of debt at 6 s each, and the 10 to refill: about 78 s until full.
        assert!(
            state.until_full > Duration::from_secs(77),
            "{flavor} {backend:?}: {state:?}"
        );
        assert_eq!(limiter.metrics().pushback.tokens_debited, 9);

        let fresh = slow_limiter("settle:less", backend, limiter.connection().clone());
        let grant = fresh.acquire_with(Demand::tokens(6)).await.unwrap();
        let settled = fresh.settle(grant, 2).await.unwrap();
        assert_eq!(
            (settled.debited, settled.given_back),
            (0, 4),
            "{flavor} {backend:?}"
        );
        assert_eq!(
            fresh.peek().await.unwrap().remaining,
            8,
            "{flavor} {backend:?}"
        );
        let grant = fresh.acquire_with(Demand::tokens(3)).await.unwrap();
        let _later = fresh.acquire_with(Demand::tokens(1)).await.unwrap();
        let settled = fresh.settle(grant, 1).await.unwrap();
        assert_eq!(
            settled.given_back, 0,
            "{flavor} {backend:?}: taken after it"
        );
    });
}

/// A call reserved before another replica's pause is held back by it: it looks before it is
/// sent, waits the pause out and takes again, so it is not granted before the pause ends.
/// With the check off, it goes at its reserved time, inside the pause.
fn a_pause_reaches_a_reserved_call(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        let conn = multiplexed(&server.url()).await;
        // One token, one every 300 ms.
        let quota = Quota::new(1, Rate::per(1, MS * 300)).unwrap();
        for check in [true, false] {
            let key = format!("reserved:{check}");
            let caller = Limiter::builder(&key, quota.clone())
                .pause_check(check)
                .backend(backend)
                .build(conn.clone())
                .unwrap();
            let other = Limiter::builder(&key, quota.clone())
                .backend(backend)
                .build(conn.clone())
                .unwrap();
            caller.acquire().await.unwrap();
            let start = tokio::time::Instant::now();
            let reserved = tokio::spawn({
                let caller = caller.clone();
                async move { caller.acquire().await.map(|grant| grant.waited) }
            });
            // The reservation is made at once (a round trip); the pause comes while it sleeps.
            tokio::time::sleep(MS * 50).await;
            // The server sets the pause between these two instants.
            let pause_sent = start.elapsed();
            other.pause(MS * 1_000).await.unwrap();
            let paused_at = start.elapsed();
            let waited = reserved.await.unwrap().unwrap();
            let held = caller.metrics().pushback.held_by_pause;
            if check {
                assert_eq!(held, 1, "{flavor} {backend:?}");
                // The pause ends 1 s after the server set it, which is no earlier than the
                // request was sent: the server decides that.
                let at = format!("{flavor} {backend:?}");
                assert_granted_after_the_pause(start, pause_sent, MS * 1_000, &at);
            } else {
                assert_eq!(held, 0, "{flavor} {backend:?}");
                // Sent at its reserved time (300 ms), inside the pause: the limit is the pause's
                // end, however slow the machine (the reservation's time is the server's).
                assert!(
                    waited < paused_at + MS * 1_000,
                    "{flavor} {backend:?}: {waited:?}"
                );
            }
        }
    });
}

/// The multi limiter: a cut on every bucket, each limit synced in its own unit, a settle on
/// its per-token limit, and a pause that reaches a reserved call.
fn multi_limiter_pushback(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        let conn = multiplexed(&server.url()).await;
        let limiter = MultiLimiter::builder()
            .limit("{m}:rpm", slow(), 1)
            .per_token(
                "{m}:tpm",
                Quota::new(1_000, Rate::per(1_000, Duration::from_secs(60))).unwrap(),
            )
            .cost(100)
            .backend(backend)
            .build(conn.clone())
            .unwrap();
        let grant = limiter.acquire().await.unwrap();
        let settled = limiter.settle(grant, 250).await.unwrap();
        assert_eq!(settled.debited, 150, "{flavor} {backend:?}");
        let tpm = Limiter::builder(
            "{m}:tpm",
            Quota::new(1_000, Rate::per(1_000, Duration::from_secs(60))).unwrap(),
        )
        .backend(backend)
        .build(conn.clone())
        .unwrap();
        let rpm = slow_limiter("{m}:rpm", backend, conn);
        assert_eq!(
            tpm.peek().await.unwrap().remaining,
            750,
            "{flavor} {backend:?}"
        );
        assert_eq!(
            rpm.peek().await.unwrap().remaining,
            9,
            "{flavor} {backend:?}"
        );
        let count = SupplierCount {
            requests: Some(Remaining {
                left: 2,
                reset: Duration::ZERO,
            }),
            tokens: Some(Remaining {
                left: 300,
                reset: Duration::ZERO,
            }),
            retry_after: None,
        };
        assert!(limiter.sync(count).await.unwrap(), "{flavor} {backend:?}");
        // One THROTTLE.SYNC per bucket, each counted as a single limiter's: both lowered.
        let m = limiter.metrics().pushback;
        assert_eq!((m.syncs, m.syncs_unchanged), (2, 0), "{flavor} {backend:?}");
        // The requests count again (one token in 6 s, none refilled): one THROTTLE.SYNC, on
        // the per-call bucket only, which already holds no more.
        assert!(
            !limiter.sync(requests(2, Duration::ZERO)).await.unwrap(),
            "{flavor} {backend:?}"
        );
        let m = limiter.metrics().pushback;
        assert_eq!((m.syncs, m.syncs_unchanged), (2, 1), "{flavor} {backend:?}");
        assert_eq!(
            rpm.peek().await.unwrap().remaining,
            2,
            "{flavor} {backend:?}"
        );
        assert_eq!(
            tpm.peek().await.unwrap().remaining,
            300,
            "{flavor} {backend:?}"
        );
        let report = limiter
            .cut(Cut::after(MS * 300).with_recovery(Duration::from_secs(3600)))
            .await
            .unwrap();
        assert!(report.cut, "{flavor} {backend:?}");
        assert_eq!(
            rpm.peek().await.unwrap().factor_bp,
            7_000,
            "{flavor} {backend:?}"
        );
        assert_eq!(
            tpm.peek().await.unwrap().factor_bp,
            7_000,
            "{flavor} {backend:?}"
        );
    });
}

mod per_backend;

per_backend::backends!(
    cut_once_per_episode => cut_module(Module),
    cut_once_per_episode => cut_library(Library),
    cut_once_per_episode => cut_script(Script),
    sync_lowers_never_raises => sync_module(Module),
    sync_lowers_never_raises => sync_library(Library),
    sync_lowers_never_raises => sync_script(Script),
    settle_debits_or_gives_back => settle_module(Module),
    settle_debits_or_gives_back => settle_library(Library),
    settle_debits_or_gives_back => settle_script(Script),
    a_pause_reaches_a_reserved_call => reserved_module(Module),
    a_pause_reaches_a_reserved_call => reserved_library(Library),
    a_pause_reaches_a_reserved_call => reserved_script(Script),
    multi_limiter_pushback => multi_module(Module),
    multi_limiter_pushback => multi_library(Library),
    multi_limiter_pushback => multi_script(Script),
);
