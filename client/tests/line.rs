//! The server's line for a slot, end to end on the four servers (each with one of the three
//! backends): callers in different processes (each limiter its own connection and
//! subscription, as `redis_throttle::connect` gives a process), some listening and some not,
//! are granted in the order they joined; a caller that is dropped while in line leaves it, so
//! the next one is served at the release, not after its place or a lease runs out.
//!
//! Timing on a shared machine: the order is the server's and checked exactly; how soon a
//! waiter goes ahead after a release, loosely.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_throttle::prelude::*;
use redis_throttle::{Backend, Connection, Limiter, Quota};
use throttle_e2e::{runtime, within_async, Flavor, Server};
use tokio::time::Instant;

throttle_e2e::per_server!(
    callers_are_served_in_the_order_they_joined,
    a_caller_dropped_in_line_leaves_it
);

/// Each server with one of the backends, so that all three are run.
fn backend_on(flavor: Flavor) -> Backend {
    match flavor {
        Flavor::Redis70 => Backend::Script,
        Flavor::Valkey81 => Backend::Library,
        _ => Backend::Module,
    }
}

/// A process's limiter on `key`, capped at one call in flight: listening (the default over
/// `connect`'s connection) or not.
async fn process(url: &str, key: &str, backend: Backend, listening: bool) -> Limiter<Connection> {
    let mut builder = Limiter::builder(key, Quota::new(1_000, 1_000u64).unwrap())
        .backend(backend)
        .max_in_flight(1)
        .slot_lease(Duration::from_secs(5));
    if !listening {
        builder = builder.without_listening();
    }
    builder
        .build(redis_throttle::connect(url).await.unwrap())
        .unwrap()
}

/// Until `limiter`'s call has joined the line (its own count), at most 10 s.
async fn joined(limiter: &Limiter<Connection>, what: &str) {
    within_async(what, Duration::from_secs(10), || {
        (limiter.metrics().in_flight.joined_line > 0).then_some(())
    })
    .await;
}

fn callers_are_served_in_the_order_they_joined(flavor: Flavor) {
    let server = Server::start(flavor);
    let (url, backend) = (server.url(), backend_on(flavor));
    runtime().block_on(async {
        let holder = process(&url, "ordered", backend, true).await;
        let held = holder.acquire().await.unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut callers = Vec::new();
        // Six processes join one after another, every other one not listening.
        for caller in 0..6 {
            let limiter = process(&url, "ordered", backend, caller % 2 == 0).await;
            let (waiting, served) = (limiter.clone(), Arc::clone(&served));
            callers.push(tokio::spawn(async move {
                let grant = waiting.acquire().await.unwrap();
                served.lock().unwrap().push(caller);
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(grant);
            }));
            joined(&limiter, &format!("caller {caller} in line")).await;
        }
        drop(held);
        for caller in callers {
            tokio::time::timeout(Duration::from_secs(60), caller)
                .await
                .expect("every caller served within a minute")
                .unwrap();
        }
        assert_eq!(*served.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
    });
}

fn a_caller_dropped_in_line_leaves_it(flavor: Flavor) {
    let server = Server::start(flavor);
    let (url, backend) = (server.url(), backend_on(flavor));
    runtime().block_on(async {
        let holder = process(&url, "left", backend, true).await;
        let held = holder.acquire().await.unwrap();
        let first = process(&url, "left", backend, true).await;
        let waiting = first.clone();
        let dropped = tokio::spawn(async move { waiting.acquire().await.map(drop) });
        joined(&first, "the first caller in line").await;
        let second = process(&url, "left", backend, true).await;
        let waiting = second.clone();
        let next = tokio::spawn(async move { waiting.acquire().await });
        joined(&second, "the second caller in line").await;
        // The first caller gives up (its future dropped): it leaves the line at once, so the
        // release hands the slot to the second, not to nobody for a lease.
        dropped.abort();
        let _ = dropped.await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let released = Instant::now();
        drop(held);
        let grant = tokio::time::timeout(Duration::from_secs(4), next)
            .await
            .expect("the second caller is served at the release, before any lease runs out")
            .unwrap()
            .unwrap();
        println!(
            "{flavor}: the second caller went ahead {:?} after the release",
            released.elapsed()
        );
        assert!(grant.slot().is_some());
    });
}
