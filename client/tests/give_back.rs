//! Giving tokens back, on a real server, with each backend: an `acquire` dropped while it
//! waits for its reservation gives the tokens back (the next caller is served one interval
//! earlier, measured against a control run), unless someone reserved after it (Go's
//! `x/time/rate` rule: their reservations stay valid, nothing is given back); and
//! `give_back(grant)` returns every token when nothing was taken after the grant.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test give_back -- --nocapture   # prints the figures
//! ```
//!
//! The server decides what is given back: checked exactly (the reply, the stored state,
//! byte for byte). The machine decides when a caller returns: checked against the bucket
//! strictly (never early) and against a late bound measured in the run.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_throttle::{Backend, Grant, Limiter, Quota, TryAcquire};
use throttle_e2e::wall::{now_ns, sleep_until, NS_PER_MS, NS_PER_S};
use throttle_e2e::{calls, clock_lag_ns, multiplexed, runtime, serial, server_for, stored_state};
use throttle_testkit::{Flavor, Server};
use tokio::task::JoinHandle;

/// How long the first waiter waits before it is dropped.
const DROP_AFTER: Duration = Duration::from_millis(100);
/// Bound on every wait for the server to reach a state.
const SETTLE: Duration = Duration::from_secs(5);

type Conn = MultiplexedConnection;

async fn limiter(server: &Server, key: &str, quota: &Quota, backend: Backend) -> Limiter<Conn> {
    Limiter::builder(key, quota.clone())
        .backend(backend)
        .build(multiplexed(&server.url()).await)
        .unwrap()
}

