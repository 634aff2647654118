//! The backlog on a real server: dead letters, a throttled record, a graceful stop, a Redis
//! restart mid-run, and the stats against states built on purpose.

use redis_throttle::prelude::*;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis::streams::StreamRangeReply;
use redis_throttle::backlog::{Backlog, Outcome, Record, Worker, WorkerMetrics, WorkerOptions};
use redis_throttle::{Limiter, Quota, TryAcquire};
use throttle_e2e::{manager, within_async};
use throttle_testkit::{Flavor, Server};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

const FLAVOR: Flavor = Flavor::Redis82;
const MS: Duration = Duration::from_millis(1);
/// Bound on every wait for the workers: far above what each case needs.
const WAIT: Duration = Duration::from_secs(20);

type Calls = Arc<Mutex<Vec<(Record, Instant)>>>;

fn options() -> WorkerOptions {
    WorkerOptions::default()
        .block(Duration::from_millis(50))
        .backoff(Duration::from_millis(10))
}

/// Runs `worker` on a task of its own until its stop handle is used.
fn spawn<H, F>(
    worker: Worker<ConnectionManager, Limiter<ConnectionManager>>,
    handler: H,
) -> JoinHandle<WorkerMetrics>
where
    H: Fn(Record) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = Outcome> + Send + 'static,
{
    tokio::spawn(async move { worker.run(handler).await })
}

async fn stopped(handle: JoinHandle<WorkerMetrics>) -> WorkerMetrics {
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the worker stops")
        .expect("the worker task")
}

fn entries(con: &mut redis::Connection, stream: &str) -> StreamRangeReply {
    redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query(con)
        .expect("XRANGE")
}

fn field(entry: &redis::streams::StreamId, name: &str) -> String {
    entry
        .get::<String>(name)
        .unwrap_or_else(|| panic!("no field {name} in {entry:?}"))
}

/// A backlog of `stream` for the group "writers", on a connection of its own.
async fn backlog(url: &str, stream: &str) -> Backlog<ConnectionManager> {
    Backlog::new(manager(url).await, stream, "writers")
}

/// A limiter on `key`, on a connection of its own.
async fn limiter(url: &str, key: &str, quota: Quota) -> Limiter<ConnectionManager> {
    Limiter::new(manager(url).await, key, quota)
}

/// A handler that notes each record with the instant it came, and is done with it.
fn recording(calls: &Calls) -> impl Fn(Record) -> std::future::Ready<Outcome> + Send + Sync {
    let calls = Arc::clone(calls);
    move |record| {
        calls.lock().unwrap().push((record, Instant::now()));
        std::future::ready(Outcome::Done)
    }
}

/// Runs `worker` with a handler that holds each record until released, and returns once the
/// first record has reached it: the handle, and the release.
async fn spawn_holding_the_first_record(
    worker: Worker<ConnectionManager, Limiter<ConnectionManager>>,
) -> (JoinHandle<WorkerMetrics>, Arc<Notify>) {
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (on_start, on_release) = (Arc::clone(&started), Arc::clone(&release));
    let handle = spawn(worker, move |_record| {
        let (on_start, on_release) = (Arc::clone(&on_start), Arc::clone(&on_release));
        async move {
            on_start.notify_one();
            on_release.notified().await;
            Outcome::Done
        }
    });
    tokio::time::timeout(WAIT, started.notified())
        .await
        .expect("the first record reaches the handler");
    (handle, release)
}

/// "10 per second and 500 per minute" a call, and 100 tokens at 100 a second, on keys in the
/// hash tag `tag`.
async fn per_second_per_minute_and_tokens(
    url: &str,
    tag: &str,
) -> redis_throttle::MultiLimiter<ConnectionManager> {
    use redis_throttle::{MultiLimiter, Rate};

    MultiLimiter::builder()
        .limit(
            format!("{{{tag}}}:second"),
            Quota::new(10, 10u64).unwrap(),
            1,
        )
        .limit(
            format!("{{{tag}}}:minute"),
            Quota::new(500, Rate::per(500, Duration::from_secs(60))).unwrap(),
            1,
        )
        .per_token(
            format!("{{{tag}}}:tokens"),
            Quota::new(100, 100u64).unwrap(),
        )
        .build(manager(url).await)
        .unwrap()
}

