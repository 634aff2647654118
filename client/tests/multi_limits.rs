//! Several limits in one limiter (`MultiLimiter`, one `THROTTLE.MTAKE` per call), on real
//! servers with each backend: 10 per second and 25 per 5 s on two keys with one hash tag.
//!
//! - 3 OS processes (this binary run again) x 4 tasks call `acquire()` for 10 s; every
//!   grant's instant is logged, and no window goes over either limit: every window
//!   `[t0, t1]` holds at most `capacity + rate * (t1 - t0)` grants for each, plus the
//!   bunching late grants can make, `rate * (max lateness + 1 ms + g)`, measured in the run
//!   (the argument is in tests/tests/soak_overshoot.rs). From the moment both buckets were
//!   full the bound holds strictly. Utilisation is printed.
//! - All or nothing: a call one bucket refuses writes nothing to any key.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test multi_limits -- --nocapture
//! ```

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_throttle::{Backend, Error, Limiter, MultiLimiter, Quota, Rate};
use throttle_e2e::wall::now_ns;
use throttle_e2e::{
    backend_named, calls, check_windows, clock_lag_ns, multiplexed, runtime, serial, server_for,
    stored_state, worker_env, worker_number, Report, Windows,
};
use throttle_testkit::{ChildTest, Flavor};

const PER_SECOND: &str = "{supplier}:second";
const PER_5S: &str = "{supplier}:5s";
/// 10 per second: a burst of 10, one every 100 ms.
const SECOND: (u64, u64) = (10, 10);
/// 25 per 5 s: a burst of 25, one every 200 ms.
const FIVE_SECONDS: (u64, u64) = (25, 5);
const PROCESSES: usize = 3;
const TASKS: usize = 4;
const RUN: Duration = Duration::from_secs(10);
const GO_DELAY: Duration = Duration::from_millis(1500);
/// A worker's last reservations (12 outstanding at 5/s: 2.4 s) and a slow shutdown.
const GRACE: Duration = Duration::from_secs(30);
/// Below this the run did not keep the tighter bucket busy enough to mean anything.
const MIN_UTILISATION: f64 = 0.8;

fn second() -> Quota {
    Quota::new(SECOND.0, SECOND.1).unwrap()
}

fn five_seconds() -> Quota {
    Quota::new(FIVE_SECONDS.0, Rate::per(25, Duration::from_secs(5))).unwrap()
}

fn multi<C: 'static>(conn: C, backend: Backend, prefix: &str) -> MultiLimiter<C> {
    // One THROTTLE.MTAKE per grant, counted exactly: no look before sending (tested in
    // pushback.rs).
    MultiLimiter::builder()
        .limit(format!("{prefix}{PER_SECOND}"), second(), 1)
        .limit(format!("{prefix}{PER_5S}"), five_seconds(), 1)
        .backend(backend)
        .pause_check(false)
        .build(conn)
        .unwrap()
}

// --- The worker process ----------------------------------------------------------------

mod worker_samples;

const WORKER_URL: &str = "THROTTLE_MULTI_WORKER_URL";
const WORKER_BACKEND: &str = "THROTTLE_MULTI_WORKER_BACKEND";
const WORKER_GO_AT: &str = "THROTTLE_MULTI_WORKER_GO_AT_NS";
const WORKER_END_AT: &str = "THROTTLE_MULTI_WORKER_END_AT_NS";

/// In a worker process: 4 tasks call `acquire()` until the end instant, then print
/// `START <ns>`, a `SAMPLE` per grant and the counters. As a normal test it does nothing.
#[test]
fn multi_worker() {
    let Ok(url) = std::env::var(WORKER_URL) else {
        return;
    };
    let backend = backend_named(&worker_env(WORKER_BACKEND));
    let go_at: i128 = worker_number(WORKER_GO_AT);
    let end_at: i128 = worker_number(WORKER_END_AT);
    let bound = Duration::from_nanos((end_at - now_ns()).max(0) as u64) + GRACE;
    runtime().block_on(async {
        let work = async {
            let limiter = multi(multiplexed(&url).await, backend, "");
            // Bounded by the end instant, and by a count no run can reach.
            worker_samples::acquire_and_report(
                limiter,
                go_at,
                TASKS,
                10_000,
                move |start| start < end_at,
                |grant| assert_eq!(grant.round_trips, 1, "one THROTTLE.MTAKE per grant"),
            )
            .await;
        };
        tokio::time::timeout(bound, work)
            .await
            .expect("the worker ran past its bound");
    });
}