/// The stored state as a number (ns), waiting (bounded) until `ready` says it is the one
/// expected.
async fn state_when(con: &mut redis::Connection, key: &str, ready: impl Fn(i128) -> bool) -> i128 {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let state: i128 = stored_state(con, key).map_or(0, i128::from);
        if ready(state) {
            return state;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the state of {key} stayed at {state} for {SETTLE:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until `done`, failing with "`flavor`: `not_yet`" after `SETTLE`.
async fn wait_until(flavor: Flavor, not_yet: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{flavor}: {not_yet}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The server's count of give-backs: THROTTLE.GIVE for the module; for the script every
/// EVALSHA counts, and only the give-back runs one while this is read.
fn gives(con: &mut redis::Connection, backend: Backend) -> u64 {
    match backend {
        Backend::Script => calls(con, "evalsha"),
        _ => calls(con, "throttle.give"),
    }
}

/// A caller that waits in a task: `(start, done, grant)`, ns since the epoch.
fn waiter(limiter: &Limiter<Conn>) -> (i128, JoinHandle<(i128, Grant)>) {
    let limiter = limiter.clone();
    let start = now_ns();
    let task = tokio::spawn(async move {
        let grant = limiter.acquire().await.expect("acquire");
        (now_ns(), grant)
    });
    (start, task)
}

/// Three limiters on one bucket of capacity 1 at 1/s, the bucket just drained by X (its next
/// token 1 s away), and what the drain measured.
struct Drained {
    x: Limiter<Conn>,
    a: Limiter<Conn>,
    /// B, or C: the caller after A.
    next: Limiter<Conn>,
    con: redis::Connection,
    /// Just before the drain, ns since the epoch.
    drained: i128,
    drain_rtt: i128,
    /// The stored state after the drain.
    s0: i128,
}

async fn drained(server: &Server, key: &str, backend: Backend) -> Drained {
    let flavor = server.flavor();
    let quota = Quota::new(1, 1u64).unwrap();
    let x = limiter(server, key, &quota, backend).await;
    let a = limiter(server, key, &quota, backend).await;
    let next = limiter(server, key, &quota, backend).await;
    let mut con = server.conn();

    let drained = now_ns();
    assert!(x.try_acquire().await.unwrap().is_granted(), "{flavor}");
    let drain_rtt = now_ns() - drained;
    let s0: i128 = i128::from(stored_state(&mut con, key).unwrap());
    Drained {
        x,
        a,
        next,
        con,
        drained,
        drain_rtt,
        s0,
    }
}

/// What one run of [`next_caller`] measured, ns.
#[derive(Debug)]
struct Served {
    /// From just before the drain to when B's acquire returned.
    offset: i128,
    /// How late B could be, at most, beyond its slot: the drain's round trip (the server's
    /// reading is within it) + B's lateness + 1 ms of rounding up + the clock lag.
    slack: i128,
}

/// Capacity 1 at 1/s: X drains the bucket (the next token is 1 s away); A reserves it and
/// waits; 100 ms later A is dropped (`drop_a`) or keeps waiting (the control); then B
/// acquires. With the give-back B gets A's token, 1 s after the drain; in the control the
/// one after it, 2 s after the drain.
async fn next_caller(server: &Server, backend: Backend, drop_a: bool) -> Served {
    const T: i128 = NS_PER_S;
    let g = clock_lag_ns(server.flavor(), backend);
    let flavor = server.flavor();
    let key = format!("give_back:next:{}:{drop_a}", backend.name());
    let Drained {
        x: _x,
        a,
        next: b,
        mut con,
        drained,
        drain_rtt,
        s0,
    } = drained(server, &key, backend).await;

    let (a_start, a_task) = waiter(&a);
    // A's reservation is in when the state is one token later.
    state_when(&mut con, &key, |s| s == s0 + T).await;
    sleep_until(a_start + DROP_AFTER.as_nanos() as i128).await;
    let a_result = if drop_a {
        a_task.abort();
        assert!(a_task.await.unwrap_err().is_cancelled(), "{flavor}");
        // The give-back runs in a task the drop spawned: wait (bounded) for its reply.
        wait_until(flavor, "no give-back", || a.metrics().tokens_given_back > 0).await;
        // Exactly the token, exactly back: the state is the drain's again.
        assert_eq!(
            i128::from(stored_state(&mut con, &key).unwrap()),
            s0,
            "{flavor} {backend:?}"
        );
        None
    } else {
        Some(a_task)
    };

    let b_start = now_ns();
    let grant = b.acquire().await.unwrap();
    let b_done = now_ns();
    let lateness = b_done - b_start - grant.slept.as_nanos() as i128;
    assert_eq!(
        grant.round_trips,
        1 + u32::from(!grant.slept.is_zero()),
        "{flavor}"
    );

    let m = a.metrics();
    match a_result {
        None => assert_eq!(
            (m.granted, m.tokens_given_back, m.round_trips),
            (0, 1, 2),
            "{flavor} {backend:?}: A reserved, was dropped and gave back its token: {m:?}"
        ),
        Some(task) => {
            let (a_done, _) = task.await.unwrap();
            assert!(a_done - drained + g >= T, "{flavor}: A early");
            let m = a.metrics();
            assert_eq!((m.granted, m.tokens_given_back), (1, 0), "{flavor}: {m:?}");
        }
    }
    let offset = b_done - drained;
    let slot = if drop_a { T } else { 2 * T };
    let slack = drain_rtt + lateness + NS_PER_MS + g;
    assert!(
        offset + g >= slot,
        "{flavor} {backend:?}: B came {offset} ns after the drain, before its token ({slot})"
    );
    assert!(
        offset <= slot + slack,
        "{flavor} {backend:?}: B came {offset} ns after the drain, later than its token \
         ({slot}) + the slack measured ({slack})"
    );
    Served { offset, slack }
}

/// Drop-while-waiting gives the token back: B is served one interval (1 s) earlier than in
/// the control run where A keeps waiting, within the slack measured in the two runs.
fn dropped_waiter_gives_back(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        let dropped = next_caller(&server, backend, true).await;
        let control = next_caller(&server, backend, false).await;
        let earlier = control.offset - dropped.offset;
        let g = clock_lag_ns(flavor, backend);
        let ms = |ns: i128| ns as f64 / 1e6;
        println!(
            "{flavor} {backend:?}: capacity 1 at 1/s, A reserves and is dropped after \
             {DROP_AFTER:?}: B served {:.3} ms after the drain (its token at 1000 ms); \
             control (A not dropped): {:.3} ms (token at 2000 ms); B served {:.3} ms earlier \
             (one interval: 1000 ms; allowed {:.3} to {:.3} ms by the slack measured)",
            ms(dropped.offset),
            ms(control.offset),
            ms(earlier),
            ms(NS_PER_S - g - dropped.slack),
            ms(NS_PER_S + g + control.slack),
        );
        assert!(
            earlier >= NS_PER_S - g - dropped.slack && earlier <= NS_PER_S + g + control.slack,
            "{flavor} {backend:?}: B served {earlier} ns earlier, not one interval"
        );
    });
}

/// With C queued behind A, A's drop gives back nothing: the give-back runs (the server counts
/// it) and answers 0, the stored state does not move, and C is served at its reserved time.
fn dropped_waiter_with_a_waiter_behind_gives_nothing(flavor: Flavor, backend: Backend) {
    const T: i128 = NS_PER_S;
    let _serial = serial();
    let server = server_for(flavor, backend);
    let g = clock_lag_ns(flavor, backend);
    runtime().block_on(async {
        let key = format!("give_back:queued:{}", backend.name());
        let Drained {
            x,
            a,
            next: c,
            mut con,
            drained,
            drain_rtt,
            s0,
        } = drained(&server, &key, backend).await;
        let (a_start, a_task) = waiter(&a);
        state_when(&mut con, &key, |s| s == s0 + T).await;
        let (c_start, c_task) = waiter(&c);
        let queued = state_when(&mut con, &key, |s| s == s0 + 2 * T).await;

        let gives_before = gives(&mut con, backend);
        sleep_until(a_start + DROP_AFTER.as_nanos() as i128).await;
        a_task.abort();
        assert!(a_task.await.unwrap_err().is_cancelled());
        // The give-back ran once (bounded wait for the server to count it) ...
        wait_until(flavor, "no give-back sent", || {
            gives(&mut con, backend) != gives_before
        })
        .await;
        // ... its reply counted (round trips: the take and the give) ...
        wait_until(flavor, "no reply", || a.metrics().round_trips >= 2).await;
        // ... and gave back nothing: the state is exactly what C's reservation left.
        let m = a.metrics();
        assert_eq!(
            (m.granted, m.tokens_given_back, m.round_trips),
            (0, 0, 2),
            "{flavor} {backend:?}: {m:?}"
        );
        assert_eq!(
            gives(&mut con, backend),
            gives_before + 1,
            "{flavor}: one give-back"
        );
        assert_eq!(
            i128::from(stored_state(&mut con, &key).unwrap()),
            queued,
            "{flavor} {backend:?}: the drop moved the state"
        );

        // C keeps its reservation: the second token after the drain, 2 s.
        let (c_done, c_grant) = c_task.await.unwrap();
        assert_eq!(c_grant.round_trips, 1 + u32::from(!c_grant.slept.is_zero()));
        let offset = c_done - drained;
        // C's lateness as B's is measured above: from before its task started to after its
        // acquire returned, less its sleep. (The grant's own `waited - slept` leaves out the
        // task's scheduling around the call, which a loaded machine stretched 0.2 ms past it.)
        let lateness = c_done - c_start - c_grant.slept.as_nanos() as i128;
        let slack = drain_rtt + lateness + NS_PER_MS + g;
        assert!(offset + g >= 2 * T, "{flavor}: C early: {offset}");
        assert!(
            offset <= 2 * T + slack,
            "{flavor}: C at {offset} ns, after its slot (2 s) + the slack measured ({slack})"
        );
        // And the next token is still 3 s after the drain: a caller now is refused.
        match x.try_acquire().await.unwrap() {
            TryAcquire::Denied { retry_after } => assert!(
                retry_after > Duration::ZERO && retry_after <= Duration::from_secs(1),
                "{flavor}: {retry_after:?}"
            ),
            granted => panic!("{flavor}: {granted:?}"),
        }
        println!(
            "{flavor} {backend:?}: A dropped with C queued behind: 1 give-back sent, 0 tokens \
             given back, state unchanged; C served {:.3} ms after the drain (its slot 2000 ms)",
            offset as f64 / 1e6
        );
    });
}

/// `give_back(grant)` with nothing taken after the grant returns all its tokens: the next
/// caller is granted at once. With a take after it, nothing (the last slot is the later
/// take's). One token per 1000 s, so every reply here is exact.
fn give_back_returns_what_was_not_followed(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        let key = format!("give_back:explicit:{}", backend.name());
        let quota = Quota::new(3, "0.001").unwrap();
        let x = limiter(&server, &key, &quota, backend).await;
        let y = limiter(&server, &key, &quota, backend).await;

        let TryAcquire::Granted(all) = x.try_acquire_with(Demand::tokens(3)).await.unwrap() else {
            panic!("{flavor}: a full bucket refused 3");
        };
        assert!(
            !y.try_acquire().await.unwrap().is_granted(),
            "{flavor}: empty"
        );
        assert_eq!(x.give_back(all).await.unwrap(), 3, "{flavor} {backend:?}");
        let TryAcquire::Granted(again) = y.try_acquire_with(Demand::tokens(3)).await.unwrap()
        else {
            panic!("{flavor} {backend:?}: the tokens given back are not there");
        };
        assert_eq!((again.remaining, again.round_trips), (0, 1));

        // Y gives its 3 back; X takes 2, Y takes 1 after it: X's give-back returns nothing.
        assert_eq!(y.give_back(again).await.unwrap(), 3, "{flavor}");
        let TryAcquire::Granted(two) = x.try_acquire_with(Demand::tokens(2)).await.unwrap() else {
            panic!("{flavor}: refused 2 of a full bucket");
        };
        assert!(y.try_acquire().await.unwrap().is_granted(), "{flavor}");
        assert_eq!(x.give_back(two).await.unwrap(), 0, "{flavor} {backend:?}");
        assert_eq!(y.peek().await.unwrap().remaining, 0, "{flavor}");
        assert_eq!(x.metrics().tokens_given_back, 3, "{flavor}");
        assert_eq!(y.metrics().tokens_given_back, 3, "{flavor}");
        println!(
            "{flavor} {backend:?}: give_back of 3 with nothing after -> 3, the next caller \
             granted 3 at once; give_back of 2 with 1 taken after -> 0"
        );
    });
}