/// A server, with a backlog `{tag}:orders` of `records` records of 3 tokens each, and the
/// [`per_second_per_minute_and_tokens`] limiter on `tag`.
async fn records_of_3_tokens_behind_a_multi_limiter(
    tag: &str,
    records: u64,
) -> (
    Server,
    Backlog<ConnectionManager>,
    redis_throttle::MultiLimiter<ConnectionManager>,
) {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, &format!("{tag}:orders")).await;
    for i in 0..records {
        backlog.push(format!("r{i}").into_bytes(), 3).await.unwrap();
    }
    let limiter = per_second_per_minute_and_tokens(&url, tag).await;
    (server, backlog, limiter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_fails_three_times_goes_to_the_dead_letters_with_its_error() {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "dl:orders").await;
    let poison = backlog
        .push_with_id("order-13", b"poison".to_vec(), 7)
        .await
        .unwrap();
    backlog
        .push_with_id("order-14", b"fine".to_vec(), 3)
        .await
        .unwrap();
    let limiter = limiter(&url, "dl:bucket", Quota::new(100, 100u64).unwrap()).await;
    let worker = Worker::new(backlog.clone(), "w1", limiter.clone()).options(options());
    let stop = worker.stop_handle();
    let calls: Calls = Arc::default();
    let seen = Arc::clone(&calls);
    let handle = spawn(worker, move |record| {
        let seen = Arc::clone(&seen);
        async move {
            let poisoned = record.payload == b"poison";
            seen.lock().unwrap().push((record, Instant::now()));
            if poisoned {
                Outcome::Failed {
                    error: "constraint violation: order 13".to_owned(),
                }
            } else {
                Outcome::Done
            }
        }
    });
    let mut con = server.conn();
    within_async("a dead letter and an empty queue", WAIT, || {
        (entries(&mut con, backlog.dead_letter_stream()).ids.len() == 1
            && entries(&mut con, backlog.stream()).ids.is_empty())
        .then_some(())
    })
    .await;
    stop.stop();
    let metrics = stopped(handle).await;
    assert_eq!(
        (metrics.done, metrics.retried, metrics.dead_lettered),
        (1, 2, 1),
        "{metrics:?}"
    );
    let tries = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(r, _)| r.id == "order-13")
        .count();
    assert_eq!(tries, 3, "the handler saw the poison record 3 times");

    let dead = entries(&mut con, backlog.dead_letter_stream());
    let letter = &dead.ids[0];
    assert_eq!(field(letter, "id"), "order-13");
    assert_eq!(field(letter, "entry"), poison);
    assert_eq!(field(letter, "cost"), "7");
    assert_eq!(field(letter, "payload"), "poison");
    assert_eq!(field(letter, "error"), "constraint violation: order 13");
    assert_eq!(field(letter, "attempts"), "3");

    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (
            stats.depth,
            stats.in_flight,
            stats.dead_letters,
            stats.queued_cost
        ),
        (0, 0, 1, 0),
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_pauses_the_bucket_for_every_worker_and_the_record_comes_again() {
    const PAUSE: Duration = Duration::from_millis(800);
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "th:orders").await;
    backlog
        .push_with_id("first", b"1".to_vec(), 1)
        .await
        .unwrap();
    // Plenty of tokens: only the pause can hold anything back.
    let quota = Quota::new(10, 100u64).unwrap();
    let limiter_1 = limiter(&url, "th:bucket", quota.clone()).await;
    let limiter_2 = limiter(&url, "th:bucket", quota).await;

    let calls: Calls = Arc::default();
    let handler = |calls: Calls| {
        move |record: Record| {
            let calls = Arc::clone(&calls);
            async move {
                let mut calls = calls.lock().unwrap();
                let again = calls.iter().any(|(r, _)| r.id == record.id);
                calls.push((record, Instant::now()));
                if again || calls.len() > 1 {
                    Outcome::Done
                } else {
                    // The database said 429 with Retry-After: 800 ms.
                    Outcome::Throttled { retry_after: PAUSE }
                }
            }
        }
    };
    let worker_1 = Worker::new(backlog.clone(), "w1", limiter_1).options(options());
    let stop_1 = worker_1.stop_handle();
    let handle_1 = spawn(worker_1, handler(Arc::clone(&calls)));
    within_async("the first call", WAIT, || {
        (!calls.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let throttled_at = calls.lock().unwrap()[0].1;

    // Another worker of the fleet, on its own connection, finds the bucket paused.
    let paused = tokio::time::timeout(WAIT, async {
        loop {
            match limiter_2.try_acquire().await.unwrap() {
                TryAcquire::Denied { retry_after } => break retry_after,
                // The pause call may not have landed yet.
                TryAcquire::Granted(_) => tokio::time::sleep(MS).await,
            }
        }
    })
    .await
    .expect("the pause lands");
    // At most the pause, plus the token worker 1 may already have reserved at its end
    // (10 ms at 100 a second).
    assert!(
        paused + throttled_at.elapsed() + 2 * MS >= PAUSE && paused <= PAUSE + 10 * MS,
        "the second limiter waits {paused:?}"
    );
    // And its worker waits it out too.
    backlog
        .push_with_id("second", b"2".to_vec(), 1)
        .await
        .unwrap();
    let worker_2 = Worker::new(backlog.clone(), "w2", limiter_2).options(options());
    let stop_2 = worker_2.stop_handle();
    let handle_2 = spawn(worker_2, handler(Arc::clone(&calls)));
    within_async("both records done", WAIT, || {
        (calls.lock().unwrap().len() == 3).then_some(())
    })
    .await;
    stop_1.stop();
    stop_2.stop();
    let (m1, m2) = (stopped(handle_1).await, stopped(handle_2).await);
    assert_eq!(m1.throttled + m2.throttled, 1, "{m1:?} {m2:?}");
    assert_eq!(m1.done + m2.done, 2, "{m1:?} {m2:?}");

    {
        let calls = calls.lock().unwrap();
        let ids: Vec<&str> = calls.iter().map(|(r, _)| r.id.as_str()).collect();
        assert_eq!(
            ids.iter().filter(|id| **id == "first").count(),
            2,
            "{ids:?}"
        );
        assert_eq!(
            ids.iter().filter(|id| **id == "second").count(),
            1,
            "{ids:?}"
        );
        // Nothing went to the database before the pause was over (the server's clock reads in
        // whole ms: 2 ms of slack).
        for (record, at) in &calls[1..] {
            assert!(
                *at + 2 * MS >= throttled_at + PAUSE,
                "{} was handled {:?} after the 429, inside the {PAUSE:?} pause",
                record.id,
                *at - throttled_at
            );
        }
    }
    let stats = backlog
        .stats(&limiter(&url, "th:bucket", Quota::new(10, 100u64).unwrap()).await)
        .await
        .unwrap();
    assert_eq!((stats.depth, stats.in_flight), (0, 0), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_hands_back_what_was_not_started_and_another_worker_gets_it_at_once() {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "gs:orders").await;
    let ids: Vec<String> = (0..10).map(|n| format!("r{n}")).collect();
    for id in &ids {
        backlog
            .push_with_id(id.as_str(), b"x".to_vec(), 1)
            .await
            .unwrap();
    }
    let limiter = limiter(&url, "gs:bucket", Quota::new(100, 100u64).unwrap()).await;
    // The default claim_idle (30 s): only a hand-back makes the records available sooner.
    let worker_1 = Worker::new(backlog.clone(), "w1", limiter.clone()).options(options().batch(10));
    let stop_1 = worker_1.stop_handle();
    let (handle_1, release) = spawn_holding_the_first_record(worker_1).await;
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (stats.depth, stats.in_flight),
        (10, 10),
        "read as a batch: {stats:?}"
    );
    // Stop while the handler is busy: it finishes that record and hands back the other 9.
    stop_1.stop();
    release.notify_one();
    let metrics_1 = stopped(handle_1).await;
    assert_eq!(
        (metrics_1.done, metrics_1.handed_back),
        (1, 9),
        "{metrics_1:?}"
    );
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (stats.depth, stats.in_flight, stats.queued_cost),
        (9, 9, 9),
        "{stats:?}"
    );

    let calls: Calls = Arc::default();
    let worker_2 = Worker::new(backlog.clone(), "w2", limiter.clone()).options(options());
    let stop_2 = worker_2.stop_handle();
    let began = Instant::now();
    let handle_2 = spawn(worker_2, recording(&calls));
    within_async("the 9 handed back", WAIT, || {
        (calls.lock().unwrap().len() == 9).then_some(())
    })
    .await;
    let took = began.elapsed();
    stop_2.stop();
    let metrics_2 = stopped(handle_2).await;
    assert!(
        took < Duration::from_secs(5),
        "claimed after {took:?}, not at once"
    );
    assert_eq!((metrics_2.claimed, metrics_2.done), (9, 9), "{metrics_2:?}");
    let calls = calls.lock().unwrap();
    let got: Vec<&str> = calls.iter().map(|(r, _)| r.id.as_str()).collect();
    assert_eq!(got, ids[1..].iter().map(String::as_str).collect::<Vec<_>>());
    // Read by w1 and handed back unhandled, which does not count: w2's is their first
    // delivery to a handler.
    assert!(calls.iter().all(|(r, _)| r.deliveries == 1), "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_8_2_restart_mid_run_loses_no_pushed_and_no_acknowledged_record() {
    restart_mid_run(Flavor::Redis82).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_7_0_restart_mid_run_loses_no_pushed_and_no_acknowledged_record() {
    restart_mid_run(Flavor::Redis70).await;
}

/// SIGKILL and a restart from the AOF (`appendfsync always`: a write is on disk before its
/// reply) while workers drain and the API pushes.
async fn restart_mid_run(flavor: Flavor) {
    let mut server = Server::builder(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let url = server.url();
    let conn = restart_manager(&url).await;
    let backlog = Backlog::new(conn.clone(), "rs:orders", "writers");
    // 200 records a second: the 600 take 3 s, and the restart lands in the middle.
    let quota = Quota::new(20, 200u64).unwrap();
    let pushed: Arc<Mutex<HashSet<String>>> = Arc::default();
    for n in 0..300 {
        let id = format!("p{n:04}");
        backlog
            .push_with_id(id.as_str(), b"x".to_vec(), 1)
            .await
            .unwrap();
        pushed.lock().unwrap().insert(id);
    }
    let stored: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut workers = Vec::new();
    for name in ["w1", "w2"] {
        let limiter = Limiter::new(restart_manager(&url).await, "rs:bucket", quota.clone());
        let backlog = Backlog::new(restart_manager(&url).await, "rs:orders", "writers");
        let worker = Worker::new(backlog, name, limiter)
            .options(options().claim_idle(Duration::from_millis(500)));
        let stop = worker.stop_handle();
        let stored = Arc::clone(&stored);
        let handle = spawn(worker, move |record| {
            let stored = Arc::clone(&stored);
            async move {
                // The database write: done before the worker acknowledges.
                stored.lock().unwrap().insert(record.id);
                Outcome::Done
            }
        });
        workers.push((stop, handle));
    }
    // The API keeps pushing through the restart; a push that failed is pushed again (it may
    // have landed: a duplicate, which the ids make harmless).
    let producer = {
        let (backlog, pushed) = (backlog.clone(), Arc::clone(&pushed));
        tokio::spawn(async move {
            for n in 300..600 {
                let id = format!("p{n:04}");
                let mut tries = 0;
                while let Err(err) = backlog.push_with_id(id.as_str(), b"x".to_vec(), 1).await {
                    tries += 1;
                    assert!(tries < 200, "push {id}: {err}");
                    tokio::time::sleep(20 * MS).await;
                }
                pushed.lock().unwrap().insert(id);
                tokio::time::sleep(2 * MS).await;
            }
        })
    };
    within_async("a third stored", WAIT, || {
        (stored.lock().unwrap().len() >= 200).then_some(())
    })
    .await;
    tokio::task::block_in_place(|| {
        server.kill();
        server.restart();
    });
    // Right after the restart: whatever left the queue (acknowledged) was stored first.
    let pushed_then = pushed.lock().unwrap().clone();
    let mut con = server.conn();
    let in_queue: HashSet<String> = entries(&mut con, "rs:orders")
        .ids
        .iter()
        .map(|e| field(e, "id"))
        .collect();
    let stored_then = stored.lock().unwrap().clone();
    assert!(
        stored_then.len() < 600 && !in_queue.is_empty(),
        "the restart came after the work: {} stored, {} queued",
        stored_then.len(),
        in_queue.len()
    );
    let acknowledged_unstored: Vec<&String> = pushed_then
        .difference(&in_queue)
        .filter(|id| !stored_then.contains(*id))
        .collect();
    assert!(
        acknowledged_unstored.is_empty(),
        "left the queue without being stored (lost in the restart): {acknowledged_unstored:?}"
    );

    tokio::time::timeout(WAIT, producer)
        .await
        .expect("the producer finishes")
        .expect("the producer");
    within_async("every pushed record stored", WAIT, || {
        stored
            .lock()
            .unwrap()
            .is_superset(&pushed.lock().unwrap())
            .then_some(())
    })
    .await;
    let mut con = server.conn();
    within_async("the queue empty", WAIT, || {
        entries(&mut con, "rs:orders").ids.is_empty().then_some(())
    })
    .await;
    for (stop, handle) in workers {
        stop.stop();
        stopped(handle).await;
    }
    assert_eq!(pushed.lock().unwrap().len(), 600);
    // The second start read the data back from the AOF.
    let log = server.log();
    assert!(log.contains("DB loaded from append only file"), "{log}");
}

/// Reconnects fast after the restart.
async fn restart_manager(url: &str) -> ConnectionManager {
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(100));
    redis::aio::ConnectionManager::new_with_config(redis::Client::open(url).unwrap(), config)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_against_known_states() {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "st:orders").await;
    // 20 tokens of burst, 10 a second: a token is 100 ms.
    let quota = Quota::new(20, 10u64).unwrap();
    let limiter = limiter(&url, "st:bucket", quota.clone()).await;

    let empty = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (
            empty.depth,
            empty.in_flight,
            empty.dead_letters,
            empty.queued_cost
        ),
        (0, 0, 0, 0)
    );
    assert_eq!((empty.oldest_age, empty.drain_time), (None, Duration::ZERO));

    let before = Instant::now();
    backlog
        .push_batch([
            (b"a".to_vec(), 10),
            (b"b".to_vec(), 20),
            (b"c".to_vec(), 30),
        ])
        .await
        .unwrap();
    tokio::time::sleep(100 * MS).await;
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (stats.depth, stats.in_flight, stats.queued_cost),
        (3, 0, 60),
        "{stats:?}"
    );
    // A full bucket of 20: the other 40 tokens at 100 ms each.
    assert_eq!(stats.drain_time, Duration::from_secs(4), "{stats:?}");
    let age = stats.oldest_age.expect("an oldest record");
    // The entry id's ms and TIME are the server's clock, in whole ms.
    assert!(
        age + MS >= 100 * MS && age <= before.elapsed() + MS,
        "{age:?} after {:?}",
        before.elapsed()
    );

    // A worker holding the first record (batch 1): one in flight, nothing finished yet.
    let worker = Worker::new(backlog.clone(), "w1", limiter.clone()).options(options().batch(1));
    let stop = worker.stop_handle();
    let (handle, release) = spawn_holding_the_first_record(worker).await;
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (stats.depth, stats.in_flight, stats.queued_cost),
        (3, 1, 60),
        "{stats:?}"
    );
    // Stopped before its handler returns: it finishes that record and reads no more.
    stop.stop();
    release.notify_one();
    let metrics = stopped(handle).await;
    assert_eq!((metrics.done, metrics.handed_back), (1, 0), "{metrics:?}");
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (
            stats.depth,
            stats.in_flight,
            stats.queued_cost,
            stats.dead_letters
        ),
        (2, 0, 50, 0),
        "{stats:?}"
    );

    // A bucket in debt: empty, then 10 tokens reserved ahead (a second of debt).
    let mut con = server.conn();
    let take = |con: &mut redis::Connection, tokens: u64, max_wait: u64| -> Vec<i64> {
        redis::cmd("THROTTLE.TAKE")
            .arg("st:debt")
            .arg(20)
            .arg(10)
            .arg("TOKENS")
            .arg(tokens)
            .arg("MAXWAIT")
            .arg(max_wait)
            .query(con)
            .expect("THROTTLE.TAKE")
    };
    let taken = Instant::now();
    assert_eq!(take(&mut con, 20, 0)[0], 1);
    assert_eq!(take(&mut con, 10, 5_000)[0], 1);
    let in_debt = self::limiter(&url, "st:debt", quota).await;
    let stats = backlog.stats(&in_debt).await.unwrap();
    // 50 tokens queued at 100 ms, after the 10 owed: 6 s, less the refill since the take.
    let ideal = Duration::from_secs(6);
    assert!(
        stats.drain_time <= ideal && stats.drain_time + taken.elapsed() + MS >= ideal,
        "{stats:?} ({:?} after the take)",
        taken.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// Cases that once went wrong.

/// A handler slower than `claim_idle`: another worker takes the record over and both
/// acknowledge it. Only the acknowledgement that counts takes the cost off the queue's, so it
/// goes to 0, not below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_finished_by_two_workers_takes_its_cost_off_once() {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "dc:orders").await;
    backlog.push(b"slow".to_vec(), 10).await.unwrap();
    let limiter = limiter(&url, "dc:bucket", Quota::new(100, 100u64).unwrap()).await;
    let fast = options().claim_idle(Duration::from_millis(100));
    let calls: Calls = Arc::default();
    let mut handles = Vec::new();
    for (name, pause) in [("slow", 400 * MS), ("fast", Duration::ZERO)] {
        let worker = Worker::new(backlog.clone(), name, limiter.clone()).options(fast);
        let stop = worker.stop_handle();
        let seen = Arc::clone(&calls);
        handles.push((
            stop,
            spawn(worker, move |record| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.lock().unwrap().push((record, Instant::now()));
                    tokio::time::sleep(pause).await;
                    Outcome::Done
                }
            }),
        ));
        // The slow one reads it first.
        tokio::time::sleep(20 * MS).await;
    }
    within_async("both handled it", WAIT, || {
        (calls.lock().unwrap().len() == 2).then_some(())
    })
    .await;
    tokio::time::sleep(500 * MS).await;
    for (stop, handle) in handles {
        stop.stop();
        stopped(handle).await;
    }
    let stats = backlog.stats(&limiter).await;
    assert!(
        matches!(&stats, Ok(s) if s.queued_cost == 0 && s.depth == 0),
        "{stats:?}"
    );
}