// --- No window over either limit ------------------------------------------------------

fn no_window_over_either_limit(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let mut con = server.conn();
    if backend == Backend::Script {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(redis_throttle::script::SOURCE)
            .query(&mut con)
            .unwrap();
    }
    let (mtake_before, evalsha_before) = (
        calls(&mut con, "throttle.mtake"),
        calls(&mut con, "evalsha"),
    );
    let go_at = now_ns() + GO_DELAY.as_nanos() as i128;
    let end_at = go_at + RUN.as_nanos() as i128;
    let env = [
        (WORKER_URL, server.url()),
        (WORKER_BACKEND, backend.name().to_owned()),
        (WORKER_GO_AT, go_at.to_string()),
        (WORKER_END_AT, end_at.to_string()),
    ];
    let mut workers: Vec<ChildTest> = (0..PROCESSES)
        .map(|_| ChildTest::spawn("multi_worker", &env))
        .collect();
    let deadline = std::time::Instant::now() + GO_DELAY + RUN + GRACE;
    let mut starts = Vec::new();
    let mut samples = Vec::new();
    let mut per_process = Vec::new();
    for worker in &mut workers {
        let report = Report::parse(&worker.finish_ok(deadline));
        let mine = report.samples.len();
        assert_eq!(
            report.metrics,
            format!(
                "granted={mine} errors=0 gave_up=0 round_trips={mine} backend={}",
                backend.name()
            ),
            "{flavor} {backend:?}"
        );
        starts.push(report.start);
        samples.extend(report.samples);
        per_process.push(mine);
    }
    drop(workers);
    assert_eq!(starts.len(), PROCESSES);
    assert!(per_process.iter().all(|&n| n > 0), "{per_process:?}");

    let grants = samples.len() as u64;
    let (mtake, evalsha) = (
        calls(&mut con, "throttle.mtake") - mtake_before,
        calls(&mut con, "evalsha") - evalsha_before,
    );
    match backend {
        Backend::Script => assert_eq!((mtake, evalsha), (0, grants), "{flavor}"),
        _ => assert_eq!((mtake, evalsha), (grants, 0), "{flavor}"),
    }

    // Both buckets were full before the first request of any process.
    let t0 = *starts.iter().min().unwrap();
    let g = clock_lag_ns(flavor, backend);
    let per_second: Windows = check_windows(&samples, t0, g, SECOND.0, SECOND.1);
    let per_5s: Windows = check_windows(&samples, t0, g, FIVE_SECONDS.0, FIVE_SECONDS.1);
    println!(
        "{flavor} {backend:?}: 10/s + 25/5 s, {PROCESSES} processes x {TASKS} tasks for {RUN:?}, \
         {grants} grants (per process {per_process:?}), {mtake} THROTTLE.MTAKE, {evalsha} \
         EVALSHA\n  10/s:    {per_second}\n  25/5 s:  {per_5s}"
    );
    assert!(
        per_5s.utilisation >= MIN_UTILISATION,
        "{flavor} {backend:?}: the 25/5 s bucket was not kept busy: {per_5s}"
    );
}

// --- All or nothing --------------------------------------------------------------------

/// How many times a scenario may be run again because the machine held a call back until
/// the refused bucket had a token again.
const ATTEMPTS: usize = 5;

/// Runs `scenario` for attempt 0, 1, ... until it could check what it checks (`true`), and
/// fails if it could not in [`ATTEMPTS`] runs (`false`: the machine was too slow).
async fn until_quick_enough(flavor: Flavor, mut scenario: impl AsyncFnMut(usize) -> bool) {
    for attempt in 0..ATTEMPTS {
        if scenario(attempt).await {
            return;
        }
    }
    panic!("{flavor}: the machine was too slow {ATTEMPTS} times in a row");
}

async fn single(
    url: &str,
    key: String,
    quota: Quota,
    backend: Backend,
) -> Limiter<MultiplexedConnection> {
    Limiter::builder(key, quota)
        .backend(backend)
        .build(multiplexed(url).await)
        .unwrap()
}

