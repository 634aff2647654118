//! A server killed mid-run and restarted from its AOF, and a replica promoted after its
//! primary died: the buckets carry on from where they were, and the clients recover.
//!
//! Set `THROTTLE_LONG=1` for a longer run around the kill (4 s of traffic before it and 3 s
//! after recovery instead of 1 s each).

use redis_throttle::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_throttle::{Error, Limiter, Quota, TryAcquire};
use throttle_e2e::*;

throttle_e2e::per_server!(
    killed_and_restarted_from_the_aof,
    promoted_replica_carries_on
);

/// A reconnecting connection with short timeouts: a dead server is noticed at once (the
/// kernel refuses loopback connections to a closed port), a hung one within a second.
fn short_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(250)))
        .set_response_timeout(Some(Duration::from_secs(1)))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(50))
}

// ---------------------------------------------------------------------------------------
// SIGKILL and restart.

/// One bucket of the run, and the tasks acquiring on it.
struct Bucket {
    key: &'static str,
    capacity: u64,
    rate: u64,
    tasks: usize,
}

const BUCKETS: [Bucket; 3] = [
    // Busy buckets: 3 tasks each keep them empty.
    Bucket {
        key: "run:a",
        capacity: 5,
        rate: 20,
        tasks: 3,
    },
    Bucket {
        key: "run:b",
        capacity: 5,
        rate: 20,
        tasks: 3,
    },
    // Deep in debt: 10 tasks reserve up to 10 x 250 ms ahead, so at the kill the state is
    // more than a second in the future, longer than the server is down. A restart that
    // lost it would hand out a fresh burst at once.
    Bucket {
        key: "run:deep",
        capacity: 2,
        rate: 4,
        tasks: 10,
    },
];

/// A grant seen by a client: when `acquire()` was called and returned (after its sleep),
/// and how long it slept.
#[derive(Clone, Copy, Debug)]
struct Seen {
    started: Instant,
    at: Instant,
    slept: Duration,
    /// Set by `lag()` once the kill and restart instants are known.
    lag: Duration,
}

impl Seen {
    /// An upper bound on how much later than the token's instant the client saw it.
    ///
    /// The server read its clock after the call began, and no earlier than its own launch
    /// (`relaunched`) if it was the restarted server that answered, which it was for every
    /// call begun after the kill (no call in flight at the kill succeeds: the connection
    /// drops). The token is there `wait` after that reading; the client slept `wait`
    /// rounded up to the ms, and Redis 7.0's millisecond clock may read up to 1 ms behind.
    /// So the client sees the token at most `at - start - slept + 2 ms` after its instant.
    fn lag(&self, killed: Instant, relaunched: Instant) -> Duration {
        let start = if self.started > killed {
            self.started.max(relaunched)
        } else {
            self.started
        };
        (self.at.saturating_duration_since(start)).saturating_sub(self.slept)
            + Duration::from_millis(2)
    }
}

#[derive(Default)]
struct TaskLog {
    grants: Vec<Seen>,
    /// When each failed call returned, and its error.
    errors: Vec<(Instant, Error)>,
}