/// The fleet's quota (capacity 8, 9/s): a grant given back at once, with nothing taken
/// after it, comes back whole, although the interval, 1/9 s, is not a whole number of µs and
/// the ticket is the state rounded down to the µs.
fn give_back_at_a_rate_whose_interval_is_not_whole_micros(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    runtime().block_on(async {
        for rate in [9u64, 3] {
            let key = format!("give_back:rate{rate}:{}", backend.name());
            let quota = Quota::new(8, rate).unwrap();
            let x = limiter(&server, &key, &quota, backend).await;
            let TryAcquire::Granted(one) = x.try_acquire().await.unwrap() else {
                panic!("{flavor}: a full bucket refused 1");
            };
            assert_eq!(
                x.give_back(one).await.unwrap(),
                1,
                "{flavor} {backend:?}: capacity 8, {rate}/s: a token taken and given back \
                 at once, nothing taken after it"
            );
        }
    });
}

mod per_backend;

per_backend::backends!(
    dropped_waiter_gives_back => dropped_waiter_gives_back_module(Module),
    dropped_waiter_gives_back => dropped_waiter_gives_back_script(Script),
    dropped_waiter_with_a_waiter_behind_gives_nothing
        => queued_waiter_keeps_its_reservation_module(Module),
    dropped_waiter_with_a_waiter_behind_gives_nothing
        => queued_waiter_keeps_its_reservation_script(Script),
    give_back_returns_what_was_not_followed => give_back_module(Module),
    give_back_returns_what_was_not_followed => give_back_script(Script),
);

per_backend::backends!(
    [redis_8_2_rates Redis82, redis_7_0_rates Redis70]
    give_back_at_a_rate_whose_interval_is_not_whole_micros
        => give_back_at_9_per_second_module(Module),
    give_back_at_a_rate_whose_interval_is_not_whole_micros
        => give_back_at_9_per_second_script(Script),
);