/// More than 4 294 967 295 tokens queued (bytes: 5 GB at 1 MB/s): the drain time does not
/// saturate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_time_of_more_than_four_billion_tokens() {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "big:uploads").await;
    // 5 GB queued against 1 MB/s with 1 MB of burst: 4 999 s.
    backlog.push(b"x".to_vec(), 5_000_000_000).await.unwrap();
    let limiter = limiter(
        &url,
        "big:bucket",
        Quota::new(1_000_000, 1_000_000u64).unwrap(),
    )
    .await;
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(stats.drain_time, Duration::from_secs(4_999), "{stats:?}");
}

/// A graceful stop while waiting for tokens hands the record back, and the next worker's claim
/// counts a delivery: the hand-back takes one off first, so three stops during a long wait (a
/// rolling deploy while the supplier has paused the fleet) do not send a record the handler
/// never saw to the dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_handed_back_at_stops_are_not_failures() {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "hb:orders").await;
    backlog.push(b"x".to_vec(), 1).await.unwrap();
    let limiter = limiter(&url, "hb:bucket", Quota::new(1, 1u64).unwrap()).await;
    // The supplier asked for a long pause: every worker waits for its tokens.
    limiter.pause(Duration::from_secs(60)).await.unwrap();
    let calls: Calls = Arc::default();
    for n in 0..4 {
        let worker =
            Worker::new(backlog.clone(), format!("w{n}"), limiter.clone()).options(options());
        let stop = worker.stop_handle();
        let handle = spawn(worker, recording(&calls));
        tokio::time::sleep(300 * MS).await;
        stop.stop();
        stopped(handle).await;
    }
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (stats.depth, stats.dead_letters),
        (1, 0),
        "never handled, yet dead-lettered: {stats:?}"
    );
}