/// When the 25/5 s bucket is empty, a `try_acquire` (and an `acquire_with` whose deadline
/// is shorter than that bucket's wait) is refused and writes nothing to the 10/s key, nor to
/// the empty one; and the other way round, a refusal by the 10/s bucket leaves the 25/5 s
/// key as it was (here: absent). Exact, unless the machine delayed the call until a token
/// was due (then the scenario runs again, at most [`ATTEMPTS`] times).
fn all_or_nothing(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let url = server.url();
    let mut con = server.conn();
    runtime().block_on(async {
        // The 25/5 s bucket empty (next token in 200 ms), the 10/s one holding 7.
        until_quick_enough(flavor, async |attempt| {
            let prefix = format!("a{attempt}:");
            let (s_key, m_key) = (format!("{prefix}{PER_SECOND}"), format!("{prefix}{PER_5S}"));
            let per_second = single(&url, s_key.clone(), second(), backend).await;
            let per_5s = single(&url, m_key.clone(), five_seconds(), backend).await;
            let limiter = multi(multiplexed(&url).await, backend, &prefix);
            assert!(per_second
                .try_acquire_with(Demand::tokens(3))
                .await
                .unwrap()
                .is_granted());
            let drained = tokio::time::Instant::now();
            assert!(per_5s
                .try_acquire_with(Demand::tokens(25))
                .await
                .unwrap()
                .is_granted());
            let (s_state, m_state) = (
                stored_state(&mut con, &s_key),
                stored_state(&mut con, &m_key),
            );
            assert!(s_state.is_some() && m_state.is_some());

            let tried = limiter.try_acquire().await.unwrap();
            let within = limiter
                .acquire_with(Demand::call().within(Duration::from_millis(50)))
                .await;
            if drained.elapsed() >= Duration::from_millis(150) {
                // A token may have been due: try again.
                return false;
            }
            assert!(
                !tried.is_granted(),
                "{flavor} {backend:?}: granted with the 25/5 s bucket empty"
            );
            match within {
                Err(Error::DeadlineExceeded {
                    needed: Some(needed),
                    ..
                }) => assert!(
                    needed > Duration::from_millis(50) && needed <= Duration::from_millis(200),
                    "{flavor}: {needed:?}"
                ),
                other => panic!("{flavor} {backend:?}: {other:?}"),
            }
            assert_eq!(
                stored_state(&mut con, &s_key),
                s_state,
                "{flavor} {backend:?}: the 10/s key"
            );
            assert_eq!(
                stored_state(&mut con, &m_key),
                m_state,
                "{flavor} {backend:?}: the 25/5 s key"
            );
            let m = limiter.metrics();
            assert_eq!(
                (m.granted, m.denied, m.gave_up),
                (0, 1, 1),
                "{flavor}: {m:?}"
            );
            true
        })
        .await;

        // The 10/s bucket empty (next token in 100 ms), the 25/5 s key never written.
        until_quick_enough(flavor, async |attempt| {
            let prefix = format!("b{attempt}:");
            let (s_key, m_key) = (format!("{prefix}{PER_SECOND}"), format!("{prefix}{PER_5S}"));
            let per_second = single(&url, s_key.clone(), second(), backend).await;
            let limiter = multi(multiplexed(&url).await, backend, &prefix);
            let drained = tokio::time::Instant::now();
            assert!(per_second
                .try_acquire_with(Demand::tokens(10))
                .await
                .unwrap()
                .is_granted());
            let s_state = stored_state(&mut con, &s_key);
            let tried = limiter.try_acquire().await.unwrap();
            if drained.elapsed() >= Duration::from_millis(100) {
                return false;
            }
            assert!(
                !tried.is_granted(),
                "{flavor} {backend:?}: granted with the 10/s bucket empty"
            );
            assert_eq!(
                stored_state(&mut con, &s_key),
                s_state,
                "{flavor} {backend:?}"
            );
            assert_eq!(
                stored_state(&mut con, &m_key),
                None,
                "{flavor} {backend:?}: written"
            );
            true
        })
        .await;

        // And a grant takes from both: one token each, in one round trip.
        let limiter = multi(multiplexed(&url).await, backend, "c:");
        let grant = limiter
            .try_acquire()
            .await
            .unwrap()
            .granted()
            .expect("two full buckets");
        assert_eq!((grant.round_trips, grant.remaining), (1, 9), "{flavor}");
        // One clock reading for both: each state is that instant plus one interval, so
        // they are exactly 100 ms apart (200 ms - 100 ms).
        let state = |con: &mut redis::Connection, key: &str| -> i128 {
            stored_state(con, key).expect("written").into()
        };
        let (s, m) = (
            state(&mut con, "c:{supplier}:second"),
            state(&mut con, "c:{supplier}:5s"),
        );
        assert_eq!(m - s, 100_000_000, "{flavor} {backend:?}");
        println!("{flavor} {backend:?}: a refused multi-take wrote nothing to either key");
    });
}