/// A task acquiring in a loop until `stop`; a failed call is followed by a 20 ms pause.
async fn acquire_loop(
    limiter: Limiter<ConnectionManager>,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<TaskLog>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(10), limiter.acquire())
            .await
            .unwrap_or_else(|_| panic!("an acquire on {} hung for 10 s", limiter.key()));
        let at = Instant::now();
        match result {
            Ok(grant) => log.lock().unwrap().grants.push(Seen {
                started,
                at,
                slept: grant.slept,
                lag: Duration::ZERO,
            }),
            Err(err) => {
                log.lock().unwrap().errors.push((at, err));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// AOF with `appendfsync always`; many tasks acquire on three buckets through one
/// reconnecting connection; SIGKILL mid-run, 500 ms down, restart. While down the calls
/// fail with `Error::Connection`; after the restart the same limiters get tokens again
/// without being rebuilt; no bucket grants more than its quota across the restart.
///
/// The check, per bucket: the module guarantees that the instants at which tokens are
/// usable (the server's clock at the take plus the wait it returned) never number more than
/// `capacity + rate * (t1 - t0)` in any `[t0, t1]`. A client sees a token at `at`, no
/// earlier than its instant and at most `lag` later (`Seen::lag`, measured per call). So in
/// every client window `[t0, t1]` the grants number at most
/// `capacity + rate * (t1 - t0 + lag)`, with the largest lag of the window's grants: the
/// tolerance is `rate * lag`. The server's wall clock (CLOCK_REALTIME) and the client's
/// `Instant` (CLOCK_MONOTONIC) are one machine's clocks and NTP slews both alike; only a
/// step of the wall clock during the run would come between them.
///
/// The restart adds nothing to it: with `appendfsync always` the AOF is written and fsynced
/// before the server sends the reply, so every grant a client saw is on disk, and the
/// server restarts with a state at least as late as the last one it replied with.
fn killed_and_restarted_from_the_aof(flavor: Flavor) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(kill_and_restart(flavor));
}

async fn kill_and_restart(flavor: Flavor) {
    let (before, after) = if long_mode() {
        (Duration::from_secs(4), Duration::from_secs(3))
    } else {
        (Duration::from_secs(1), Duration::from_secs(1))
    };
    let mut server = Server::builder(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let conn = manager_with(&server.url(), short_config()).await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let mut logs: Vec<Vec<Arc<Mutex<TaskLog>>>> = Vec::new();
    let t_start = Instant::now();
    for bucket in &BUCKETS {
        let quota = Quota::new(bucket.capacity, bucket.rate).unwrap();
        // One limiter per bucket, shared by its tasks (clones), never rebuilt.
        let limiter = Limiter::new(conn.clone(), bucket.key, quota);
        let mut bucket_logs = Vec::new();
        for _ in 0..bucket.tasks {
            let log = Arc::new(Mutex::new(TaskLog::default()));
            bucket_logs.push(Arc::clone(&log));
            tasks.push(tokio::spawn(acquire_loop(
                limiter.clone(),
                Arc::clone(&stop),
                log,
            )));
        }
        logs.push(bucket_logs);
    }

    tokio::time::sleep(before).await;
    // The states just before the kill (the run keeps moving them on).
    let pre_kill: Vec<Option<i64>> = tokio::task::block_in_place(|| {
        let mut con = server.conn();
        BUCKETS
            .iter()
            .map(|b| exists(&mut con, b.key).then(|| state(&mut con, b.key)))
            .collect()
    });
    let t_kill = Instant::now();
    tokio::task::block_in_place(|| server.kill());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t_restart_call = Instant::now();
    tokio::task::block_in_place(|| server.restart());
    let t_restart = Instant::now();

    // The AOF gave every bucket back at least the state it had before the kill.
    let (restored, server_now) = tokio::task::block_in_place(|| {
        let mut con = server.conn();
        let restored: Vec<Option<i64>> = BUCKETS
            .iter()
            .map(|b| exists(&mut con, b.key).then(|| state(&mut con, b.key)))
            .collect();
        (restored, server_time_ns(&mut con))
    });
    for ((bucket, pre), post) in BUCKETS.iter().zip(&pre_kill).zip(&restored) {
        match (pre, post) {
            (Some(pre), Some(post)) => assert!(
                post >= pre,
                "{}: the state went back from {pre} to {post} across the restart",
                bucket.key
            ),
            // Expired while down: only if it was full by now anyway.
            (Some(pre), None) => assert!(
                *pre <= server_now,
                "{}: the state {pre} (ahead of the clock {server_now}) was lost",
                bucket.key
            ),
            (None, _) => panic!("{}: no state before the kill", bucket.key),
        }
    }
    let deep_ahead_ms = (pre_kill[2].unwrap() - server_now) as f64 / 1e6;

    // Every task recovers by itself (bounded), then the run goes on a while.
    let recovered_by = Instant::now() + Duration::from_secs(15);
    loop {
        let all = logs.iter().flatten().all(|log| {
            log.lock()
                .unwrap()
                .grants
                .iter()
                .any(|g| g.started > t_kill)
        });
        if all {
            break;
        }
        assert!(
            Instant::now() < recovered_by,
            "{flavor}: not every task got a grant within 15 s of the restart"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(after).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("an acquire task panicked");
    }

    // Errors: only while the server was down or reconnecting, all of them connection errors.
    let mut errors = 0;
    let mut first_grant_after: Option<Instant> = None;
    for log in logs.iter().flatten() {
        let log = log.lock().unwrap();
        for (at, err) in &log.errors {
            errors += 1;
            assert!(
                matches!(err, Error::Connection(_)),
                "{flavor}: an error of the wrong kind: {err:?}"
            );
            assert!(
                *at >= t_kill,
                "{flavor}: an error before the kill, {:?} after the start: {err}",
                *at - t_start
            );
        }
        for grant in log.grants.iter().filter(|g| g.started > t_kill) {
            first_grant_after = Some(first_grant_after.map_or(grant.at, |t| t.min(grant.at)));
        }
        let last_error = log.errors.iter().map(|(at, _)| *at).max();
        if let Some(last_error) = last_error {
            assert!(
                log.grants.iter().any(|g| g.started > last_error),
                "{flavor}: a task did not get a grant after its last error"
            );
        }
    }
    assert!(
        errors > 0,
        "{flavor}: no call failed while the server was down"
    );
    let first_grant_after = first_grant_after.unwrap();
    let recovery = first_grant_after.saturating_duration_since(t_restart);
    let recovery_from_launch = first_grant_after.saturating_duration_since(t_restart_call);

    // No bucket granted more than its quota, in any window, the restart included.
    let mut report = Vec::new();
    for (bucket, bucket_logs) in BUCKETS.iter().zip(&logs) {
        let mut seen: Vec<Seen> = bucket_logs
            .iter()
            .flat_map(|log| log.lock().unwrap().grants.clone())
            .map(|mut s| {
                s.lag = s.lag(t_kill, t_restart_call);
                s
            })
            .collect();
        seen.sort_by_key(|s| s.at);
        let (worst, across) = check_run_windows(bucket, &seen, t_start, (t_kill, t_restart_call));
        let after_restart = seen.iter().filter(|s| s.at > t_restart).count();
        report.push(format!(
            "  {}: {} grants ({after_restart} after the restart)\n    closest window: \
             {worst}\n    closest across the restart: {across}",
            bucket.key,
            seen.len()
        ));
    }
    println!(
        "{flavor}: killed at {:.3} s, down {:?}, restart() took {:?}; {errors} calls failed \
         (all Error::Connection); first grant {recovery:?} after restart() returned \
         ({recovery_from_launch:?} after it was called); run:deep was {deep_ahead_ms:.0} ms \
         ahead of the clock when it came back\n{}",
        (t_kill - t_start).as_secs_f64(),
        t_restart_call - t_kill,
        t_restart - t_restart_call,
        report.join("\n")
    );
    assert!(
        deep_ahead_ms > 0.0,
        "run:deep was not in debt at the restart: the run does not test persistence"
    );
    assert!(
        recovery < Duration::from_secs(5),
        "{flavor}: recovery took {recovery:?}"
    );
}

/// Checks every window between two grants (sorted by `at`). Returns the window closest to
/// its bound, and the one closest among those spanning the kill and restart (`down`).
fn check_run_windows(
    bucket: &Bucket,
    seen: &[Seen],
    t_start: Instant,
    down: (Instant, Instant),
) -> (String, String) {
    let (cap, rate) = (bucket.capacity as f64, bucket.rate as f64);
    let mut worst: Option<(f64, String)> = None;
    let mut worst_across: Option<(f64, String)> = None;
    for i in 0..seen.len() {
        let mut lag = Duration::ZERO;
        for j in i..seen.len() {
            lag = lag.max(seen[j].lag);
            let span = (seen[j].at - seen[i].at).as_secs_f64();
            let count = (j - i + 1) as f64;
            let nominal = cap + rate * span;
            let tolerance = rate * lag.as_secs_f64();
            let describe = || {
                format!(
                    "[{:.3} s, {:.3} s]: {count} grants vs {cap} + {rate}/s x {span:.3} s = \
                     {nominal:.2}, tolerance {tolerance:.3} (lag {lag:.1?})",
                    (seen[i].at - t_start).as_secs_f64(),
                    (seen[j].at - t_start).as_secs_f64(),
                )
            };
            assert!(
                count <= nominal + tolerance + 1e-9,
                "{}: too many grants in {}",
                bucket.key,
                describe()
            );
            let margin = nominal + tolerance - count;
            if worst.as_ref().is_none_or(|(m, _)| margin < *m) {
                worst = Some((margin, describe()));
            }
            let across = seen[i].at < down.0 && seen[j].at > down.1;
            if across && worst_across.as_ref().is_none_or(|(m, _)| margin < *m) {
                worst_across = Some((margin, describe()));
            }
        }
    }
    let text = |w: Option<(f64, String)>| w.map_or_else(|| "(none)".to_owned(), |(_, t)| t);
    (text(worst), text(worst_across))
}

// ---------------------------------------------------------------------------------------
// Failover.

/// One bucket and its quota arguments.
const EMPTY: (&str, &str) = ("fo:empty", "3 0.01");
const HALF: (&str, &str) = ("fo:half", "10 0.01");
const DEBT: (&str, &str) = ("fo:debt", "2 0.01");
/// Busy: 20 per second, taken with `BUSY_TAKES` reservations at once, 8 s in debt, so the
/// state stays seconds ahead of the clock (and the key far from expiring) through the
/// failover.
const BUSY: (&str, &str) = ("fo:busy", "20 20");
const BUSY_TAKES: i64 = 180;
/// 0.01 tokens per second: one every 100 s.
const SLOW_INTERVAL_NS: i64 = 100_000_000_000;

/// What the primary showed of a bucket before it died.
struct View {
    state: i64,
    expire_at_ms: i64,
    peek: Reply,
}

fn view(con: &mut Connection, (key, quota): (&str, &str)) -> View {
    View {
        state: state(con, key),
        expire_at_ms: pexpiretime(con, key),
        peek: take(con, key, &format!("{quota} TOKENS 0")),
    }
}

/// Primary and replica, both with the module; traffic; `WAIT 1 1000`; SIGKILL the primary;
/// `REPLICAOF NO ONE`: the promoted replica has every bucket exactly as the primary left it
/// (the same state, the same expiry, the same `TOKENS 0` view up to the clock's movement),
/// and further takes continue from those states.
fn promoted_replica_carries_on(flavor: Flavor) {
    let mut primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(&primary).start();
    replica.wait_replica_synced(&primary);
    let mut p = primary.conn();

    // Emptied, half used, in debt by two reservations, and a busy one.
    for k in 1..=3 {
        assert_eq!(take(&mut p, EMPTY.0, EMPTY.1)[..2], [1, 3 - k]);
    }
    assert_eq!(take(&mut p, EMPTY.0, EMPTY.1)[..2], [0, 0]);
    assert_eq!(
        take(&mut p, HALF.0, &format!("{} TOKENS 4", HALF.1))[..2],
        [1, 6]
    );
    for k in 1..=4 {
        let reply = take(&mut p, DEBT.0, &format!("{} MAXWAIT 1000000", DEBT.1));
        assert_eq!(reply[..2], [1, (2 - k).max(0)], "{reply:?}");
    }
    // One pipeline: the 20 of the burst, then 160 within MAXWAIT 10 s (8 s of debt), all
    // granted however long the machine takes to send them (refills only make room).
    let mut pipe = redis::pipe();
    for _ in 0..BUSY_TAKES {
        pipe.add_command(line(&format!(
            "THROTTLE.TAKE {} {} MAXWAIT 10000",
            BUSY.0, BUSY.1
        )));
    }
    let busy: Vec<Value> = pipe
        .query(&mut p)
        .unwrap_or_else(|e| panic!("{BUSY_TAKES} reservations: {}", error_text(&e)));
    let busy_grants: i64 = busy.iter().map(|v| as_reply(v)[0]).sum();
    assert_eq!(busy_grants, BUSY_TAKES, "{busy:?}");

    let acked: i64 = query(&mut p, redis::cmd("WAIT").arg(1).arg(1000));
    assert_eq!(acked, 1, "WAIT 1 1000: the replica did not acknowledge");
    let seen_at = Instant::now();
    let before: Vec<View> = [EMPTY, HALF, DEBT, BUSY]
        .into_iter()
        .map(|b| view(&mut p, b))
        .collect();
    drop(p);
    primary.kill();

    let mut r = replica.conn();
    let _: () = query(&mut r, redis::cmd("REPLICAOF").arg("NO").arg("ONE"));
    let replication = info(&mut r, "replication");
    assert_eq!(info_field(&replication, "role"), Some("master"));
    let after: Vec<View> = [EMPTY, HALF, DEBT, BUSY]
        .into_iter()
        .map(|b| view(&mut r, b))
        .collect();
    let moved_ms = slack_ms(seen_at);

    for (bucket, (b, a)) in [EMPTY, HALF, DEBT, BUSY]
        .iter()
        .zip(before.iter().zip(&after))
    {
        let key = bucket.0;
        assert_eq!(a.state, b.state, "{key}: the promoted replica's state");
        assert_eq!(a.expire_at_ms, b.expire_at_ms, "{key}: its expiry");
        // TOKENS 0: the same whole tokens (the slow buckets cannot gain one in the few ms
        // between the two views, the busy one is seconds in debt), a reset up to the time
        // that passed lower, never higher.
        assert_eq!(a.peek[..3], b.peek[..3], "{key}: TOKENS 0");
        assert!(
            (b.peek[3] - moved_ms..=b.peek[3]).contains(&a.peek[3]),
            "{key}: reset {} ms on the promoted replica, {} ms on the primary {moved_ms} ms \
             earlier",
            a.peek[3],
            b.peek[3]
        );
    }

    // Further takes continue from those states.
    let reply = take(&mut r, EMPTY.0, EMPTY.1);
    assert_eq!(
        reply[..2],
        [0, 0],
        "the emptied bucket is still empty: {reply:?}"
    );
    assert!(reply[2] > 90_000, "{reply:?}");
    let reply = take(&mut r, HALF.0, &format!("{} TOKENS 6", HALF.1));
    assert_eq!(reply[..3], [1, 0, 0], "the other 6 of the half-used bucket");
    assert_eq!(take(&mut r, HALF.0, HALF.1)[0], 0);
    let reply = take(&mut r, DEBT.0, &format!("{} MAXWAIT 1000000", DEBT.1));
    assert_eq!(reply[0], 1, "{reply:?}");
    assert_eq!(
        state(&mut r, DEBT.0),
        before[2].state + SLOW_INTERVAL_NS,
        "a reservation on the bucket in debt goes one interval past the primary's state"
    );

    // Through the client too: a limiter on the new primary sees the emptied bucket.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let limiter = Limiter::new(
            manager_with(&replica.url(), short_config()).await,
            EMPTY.0,
            Quota::new(3, 0.01).unwrap(),
        );
        match limiter.try_acquire().await {
            Ok(TryAcquire::Denied { retry_after }) => {
                assert!(retry_after > Duration::from_secs(90), "{retry_after:?}")
            }
            other => panic!("try_acquire on the emptied bucket: {other:?}"),
        }
    });
    println!(
        "{flavor}: the promoted replica had the primary's 4 buckets ({busy_grants} busy grants \
         before the kill), views {moved_ms} ms apart"
    );
}

/// The window check itself: a third token 100 ms after a burst of 2 at 4/s (where the
/// bucket allows 2 + 0.4) fails it, however the grants are ordered.
#[test]
#[should_panic(expected = "too many grants")]
fn the_window_check_catches_an_extra_grant() {
    let bucket = Bucket {
        key: "synthetic",
        capacity: 2,
        rate: 4,
        tasks: 1,
    };
    let t = Instant::now();
    let seen: Vec<Seen> = [0, 1, 100]
        .into_iter()
        .map(|ms| Seen {
            started: t,
            at: t + Duration::from_millis(ms),
            slept: Duration::ZERO,
            lag: Duration::from_millis(2),
        })
        .collect();
    check_run_windows(&bucket, &seen, t, (t, t));
}
