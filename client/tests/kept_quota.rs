//! A quota kept at the server (THROTTLE.QUOTA) reaches a running fleet with no restart: three
//! limiters (three processes, each its own connection) written for 10 tokens at 10 per second
//! take in a loop; the operator keeps 20/20 for their key, and within a second the fleet takes
//! at 20 per second; the operator clears it, and the fleet is back at 10. On the four servers,
//! with the module, the function library and the script.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test kept_quota -- --nocapture
//! ```

use redis_throttle::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_throttle::throttle_bucket::{Quota as Sent, QuotaArgs};
use redis_throttle::{Backend, Commands, Limiter, Quota};
use throttle_e2e::{multiplexed, runtime, server_for};
use throttle_testkit::Flavor;
use tokio::time::Instant;

const PROCESSES: usize = 3;
/// Each phase: the quota changes at its start, and its second second is counted.
const PHASE: Duration = Duration::from_secs(2);

fn sent(capacity: u64, rate: &str) -> Sent {
    Sent::parse(capacity.to_string().as_bytes(), rate.as_bytes()).unwrap()
}

fn a_kept_quota_reaches_a_running_fleet(flavor: Flavor) {
    for backend in [Backend::Module, Backend::Library, Backend::Script] {
        let server = server_for(flavor, backend);
        let key = format!("kept:{backend:?}");
        runtime().block_on(async {
            let start = Instant::now();
            let grants: Arc<Mutex<Vec<Duration>>> = Arc::default();
            let mut fleet = Vec::new();
            for _ in 0..PROCESSES {
                let limiter = Limiter::builder(&key, Quota::new(10, 10u64).unwrap())
                    .backend(backend)
                    .build(multiplexed(&server.url()).await)
                    .unwrap();
                let grants = Arc::clone(&grants);
                fleet.push(tokio::spawn(async move {
                    while start.elapsed() < 3 * PHASE {
                        limiter.acquire().await.unwrap();
                        grants.lock().unwrap().push(start.elapsed());
                    }
                }));
            }
            let operator = Commands::new(multiplexed(&server.url()).await, backend);
            // Phase 1 keeps 20/20 for the key; phase 2 clears it, back to the fleet's own 10/10.
            for (phase, quota, clear) in [(1, sent(20, "20"), false), (2, sent(10, "10"), true)] {
                tokio::time::sleep_until(start + phase * PHASE).await;
                let reply = operator
                    .call(&key, &QuotaArgs { quota, clear })
                    .await
                    .unwrap();
                assert!(reply.changed, "{flavor} {backend:?}: phase {phase}");
            }
            for process in fleet {
                process.await.unwrap();
            }
            // Grants in the second second of each phase: the quota's rate.
            let grants = grants.lock().unwrap().clone();
            let in_second = |phase: u32| {
                let from = PHASE * phase + Duration::from_secs(1);
                grants
                    .iter()
                    .filter(|at| (from..from + Duration::from_secs(1)).contains(at))
                    .count()
            };
            let counts = [in_second(0), in_second(1), in_second(2)];
            println!("{flavor} {backend:?}: grants in the second second of each phase {counts:?}");
            // A bucket never lets more than its rate through in a second once drained (one
            // more for the window's edges); the fleet, asking all the time, gets close to it.
            assert!(
                (8..=11).contains(&counts[0]),
                "{flavor} {backend:?} 10/s: {counts:?}"
            );
            assert!(
                (17..=21).contains(&counts[1]),
                "{flavor} {backend:?} 20/s: {counts:?}"
            );
            assert!(
                (8..=11).contains(&counts[2]),
                "{flavor} {backend:?} back to 10/s: {counts:?}"
            );
        });
    }
}

throttle_testkit::per_server!(a_kept_quota_reaches_a_running_fleet);