// --- Giving back ------------------------------------------------------------------------

/// A per-call limit (10/s) and a per-token one (100 at 100/s), then a slow one (1 per 10 s):
/// - a grant of 30 tokens given back returns all 30 and leaves both buckets full (deleted);
/// - of two grants, the first gives back 0 (a take came after it), the second all 5;
/// - a call dropped while it sleeps after a reservation gives its tokens back: the slow
///   bucket is as the first take left it.
fn give_back_returns_every_buckets_tokens(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let url = server.url();
    let mut con = server.conn();
    runtime().block_on(async {
        let limiter = MultiLimiter::builder()
            .limit("{g}:second", second(), 1)
            .per_token("{g}:tokens", Quota::new(100, 100u64).unwrap())
            .backend(backend)
            .build(multiplexed(&url).await)
            .unwrap();
        let grant = limiter.acquire_with(Demand::tokens(30)).await.unwrap();
        assert_eq!(grant.tokens, 30);
        assert_eq!(
            limiter.give_back(grant).await.unwrap(),
            30,
            "{flavor} {backend:?}"
        );
        for key in ["{g}:second", "{g}:tokens"] {
            assert_eq!(
                stored_state(&mut con, key),
                None,
                "{flavor} {backend:?}: {key}"
            );
        }
        let first = limiter.acquire_with(Demand::tokens(5)).await.unwrap();
        let later = limiter.acquire_with(Demand::tokens(5)).await.unwrap();
        assert_eq!(
            limiter.give_back(first).await.unwrap(),
            0,
            "a take came after it"
        );
        assert_eq!(limiter.give_back(later).await.unwrap(), 5);
        assert_eq!(limiter.metrics().tokens_given_back, 35);

        let slow = MultiLimiter::builder()
            .limit("{s}:a", second(), 1)
            .limit("{s}:slow", Quota::new(1, "0.1").unwrap(), 1)
            .backend(backend)
            .build(multiplexed(&url).await)
            .unwrap();
        slow.acquire().await.unwrap();
        // The first call's round trips (the library's check too, on that backend).
        let trips_before = slow.metrics().round_trips;
        let after_first = stored_state(&mut con, "{s}:slow");
        let waiting = tokio::spawn({
            let slow = slow.clone();
            async move { slow.acquire().await }
        });
        // The reservation is made (a second round trip), then the call is dropped.
        tokio::time::timeout(Duration::from_secs(5), async {
            while slow.metrics().round_trips <= trips_before {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the reservation within 5 s");
        waiting.abort();
        tokio::time::timeout(Duration::from_secs(5), async {
            while slow.metrics().tokens_given_back == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the refund within 5 s");
        assert_eq!(slow.metrics().tokens_given_back, 1);
        assert_eq!(
            stored_state(&mut con, "{s}:slow"),
            after_first,
            "{flavor} {backend:?}: the dropped reservation's token is back"
        );
    });
}

mod per_backend;

per_backend::backends!(
    [redis_7_0 Redis70, redis_8_2 Redis82]
    no_window_over_either_limit => no_window_over_either_limit_module(Module),
    no_window_over_either_limit => no_window_over_either_limit_script(Script),
    all_or_nothing => all_or_nothing_module(Module),
    all_or_nothing => all_or_nothing_script(Script),
    give_back_returns_every_buckets_tokens => give_back_module(Module),
    give_back_returns_every_buckets_tokens => give_back_library(Library),
    give_back_returns_every_buckets_tokens => give_back_script(Script),
);