/// "10 per second and 500 per minute" drains a backlog as a single limiter does: a worker on a
/// `MultiLimiter` handles every record, each record's cost taken from the per-token limit and
/// one call from the per-call ones; the stats' drain time comes from the tightest limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_drains_through_a_multi_limiter() {
    let (_server, backlog, limiter) = records_of_3_tokens_behind_a_multi_limiter("ml", 6).await;
    let before = backlog.stats(&limiter).await.unwrap();
    // Full buckets: 6 calls and 18 tokens fit in every limit at once.
    assert_eq!(
        (before.depth, before.queued_cost, before.drain_time),
        (6, 18, Duration::ZERO)
    );
    let worker = Worker::new(backlog.clone(), "w", limiter.clone()).options(options());
    let stop = worker.stop_handle();
    let done: Calls = Arc::default();
    let handler = recording(&done);
    let handle = tokio::spawn(async move { worker.run(handler).await });
    within_async("all six handled", WAIT, || {
        (done.lock().unwrap().len() == 6).then_some(())
    })
    .await;
    stop.stop();
    let metrics = tokio::time::timeout(WAIT, handle).await.unwrap().unwrap();
    assert_eq!(metrics.done, 6);
    let m = limiter.metrics();
    // One MTAKE per record, after the first stats' three PEEKs.
    assert_eq!((m.granted, m.round_trips), (6, 9), "{m:?}");
    let after = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (after.depth, after.queued_cost, after.drain_time),
        (0, 0, Duration::ZERO)
    );
}

