//! The client's overhead: `Limiter::acquire()` without contention (always granted at once, one
//! round trip) against the same `THROTTLE.TAKE ... MAXWAIT` sent as a bare command through the
//! same redis-rs connection, on a server of the test kit (loopback). The difference is what the
//! limiter adds: quota check, tracing span, reply parsing, counters, the policy.
//!
//! `cargo bench -p throttle-benches --bench client` (build the release module first:
//! `cargo build --release -p redis-throttle-module`); `cargo test` runs each once.

use redis_throttle::prelude::*;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use redis::aio::MultiplexedConnection;
use redis::Value;
use redis_throttle::{Limiter, Quota, Rate};
use throttle_benches::acquire_take;
use throttle_testkit::{Flavor, Server};

/// A bucket that never runs out here: a burst of 10^6, 10^9 tokens per second.
const CAPACITY: u64 = 1_000_000;
const RATE: u64 = 1_000_000_000;

fn round_trips(c: &mut Criterion) {
    let server = Server::start(Flavor::Redis82);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let conn: MultiplexedConnection = runtime
        .block_on(async {
            redis::Client::open(server.url())?
                .get_multiplexed_async_connection()
                .await
        })
        .expect("connect");
    let quota = Quota::new(CAPACITY, Rate::per_second(RATE)).expect("quota");
    let limiter = Limiter::new(conn.clone(), "bench:client:limiter", quota);

    // What acquire() sends, bare.
    let bare = acquire_take("bench:client:bare", CAPACITY, RATE).expect("the bench's quota");

    let mut group = c.benchmark_group("client");
    group.bench_function("bare_throttle_take", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut conn = conn.clone();
            let reply: Value = bare.query_async(&mut conn).await.expect("THROTTLE.TAKE");
            black_box(reply)
        })
    });
    group.bench_function("limiter_acquire", |b| {
        b.to_async(&runtime).iter(|| async {
            let grant = limiter.acquire().await.expect("acquire");
            assert_eq!(grant.round_trips, 1);
            black_box(grant)
        })
    });
    group.bench_function("limiter_try_acquire", |b| {
        b.to_async(&runtime).iter(|| async {
            let outcome = limiter.try_acquire().await.expect("try_acquire");
            assert!(outcome.is_granted());
            black_box(outcome)
        })
    });
    group.finish();
}

criterion_group!(benches, round_trips);
criterion_main!(benches);
