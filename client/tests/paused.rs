//! The waiting policy on paused tokio time: the limiter runs against an in-memory
//! THROTTLE.TAKE (the module's own arithmetic), and tokio's clock jumps from one timer to
//! the next, so every instant below is exact and nothing really sleeps.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Backend, Error, Grant, Limiter, Quota, QuotaError, Strategy, TryAcquire};
use throttle_e2e::fake::FakeServer;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);
/// The reservation sent when the call gives no deadline: the limiter's longest wait, a
/// minute by default.
const MAX_WAIT_MS: u64 = 60_000;

fn limiter(
    fake: &FakeServer,
    capacity: u64,
    rate: &str,
    strategy: Strategy,
) -> Limiter<FakeServer> {
    // The fake speaks the module's commands; Auto would hold concurrent first calls for
    // its probe, one round trip, which the timing tables here do not count. The tables time
    // the reservations alone: the look before sending has a test of its own.
    Limiter::builder("bucket", Quota::new(capacity, rate).unwrap())
        .strategy(strategy)
        .backend(Backend::Module)
        .pause_check(false)
        .build(fake.clone())
        .unwrap()
}

/// Two replicas on one bucket of the fake, as a caller builds them: unlike [`limiter`]'s, they
/// look at the bucket before sending a reserved call.
fn two_replicas(
    fake: &FakeServer,
    capacity: u64,
    rate: &str,
    max_wait: Option<Duration>,
) -> (Limiter<FakeServer>, Limiter<FakeServer>) {
    let build = || {
        let builder = Limiter::builder("bucket", Quota::new(capacity, rate).unwrap())
            .backend(Backend::Module);
        match max_wait {
            Some(max_wait) => builder.max_wait(max_wait),
            None => builder,
        }
        .build(fake.clone())
        .unwrap()
    };
    (build(), build())
}

/// `n` calls of `limiter`'s at once, each on a task of its own that returns when it was
/// granted (since `start`) and the grant.
fn spawn_acquires(
    limiter: &Limiter<FakeServer>,
    n: usize,
    start: Instant,
) -> Vec<JoinHandle<(Duration, Grant)>> {
    (0..n)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let grant = limiter.acquire().await.unwrap();
                (start.elapsed(), grant)
            })
        })
        .collect()
}

/// A call of `caller`'s on a task of its own.
fn spawn_acquire(caller: &Limiter<FakeServer>) -> JoinHandle<Result<Grant, Error>> {
    let caller = caller.clone();
    tokio::spawn(async move { caller.acquire().await })
}

/// Real (wall-clock) time must stay small although the virtual time spans seconds.
struct RealTime(std::time::Instant);

impl RealTime {
    fn start() -> RealTime {
        RealTime(std::time::Instant::now())
    }
}

