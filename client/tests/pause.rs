//! `Limiter::pause` on a real server, with each backend: two limiters on one key, each on a
//! connection of its own (two clients of the fleet); one of them pauses for 1.5 s (the
//! supplier said 429 with Retry-After). Neither gets a grant during the pause, and after it
//! the bucket gives one token, then one per interval: no burst.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test pause -- --nocapture
//! ```
//!
//! The server decides the pause's reply and what a pause does to a longer one: checked
//! exactly. The machine decides when grants return: checked against the bucket strictly
//! (never early: no grant before the pause ends, one per interval after it) and against a
//! late bound measured in the run.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Backend, Limiter, Quota, TryAcquire};
use throttle_e2e::wall::{now_ns, NS_PER_MS};
use throttle_e2e::{
    check_windows, clock_lag_ns, multiplexed, runtime, serial, server_for, stored_state, Sample,
};
use throttle_testkit::Flavor;

/// Capacity 3, 10 per second: one token every 100 ms.
const CAPACITY: u64 = 3;
const RATE: u64 = 10;
const T: i128 = 100 * NS_PER_MS;
const PAUSE: Duration = Duration::from_millis(1500);
/// Per limiter: tasks, each acquiring this many times in a row, after the pause.
const TASKS: usize = 3;
const CALLS: usize = 2;
/// Bound on the whole run after the pause.
const RUN_BOUND: Duration = Duration::from_secs(30);