/// 30 records of 3 tokens against 10 calls per second, 500 per minute and 100 tokens at
/// 100/s, all full: the per-second limit is the slowest (20 calls past its burst, 100 ms
/// each: 2 s), though the tokens (90) and the minute (30 calls) fit at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_time_of_a_multi_limiter_is_its_slowest_limit() {
    let (_server, backlog, limiter) = records_of_3_tokens_behind_a_multi_limiter("md", 30).await;
    let stats = backlog.stats(&limiter).await.unwrap();
    assert_eq!(
        (stats.depth, stats.queued_cost, stats.drain_time),
        (30, 90, Duration::from_secs(2))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_a_capped_limiter_hold_a_slot_while_their_handler_runs() {
    let server = Server::start(FLAVOR);
    let url = server.url();
    let backlog = backlog(&url, "cap:orders").await;
    for n in 0..12 {
        backlog
            .push_with_id(format!("r{n}").as_str(), b"x".to_vec(), 1)
            .await
            .unwrap();
    }
    // A rate that never binds; at most 2 calls in flight across the three workers.
    let limiter = Limiter::builder("cap:bucket", Quota::new(100, 100u64).unwrap())
        .max_in_flight(2)
        .build(manager(&url).await)
        .unwrap();
    let open = Arc::new(Mutex::new((0u32, 0u32, 0u32))); // (open now, most open, done)
    let mut handles = Vec::new();
    let mut stops = Vec::new();
    for name in ["w1", "w2", "w3"] {
        // One record at a time each, so that the three workers share them.
        let worker =
            Worker::new(backlog.clone(), name, limiter.clone()).options(options().batch(1));
        stops.push(worker.stop_handle());
        let open = Arc::clone(&open);
        handles.push(spawn(worker, move |_record| {
            let open = Arc::clone(&open);
            async move {
                {
                    let mut o = open.lock().unwrap();
                    o.0 += 1;
                    o.1 = o.1.max(o.0);
                }
                // Open until another handler is (bounded: the last record may be alone), so
                // that the cap is reached and the third worker must wait for a slot.
                let alone_until = Instant::now() + Duration::from_secs(2);
                while open.lock().unwrap().0 < 2 && Instant::now() < alone_until {
                    tokio::time::sleep(MS * 5).await;
                }
                tokio::time::sleep(MS * 30).await;
                let mut o = open.lock().unwrap();
                o.0 -= 1;
                o.2 += 1;
                Outcome::Done
            }
        }));
    }
    within_async("the 12 records", WAIT, || {
        (open.lock().unwrap().2 == 12).then_some(())
    })
    .await;
    for stop in &stops {
        stop.stop();
    }
    for handle in handles {
        stopped(handle).await;
    }
    let (_, most, done) = *open.lock().unwrap();
    assert_eq!(done, 12);
    assert_eq!(
        most, 2,
        "never more handlers at once than the cap, and the cap used"
    );
    assert!(
        limiter.metrics().in_flight.waits > 0,
        "a worker waited for a slot"
    );
}