impl Drop for RealTime {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let real = self.0.elapsed();
            assert!(
                real < Duration::from_secs(5),
                "the test really slept: {real:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn reserve_sleeps_exactly_the_wait_after_one_round_trip() {
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let limiter = limiter(&fake, 2, "1", Strategy::Reserve);
    let start = Instant::now();

    let mut offsets = Vec::new();
    for _ in 0..5 {
        let grant = limiter.acquire().await.unwrap();
        assert_eq!(grant.round_trips, 1);
        assert_eq!(grant.tokens, 1);
        assert_eq!(
            grant.waited, grant.slept,
            "no latency: all of the wait is the sleep"
        );
        offsets.push(start.elapsed());
    }
    // Two at once (the burst), then one per second, each exactly on time.
    assert_eq!(offsets, [0, 0, 1, 2, 3].map(|s| SECOND * s));

    let calls = fake.calls();
    assert_eq!(calls.len(), 5, "one THROTTLE.TAKE per grant");
    assert!(calls
        .iter()
        .all(|c| c.max_wait_ms == MAX_WAIT_MS && c.tokens == 1));

    let metrics = limiter.metrics();
    assert_eq!(
        (metrics.granted, metrics.round_trips, metrics.gave_up),
        (5, 5, 0)
    );
    assert_eq!(metrics.total_wait, SECOND * 3);
    assert_eq!(metrics.mean_wait(), Some(SECOND * 3 / 5));
    assert_eq!(metrics.wait_histogram.quantile(0.4), Some(MS));
    assert_eq!(metrics.wait_histogram.quantile(1.0), Some(SECOND));
}

#[tokio::test(start_paused = true)]
async fn concurrent_reservations_are_served_in_bucket_order() {
    let _real = RealTime::start();
    let latency = MS * 3;
    let fake = FakeServer::with_latency(latency);
    // 3 at once, then one every 500 ms.
    let limiter = limiter(&fake, 3, "2", Strategy::Reserve);
    let start = Instant::now();

    let tasks = spawn_acquires(&limiter, 10, start);
    let mut offsets = Vec::new();
    for task in tasks {
        let (offset, grant) = task.await.unwrap();
        assert_eq!(grant.round_trips, 1);
        offsets.push(offset);
    }
    offsets.sort();
    // The server runs each command `latency` after it is sent and computes the wait from
    // then; the reply takes `latency` more, and the sleep starts when it arrives. So each
    // grant is exactly one round trip after its slot: late by the latency, never early.
    let expected: Vec<Duration> = [0, 0, 0, 1, 2, 3, 4, 5, 6, 7]
        .iter()
        .map(|slot| MS * 500 * *slot + latency * 2)
        .collect();
    assert_eq!(offsets, expected);
    assert_eq!(fake.calls().len(), 10);
    assert_eq!(limiter.metrics().round_trips, 10);
}

#[tokio::test(start_paused = true)]
async fn poll_retries_after_the_wait_plus_jitter_and_is_never_early() {
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let strategy = Strategy::Poll {
        max_jitter: MS * 20,
        max_attempts: 100,
    };
    let limiter = limiter(&fake, 1, "1", strategy);
    let start = Instant::now();

    let tasks = spawn_acquires(&limiter, 4, start);
    let mut offsets = Vec::new();
    let mut round_trips = 0;
    for task in tasks {
        let (offset, grant) = task.await.unwrap();
        round_trips += grant.round_trips;
        offsets.push(offset);
    }
    offsets.sort();
    for (k, offset) in offsets.iter().enumerate() {
        // Never early: the k-th token (from 0) is there at k seconds.
        assert!(*offset >= SECOND * k as u32, "grant {k} at {offset:?}");
        // Late only by jitter, here at most a few polls' worth.
        assert!(
            *offset <= SECOND * k as u32 + MS * 200,
            "grant {k} at {offset:?}"
        );
    }
    let calls = fake.calls();
    assert!(
        calls.iter().all(|c| c.max_wait_ms == 0),
        "poll never reserves"
    );
    assert_eq!(calls.len(), round_trips as usize);
    assert!(
        round_trips > 4,
        "refused polls cost round trips: {round_trips}"
    );
    println!("poll: 4 grants in {round_trips} round trips");
}

#[tokio::test(start_paused = true)]
async fn poll_gives_up_after_its_attempts() {
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let poll = |max_attempts| Strategy::Poll {
        max_jitter: Duration::ZERO,
        max_attempts,
    };
    let once = limiter(&fake, 1, "1", poll(1));
    assert!(once.try_acquire().await.unwrap().is_granted());
    let start = Instant::now();
    match once.acquire().await {
        Err(Error::GaveUp {
            attempts: 1,
            waited,
        }) => assert_eq!(waited, Duration::ZERO),
        other => panic!("{other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::ZERO);

    // A poller competing with a client that keeps reserving is refused every time: the
    // reservation is made before the token is there, the poll only when it is (and gone).
    let reserver = limiter(&fake, 1, "1", Strategy::Reserve);
    let competitor = tokio::spawn(async move {
        for _ in 0..10 {
            reserver.acquire().await.unwrap();
        }
    });
    tokio::task::yield_now().await;
    let poller = limiter(&fake, 1, "1", poll(3));
    let start = Instant::now();
    match poller.acquire().await {
        Err(Error::GaveUp {
            attempts: 3,
            waited,
        }) => {
            assert_eq!(waited, start.elapsed());
            assert!(waited >= SECOND * 2, "{waited:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(poller.metrics().gave_up, 1);
    assert_eq!(poller.metrics().round_trips, 3);
    competitor.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn deadline_fails_at_once_and_takes_nothing() {
    let _real = RealTime::start();
    for strategy in [Strategy::Reserve, Strategy::poll()] {
        let fake = FakeServer::new();
        let limiter = limiter(&fake, 2, "1", strategy);
        assert!(limiter
            .try_acquire_with(Demand::tokens(2))
            .await
            .unwrap()
            .is_granted());
        let stored = fake.stored("bucket");
        let calls = fake.calls().len();

        let start = Instant::now();
        match limiter.acquire_with(Demand::call().within(MS * 500)).await {
            Err(Error::DeadlineExceeded {
                needed,
                deadline,
                paused: false,
            }) => {
                assert_eq!((needed, deadline), (Some(SECOND), MS * 500), "{strategy:?}");
            }
            other => panic!("{strategy:?}: {other:?}"),
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "{strategy:?}: at once");
        assert_eq!(
            fake.stored("bucket"),
            stored,
            "{strategy:?}: bucket unchanged"
        );
        assert_eq!(
            fake.calls().len(),
            calls + 1,
            "{strategy:?}: one round trip"
        );
        let expected_max_wait = if strategy == Strategy::Reserve {
            500
        } else {
            0
        };
        assert_eq!(fake.calls().last().unwrap().max_wait_ms, expected_max_wait);
        assert_eq!(limiter.metrics().gave_up, 1);

        // A deadline that is long enough: granted after the wait.
        let start = Instant::now();
        let grant = limiter
            .acquire_with(Demand::call().within(MS * 1500))
            .await
            .unwrap();
        assert!(grant.waited >= SECOND, "{strategy:?}: {grant:?}");
        assert!(start.elapsed() <= MS * 1500, "{strategy:?}: {grant:?}");
        if strategy == Strategy::Reserve {
            assert_eq!((grant.round_trips, grant.waited), (1, SECOND));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_a_waiting_call_is_safe_and_gives_back_its_reservation() {
    let _real = RealTime::start();
    for strategy in [Strategy::Reserve, Strategy::poll()] {
        let fake = FakeServer::new();
        let limiter = limiter(&fake, 1, "1", strategy);
        assert!(limiter.try_acquire().await.unwrap().is_granted());
        let stored = fake.stored("bucket").unwrap();

        let waiting = tokio::time::timeout(MS * 300, limiter.acquire()).await;
        assert!(waiting.is_err(), "{strategy:?}: still waiting at 300 ms");
        let calls = fake.calls().len();
        tokio::time::sleep(SECOND * 10).await;
        assert_eq!(
            fake.calls().len(),
            calls,
            "{strategy:?}: no take runs on after the drop"
        );

        // The reservation (one interval past the state) was given back by a task the drop
        // spawned; a poller held nothing while it slept. Either way the state is as before.
        assert_eq!(fake.stored("bucket").unwrap(), stored, "{strategy:?}");
        let metrics = limiter.metrics();
        assert_eq!(metrics.granted, 1, "{strategy:?}");
        let given = u64::from(matches!(strategy, Strategy::Reserve));
        assert_eq!(metrics.tokens_given_back, given, "{strategy:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn try_acquire_never_waits() {
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let limiter = limiter(&fake, 2, "4", Strategy::Reserve);
    let start = Instant::now();
    assert!(limiter.try_acquire().await.unwrap().is_granted());
    assert!(limiter.try_acquire().await.unwrap().is_granted());
    assert_eq!(
        limiter.try_acquire().await.unwrap(),
        TryAcquire::Denied {
            retry_after: MS * 250
        }
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(fake.calls().iter().all(|c| c.max_wait_ms == 0));
    let metrics = limiter.metrics();
    assert_eq!((metrics.granted, metrics.denied), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn token_counts_are_checked_before_any_round_trip() {
    let fake = FakeServer::new();
    let limiter = Limiter::builder("bucket", Quota::new(5, "1").unwrap())
        .cost(2)
        .build(fake.clone())
        .unwrap();
    assert_eq!(limiter.cost(), 2);
    match limiter.acquire_with(Demand::tokens(6)).await {
        Err(Error::InvalidQuota(QuotaError::Tokens {
            tokens: 6,
            capacity: 5,
        })) => {}
        other => panic!("{other:?}"),
    }
    assert!(fake.calls().is_empty());
    assert_eq!(limiter.metrics().errors, 1);

    // The cost per call is what acquire takes; 0 only looks.
    assert_eq!(limiter.acquire().await.unwrap().tokens, 2);
    let peek = limiter.acquire_with(Demand::tokens(0)).await.unwrap();
    assert_eq!((peek.tokens, peek.remaining), (0, 3));
    let state = limiter.peek().await.unwrap();
    assert_eq!(state.remaining, 3);
    assert_eq!(state.until_full, SECOND * 2);
}

/// A reserved call looks at the bucket after its sleep: unpaused, it goes (two round trips);
/// paused by another replica while it slept, it waits the pause out, takes again and goes
/// when the pause ends, not at its reserved time.
#[tokio::test(start_paused = true)]
async fn a_reserved_call_looks_before_it_is_sent_and_waits_out_a_pause() {
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let (caller, other) = two_replicas(&fake, 1, "1", None);
    let start = Instant::now();
    caller.acquire().await.unwrap();
    // Unpaused: the token at 1 s, one TAKE and one PEEK.
    let grant = caller.acquire().await.unwrap();
    assert_eq!((grant.round_trips, start.elapsed()), (2, SECOND));
    // Reserved for 2 s; at 1.5 s another replica pauses the bucket for 3 s (until 4.5 s).
    let reserved = spawn_acquire(&caller);
    tokio::time::sleep(MS * 500).await;
    other.pause(SECOND * 3).await.unwrap();
    let grant = reserved.await.unwrap().unwrap();
    // At 2 s it looks (paused for 2.5 s more), sleeps to 4.5 s and takes the pause's one
    // token there, at once: TAKE, PEEK, TAKE (nothing slept after it, so no look).
    assert_eq!(start.elapsed(), SECOND * 4 + MS * 500);
    assert_eq!(grant.round_trips, 3);
    assert_eq!(caller.metrics().pushback.held_by_pause, 1);
}

/// A pause never holds a call past its deadline: reserved for 2 s with a deadline of 3 s, the
/// call finds at its look (2 s) a pause that runs 6.5 s more, and fails there at once, naming
/// the pause (its tokens go back), instead of sleeping to 8.5 s. A pause that ends within the
/// deadline is slept out as before.
#[tokio::test(start_paused = true)]
async fn a_pause_past_the_deadline_fails_the_call_at_once() {
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let (caller, other) = two_replicas(&fake, 1, "1", Some(SECOND * 3));
    let start = Instant::now();
    caller.acquire().await.unwrap();
    caller.acquire().await.unwrap();
    // Reserved at 1 s for 2 s; at 1.5 s a pause of 7 s (to 8.5 s).
    let reserved = spawn_acquire(&caller);
    tokio::time::sleep(MS * 500).await;
    other.pause(SECOND * 7).await.unwrap();
    let err = reserved
        .await
        .unwrap()
        .expect_err("the pause outlasts the deadline");
    assert_eq!(
        start.elapsed(),
        SECOND * 2,
        "at its look, not at the pause's end"
    );
    match err {
        Error::DeadlineExceeded {
            needed,
            deadline,
            paused,
        } => assert_eq!(
            (needed, deadline, paused),
            (Some(MS * 6500), SECOND * 3, true)
        ),
        ref other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("the supplier's pause runs 6.5s more, past this call's deadline of 3s"),
        "{err}"
    );
    let metrics = caller.metrics();
    assert_eq!((metrics.gave_up, metrics.pushback.held_by_pause), (1, 1));
}

/// The reserved calls a pause holds back take again together: one THROTTLE.TAKE for all of
/// them when the pause ends, and each goes at the slot it would have had alone.
#[tokio::test(start_paused = true)]
async fn calls_a_pause_held_back_take_again_in_one_round_trip() {
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let (caller, other) = two_replicas(&fake, 4, "2", None);
    let start = Instant::now();
    caller.acquire_with(Demand::tokens(4)).await.unwrap();
    // Three calls reserve the next tokens, at 0.5, 1 and 1.5 s.
    let reserved = spawn_acquires(&caller, 3, start);
    // At 0.2 s another replica pauses the bucket until 2.2 s: its first token then, the next
    // ones every 0.5 s after it.
    tokio::time::sleep(MS * 200).await;
    other.pause(SECOND * 2).await.unwrap();
    let mut done = Vec::new();
    for call in reserved {
        let (at, grant) = call.await.unwrap();
        done.push((at, grant.round_trips));
    }
    done.sort();
    // Each looked after its sleep (a PEEK), found the pause and joined the others; at 2.2 s one
    // take of 3 tokens, usable at 3.2 s, sends them at 2.2, 2.7 and 3.2 s: when each would
    // have gone alone. The two that slept after it looked once more before going.
    let at: Vec<Duration> = done.iter().map(|(at, _)| *at).collect();
    assert_eq!(at, [MS * 2200, MS * 2700, MS * 3200]);
    let takes: Vec<(Duration, u64)> = fake.calls().iter().map(|c| (c.at, c.tokens)).collect();
    assert_eq!(
        takes,
        [
            (Duration::ZERO, 4),
            (Duration::ZERO, 1),
            (Duration::ZERO, 1),
            (Duration::ZERO, 1),
            (MS * 2200, 3)
        ],
        "one take for the three held calls"
    );
    let trips: u32 = done.iter().map(|(_, trips)| trips).sum();
    let metrics = caller.metrics();
    assert_eq!(metrics.pushback.held_by_pause, 3);
    assert_eq!(
        (trips, metrics.round_trips),
        (3 + 3 + 1 + 2, 1 + 3 + 3 + 3 + 1 + 2),
        "the held calls' takes, looks, give-backs (asked: a look does not say whether the pause \
         moved past a take) and, after the pause, one take between them and two looks"
    );
}

/// A bulk call reserves the tokens that are in the bucket now, to be used once its floor is
/// there again behind them (one round trip, one sleep); where they are not there now it is
/// refused, sleeps the time the server names and takes then.
#[tokio::test(start_paused = true)]
async fn a_bulk_call_reserves_the_tokens_there_now_and_else_asks_again() {
    use redis_throttle::Priority;
    let _real = RealTime::start();
    let fake = FakeServer::new();
    let limiter = limiter(&fake, 10, "10", Strategy::Reserve);
    let bulk = || Demand::tokens(2).priority(Priority::Bulk { floor: 5 });
    let start = Instant::now();
    limiter.acquire_with(Demand::tokens(10)).await.unwrap();

    // None there now: refused, told 700 ms (2 tokens and the floor of 5), taken then at once.
    let grant = limiter.acquire_with(bulk()).await.unwrap();
    assert_eq!(
        (start.elapsed(), grant.round_trips, grant.slept),
        (MS * 700, 2, MS * 700)
    );
    assert_eq!(limiter.metrics().held_by_floor, 1);
    // 5 there now: the 2 are reserved for when 7 are, 200 ms on; one round trip.
    let grant = limiter.acquire_with(bulk()).await.unwrap();
    assert_eq!(
        (start.elapsed(), grant.round_trips, grant.slept),
        (MS * 900, 1, MS * 200)
    );
    assert_eq!(limiter.metrics().held_by_floor, 1, "not refused");
    // The floor is there for an interactive call, at once.
    let grant = limiter.acquire_with(Demand::tokens(5)).await.unwrap();
    assert_eq!((start.elapsed(), grant.round_trips), (MS * 900, 1));
    let asked: Vec<(Duration, u64, u64)> = fake
        .calls()
        .iter()
        .map(|c| (c.at, c.tokens, c.max_wait_ms))
        .collect();
    assert_eq!(
        asked,
        [
            (Duration::ZERO, 10, MAX_WAIT_MS),
            (Duration::ZERO, 2, MAX_WAIT_MS),
            (MS * 700, 2, MAX_WAIT_MS - 700),
            (MS * 700, 2, MAX_WAIT_MS),
            (MS * 900, 5, MAX_WAIT_MS),
        ],
        "bulk calls reserve within what is left of their deadline"
    );
}