fn paused_fleet(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let g = clock_lag_ns(flavor, backend);
    let mut con = server.conn();
    runtime().block_on(async {
        let key = format!("pause:{}", backend.name());
        let quota = Quota::new(CAPACITY, RATE).unwrap();
        let build = |conn| {
            Limiter::builder(key.as_str(), quota.clone())
                .backend(backend)
                .build(conn)
                .unwrap()
        };
        let a = build(multiplexed(&server.url()).await);
        let b = build(multiplexed(&server.url()).await);
        // Both have been calling: 2 of 3 tokens gone, nothing reserved.
        assert!(a.try_acquire().await.unwrap().is_granted(), "{flavor}");
        assert!(b.try_acquire().await.unwrap().is_granted(), "{flavor}");

        // A's supplier says 429, Retry-After 1.5 s.
        let paused = now_ns();
        let next = a.pause(PAUSE).await.unwrap();
        let paused_back = now_ns();
        assert_eq!(
            next, PAUSE,
            "{flavor} {backend:?}: the next token exactly 1.5 s away"
        );
        assert_eq!(a.metrics().pauses, 1);
        let end = paused + PAUSE.as_nanos() as i128; // the pause ends no earlier than this
        let state = stored_state(&mut con, &key);

        // B saw a 429 too, with a shorter Retry-After: it does not shorten A's pause.
        let b_paused = now_ns();
        let b_next = b.pause(Duration::from_millis(200)).await.unwrap();
        let b_next_ns = b_next.as_nanos() as i128;
        assert!(
            b_next <= PAUSE
                && b_next_ns + (now_ns() - paused) + NS_PER_MS + g >= PAUSE.as_nanos() as i128,
            "{flavor} {backend:?}: a shorter pause answered {b_next:?}, {} ms after A's",
            (b_paused - paused) / NS_PER_MS
        );
        assert_eq!(
            stored_state(&mut con, &key),
            state,
            "{flavor}: a shorter pause wrote"
        );

        // Both fleets want tokens during the pause: reserving tasks on A and B, and B
        // trying (never waiting) every 100 ms until just before the pause ends.
        let run = async {
            let mut tasks = Vec::new();
            for limiter in [&a, &b] {
                for _ in 0..TASKS {
                    let limiter = limiter.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut samples = Vec::new();
                        for _ in 0..CALLS {
                            let start = now_ns();
                            let grant = limiter.acquire().await.expect("acquire");
                            assert_eq!(grant.round_trips, 1 + u32::from(!grant.slept.is_zero()));
                            samples.push(Sample {
                                start,
                                done: now_ns(),
                                slept: grant.slept.as_nanos() as i128,
                            });
                        }
                        samples
                    }));
                }
            }
            let prober = b.clone();
            let probes = tokio::spawn(async move {
                let mut tries = Vec::new();
                for _ in 0..20 {
                    if now_ns() + 100 * NS_PER_MS >= end {
                        break;
                    }
                    let result = prober.try_acquire().await.unwrap();
                    tries.push((now_ns(), result));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                tries
            });
            let mut per_limiter = Vec::new();
            for chunk in tasks.chunks_mut(TASKS) {
                let mut samples = Vec::new();
                for task in chunk {
                    samples.extend(task.await.unwrap());
                }
                per_limiter.push(samples);
            }
            (per_limiter, probes.await.unwrap())
        };
        let (per_limiter, tries) = tokio::time::timeout(RUN_BOUND, run)
            .await
            .expect("the run ended in time");

        // Every try during the pause was refused, and told to come back no earlier than
        // its end (its server reading is before `done`).
        assert!(!tries.is_empty(), "{flavor}: no try during the pause");
        for (done, result) in &tries {
            match result {
                TryAcquire::Denied { retry_after } => assert!(
                    done + retry_after.as_nanos() as i128 + g >= end,
                    "{flavor} {backend:?}: told to retry {retry_after:?} after {} ms of the pause",
                    (done - paused) / NS_PER_MS
                ),
                granted => panic!(
                    "{flavor} {backend:?}: granted {} ms into the pause: {granted:?}",
                    (done - paused) / NS_PER_MS
                ),
            }
        }

        // No grant, to either, before the pause ended.
        let samples: Vec<Sample> = per_limiter.iter().flatten().copied().collect();
        assert_eq!(samples.len(), 2 * TASKS * CALLS);
        for (name, mine) in ["A", "B"].iter().zip(&per_limiter) {
            let first = mine.iter().map(|s| s.done).min().unwrap();
            assert!(
                first + g >= end,
                "{flavor} {backend:?}: {name} granted {} ms into a {PAUSE:?} pause",
                (first - paused) / NS_PER_MS
            );
        }
        // After it, one token, then one per interval: from the pause's end the k-th grant
        // needs k <= 1 + rate * (c_k - end + g), and no window holds a burst (capacity 1).
        let windows = check_windows(&samples, end, g, 1, RATE);
        // Late only by what the machine adds: the k-th grant is due at most `k - 1`
        // intervals after the pause's end, which is at most `paused_back + 1.5 s`.
        let mut done: Vec<i128> = samples.iter().map(|s| s.done).collect();
        done.sort_unstable();
        let slack = windows.max_lateness + NS_PER_MS + g;
        let latest_end = paused_back + PAUSE.as_nanos() as i128;
        for (k, at) in done.iter().enumerate() {
            let due = latest_end + k as i128 * T;
            assert!(
                *at <= due + slack,
                "{flavor} {backend:?}: grant {} at {} ms after the pause call, later than its \
                 slot ({} ms) + the slack measured ({} µs)",
                k + 1,
                (at - paused) / NS_PER_MS,
                (due - paused) / NS_PER_MS,
                slack / 1000
            );
        }
        let gaps: Vec<String> = done
            .windows(2)
            .map(|w| format!("{:.1}", (w[1] - w[0]) as f64 / 1e6))
            .collect();
        println!(
            "{flavor} {backend:?}: pause {PAUSE:?} (reply {next:?}; B's 200 ms pause answered \
             {b_next:?}, wrote nothing); {} tries during the pause, all refused; first grant \
             {:.3} ms after the pause call (A's first {:.3}, B's first {:.3}), then gaps (ms) \
             {gaps:?}; {windows}",
            tries.len(),
            (done[0] - paused) as f64 / 1e6,
            (per_limiter[0].iter().map(|s| s.done).min().unwrap() - paused) as f64 / 1e6,
            (per_limiter[1].iter().map(|s| s.done).min().unwrap() - paused) as f64 / 1e6,
        );
    });
}

fn paused_fleet_module(flavor: Flavor) {
    paused_fleet(flavor, Backend::Module);
}
fn paused_fleet_script(flavor: Flavor) {
    paused_fleet(flavor, Backend::Script);
}

throttle_testkit::per_server!(paused_fleet_module, paused_fleet_script);
