//! The partitioned limiter on paused tokio time, against an in-memory lease server: exact
//! instants, no real sleeps. What the real-server tests can only bound, this pins down:
//! - grants come one token interval apart from an empty start, across renewals, with no gap;
//! - when the server stops answering (a partition, a frozen link), grants stop at the lease's
//!   usable end, `sent + lease x (1 - 1 %) - 10 ms`, and not one grant after it;
//! - a deadline gives up at the deadline and takes nothing.

use redis_throttle::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, Pipeline, RedisFuture, Value};
use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::Error;
use redis_throttle::Quota;
use tokio::time::Instant;

/// A key's value and when it expires.
type Keys = HashMap<Vec<u8>, (Vec<u8>, Instant)>;

/// Keys with an owner and an expiry on tokio's clock; answers what the lease protocol sends.
#[derive(Clone, Default)]
struct FakeLeases {
    keys: Arc<Mutex<Keys>>,
    /// Every request from now on hangs, unanswered.
    silent: Arc<AtomicBool>,
}

impl FakeLeases {
    fn execute(&self, args: &[Vec<u8>]) -> Value {
        let now = Instant::now();
        let mut keys = self.keys.lock().unwrap();
        keys.retain(|_, (_, expires)| *expires > now);
        let ms = |bytes: &[u8]| -> u64 { String::from_utf8_lossy(bytes).parse().unwrap() };
        match args.first().map(Vec::as_slice) {
            Some(b"SET") => {
                let (key, value) = (&args[1], &args[2]);
                let nx = args.iter().any(|a| a == b"NX");
                let px = args
                    .iter()
                    .position(|a| a == b"PX")
                    .map(|i| ms(&args[i + 1]));
                if nx && keys.contains_key(key) {
                    return Value::Nil;
                }
                let expires = now + Duration::from_millis(px.unwrap_or(u64::MAX / 4));
                keys.insert(key.clone(), (value.clone(), expires));
                Value::Okay
            }
            Some(b"EVAL") => {
                let script = String::from_utf8_lossy(&args[1]);
                let key = &args[3];
                let ours = keys.get(key).is_some_and(|(owner, _)| *owner == args[4]);
                if script.contains("PEXPIRE") {
                    if ours {
                        keys.get_mut(key).unwrap().1 = now + Duration::from_millis(ms(&args[5]));
                    }
                    Value::Int(i64::from(ours))
                } else if script.contains("DEL") {
                    if ours {
                        keys.remove(key);
                    }
                    Value::Int(i64::from(ours))
                } else {
                    Value::Okay // the pause script: no pause in these tests
                }
            }
            Some(b"ROLE") => Value::Array(vec![
                Value::BulkString(b"master".to_vec()),
                Value::Int(0),
                Value::Array(vec![]),
            ]),
            Some(b"WAIT") => Value::Int(0),
            Some(b"MGET") => Value::Array(vec![Value::Nil, Value::Nil]),
            _ => Value::Nil,
        }
    }

    fn args(cmd: &Cmd) -> Vec<Vec<u8>> {
        cmd.args_iter()
            .map(|arg| match arg {
                Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect()
    }

    async fn answer<T>(&self, reply: T) -> T {
        if self.silent.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        reply
    }
}

impl ConnectionLike for FakeLeases {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let reply = self.execute(&Self::args(cmd));
        let fake = self.clone();
        Box::pin(async move { Ok(fake.answer(reply).await) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let replies: Vec<Value> = pipeline
            .cmd_iter()
            .map(|cmd| self.execute(&Self::args(cmd)))
            .collect();
        let fake = self.clone();
        Box::pin(async move { Ok(fake.answer(replies).await) })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// One partition of 2 tokens at 10/s (a token per 100 ms), leases of 1 s.
fn quota() -> PartitionedQuota {
    PartitionedQuota::builder("paused", Quota::new(2, 10u64).unwrap())
        .partitions(1)
        .lease(Duration::from_secs(1))
        .build()
        .unwrap()
}

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn grants_come_one_interval_apart_across_renewals() {
    let fake = FakeLeases::default();
    let limiter = PartitionedLimiter::builder(quota())
        .build(fake.clone())
        .unwrap();
    let start = Instant::now();
    for k in 1..=30u32 {
        let grant = limiter.acquire().await.unwrap();
        // Empty at the lease's start, then one token per 100 ms, renewals or not.
        assert_eq!(grant.at - start, 100 * k * MS, "grant {k}");
    }
    let m = limiter.metrics();
    assert_eq!(
        (m.granted, m.leases.acquired, m.leases.lapsed),
        (30, 1, 0),
        "{m:?}"
    );
    assert!(m.leases.renewed >= 8, "{m:?}");
}

#[tokio::test(start_paused = true)]
async fn unanswered_renewals_stop_the_grants_at_the_leases_usable_end() {
    let fake = FakeLeases::default();
    let limiter = PartitionedLimiter::builder(quota())
        .build(fake.clone())
        .unwrap();
    let start = Instant::now();
    let first = limiter.acquire().await.unwrap();
    assert_eq!(first.at - start, 100 * MS);
    // From now on the server answers nothing: the lease, sent at 0, is usable until
    // 1000 ms x 0.99 - 10 ms = 980 ms. Tokens at 200, ..., 900 ms; none at 1000 ms.
    fake.silent.store(true, Ordering::SeqCst);
    let mut grants = vec![first.at - start];
    loop {
        match limiter
            .acquire_with(Demand::call().within(Duration::from_secs(3)))
            .await
        {
            Ok(grant) => grants.push(grant.at - start),
            Err(Error::DeadlineExceeded { .. }) => break,
            Err(other) => panic!("{other}"),
        }
        assert!(grants.len() < 20, "{grants:?}");
    }
    let expected: Vec<Duration> = (1..=9).map(|k| 100 * k * MS).collect();
    assert_eq!(grants, expected);
    let m = limiter.metrics();
    assert_eq!((m.leases.lapsed, m.leases.held), (1, 0), "{m:?}");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_gives_up_on_time_and_takes_nothing() {
    let fake = FakeLeases::default();
    let limiter = PartitionedLimiter::builder(quota())
        .build(fake.clone())
        .unwrap();
    let start = Instant::now();
    let refused = limiter.acquire_with(Demand::call().within(50 * MS)).await;
    assert!(
        matches!(refused, Err(Error::DeadlineExceeded { .. })),
        "{refused:?}"
    );
    assert_eq!(start.elapsed(), 50 * MS);
    // The token due at 100 ms is still there for the next caller.
    let grant = limiter.acquire().await.unwrap();
    assert_eq!(grant.at - start, 100 * MS);
    assert_eq!(limiter.metrics().gave_up, 1);
}
