//! A fleet-wide cap on calls in flight, end to end on the four servers (each with one of the
//! three backends): 4 OS processes of 50 callers never have more than the cap open at a
//! supplier that counts its open calls itself; a SIGKILLed holder's slots come back when their
//! leases run out, not before; a frozen (SIGSTOP) holder loses its slot to a newer holder and
//! its late renewal or release never touches the newer one's; a cancelled waiting call holds
//! nothing; a `MultiLimiter`'s slot is held in its first limit's bucket; a waiter that
//! listens takes again when another process's release is announced, not on a timer.
//!
//! Timing on a shared machine: what the server decides (the cap, a slot not free before its
//! lease ends) is checked exactly; how soon after a slot is free a waiter gets it, loosely.

use redis_throttle::prelude::*;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_throttle::partitioned::{PartitionedLimiter, PartitionedQuota};
use redis_throttle::{
    Announcements, Backend, Limiter, LimiterBuilder, MultiLimiter, Quota, TryAcquire,
};
use throttle_e2e::at_once::most_held_at_once;
use throttle_e2e::contract::in_flight::{self as contract, Table};
use throttle_e2e::{
    backend_named, backend_on, multiplexed, poll, runtime, within_async, Flavor, Server,
};
use throttle_testkit::ChildTest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

const CAP: u64 = 8;
const PROCESSES: usize = 4;
const CALLERS: usize = 50;
const CALLS_EACH: usize = 2;
const TOTAL: usize = PROCESSES * CALLERS * CALLS_EACH;
/// How long a worker process may run; the run needs about 8 s on an idle machine.
const WORKER_DEADLINE: Duration = Duration::from_secs(180);
/// A waiter looks again at least every 50 ms for a slot freed in another process; beyond
/// that, how late it may be on a loaded machine.
const LOOSE: Duration = Duration::from_secs(2);

const URL: &str = "THROTTLE_IF_URL";
const ROLE: &str = "THROTTLE_IF_ROLE";
const SUPPLIER: &str = "THROTTLE_IF_SUPPLIER";
const BACKEND: &str = "THROTTLE_IF_BACKEND";
const SEED: &str = "THROTTLE_IF_SEED";

/// A thousand tokens a second on `key`: the slots, not the tokens, hold calls back here.
fn capped(key: &str, cap: u64, lease: Duration, backend: Backend) -> LimiterBuilder {
    Limiter::builder(key, Quota::new(1_000, 1_000u64).unwrap())
        .backend(backend)
        .max_in_flight(cap)
        .slot_lease(lease)
}

/// [`capped`], built on `conn`.
fn limiter<C: 'static>(
    conn: C,
    key: &str,
    cap: u64,
    lease: Duration,
    backend: Backend,
) -> Limiter<C> {
    capped(key, cap, lease, backend).build(conn).unwrap()
}

/// Two processes on `key` capped at 1 with a lease of 10 s (each its connection): a holder,
/// and a waiter that listens (its subscription) and waits at most `max_wait`.
async fn listening(
    url: &str,
    key: &str,
    backend: Backend,
    max_wait: Duration,
) -> (
    Limiter<MultiplexedConnection>,
    Limiter<MultiplexedConnection>,
    Announcements,
) {
    let lease = Duration::from_secs(10);
    let holder = limiter(multiplexed(url).await, key, 1, lease, backend);
    let announcements = Announcements::new(redis::Client::open(url).unwrap()).unwrap();
    let waiter = capped(key, 1, lease, backend)
        .max_wait(max_wait)
        .listen(&announcements)
        .build(multiplexed(url).await)
        .unwrap();
    (holder, waiter, announcements)
}

/// `THROTTLE.SLOTS key 1000 1000`: slots held, ms until the first lease ends.
fn slots(server: &Server, key: &str) -> (u64, u64) {
    redis::cmd("THROTTLE.SLOTS")
        .arg(key)
        .arg(1_000)
        .arg(1_000)
        .query(&mut server.conn())
        .unwrap()
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for a worker"))
}

/// A supplier that counts its open calls itself: each connection is a call, which it holds
/// open for the milliseconds the caller names, then answers and closes. It counts a call as
/// open from the moment it reads the request until just before it answers.
struct Supplier {
    addr: String,
    /// (open now, most ever open, calls served)
    counts: Arc<Mutex<(u64, u64, u64)>>,
}

impl Supplier {
    fn start(calls: usize) -> Supplier {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let counts = Arc::new(Mutex::new((0, 0, 0)));
        let shared = Arc::clone(&counts);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(calls) {
                let Ok(stream) = stream else { continue };
                let counts = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &counts));
            }
        });
        Supplier { addr, counts }
    }

    fn counts(&self) -> (u64, u64, u64) {
        *self.counts.lock().unwrap()
    }
}

fn serve(stream: TcpStream, counts: &Mutex<(u64, u64, u64)>) {
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return;
    }
    let ms: u64 = line.trim().parse().unwrap_or(0).min(5_000);
    {
        let mut c = counts.lock().unwrap();
        c.0 += 1;
        c.1 = c.1.max(c.0);
    }
    std::thread::sleep(Duration::from_millis(ms));
    {
        let mut c = counts.lock().unwrap();
        c.0 -= 1;
        c.2 += 1;
    }
    let _ = (&stream).write_all(b"ok\n");
}

/// One call to the supplier, lasting `ms`: connect, ask, read the answer to its end.
async fn call_supplier(addr: &str, ms: u64) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("{ms}\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"ok\n");
}

/// Run as a worker process by the tests below (the role in `THROTTLE_IF_ROLE`); without it, as a
/// normal test, it does nothing.
#[test]
fn worker_process() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let url = env(URL);
    let backend = backend_named(&env(BACKEND));
    runtime().block_on(async move {
        match role.as_str() {
            "fleet" => fleet_worker(&url, backend).await,
            "hold" => hold_worker(&url, backend).await,
            "freeze" => freeze_worker(&url, backend).await,
            other => panic!("no role {other}"),
        }
    });
}

/// 50 callers, each making two calls of 1 to 120 ms (one in 25 of 2 s) to the supplier,
/// holding a slot of `fleet` for each.
async fn fleet_worker(url: &str, backend: Backend) {
    let supplier = env(SUPPLIER);
    let seed: u64 = env(SEED).parse().unwrap();
    // Listening, as a fleet would: a waiter takes again when a release is announced.
    let announcements = Announcements::new(redis::Client::open(url).unwrap()).unwrap();
    let limiter = capped("fleet", CAP, Duration::from_secs(2), backend)
        .listen(&announcements)
        .build(multiplexed(url).await)
        .unwrap();
    let callers: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let limiter = limiter.clone();
            let supplier = supplier.clone();
            let mut rng = fastrand::Rng::with_seed(seed * 1_000 + caller as u64);
            tokio::spawn(async move {
                for _ in 0..CALLS_EACH {
                    let ms = if rng.u32(0..25) == 0 {
                        2_000
                    } else {
                        rng.u64(1..=120)
                    };
                    let grant = limiter.acquire().await.unwrap();
                    assert!(grant.slot().is_some());
                    call_supplier(&supplier, ms).await;
                    drop(grant);
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    // The last releases are tasks of their own: a process that ends before they are answered
    // leaves those slots to their leases.
    within_async("the last releases", Duration::from_secs(30), || {
        let m = limiter.metrics().in_flight;
        (m.released + m.leases_lost == (CALLERS * CALLS_EACH) as u64).then_some(())
    })
    .await;
    let m = limiter.metrics();
    println!(
        "\nDONE {} waits {} lost {} round trips {} in line {} heard handed {}",
        m.granted,
        m.in_flight.waits,
        m.in_flight.leases_lost,
        m.round_trips,
        m.in_flight.joined_line,
        m.in_flight.heard_handed
    );
}

/// Holds 3 slots of `killed` until killed.
async fn hold_worker(url: &str, backend: Backend) {
    let limiter = limiter(
        multiplexed(url).await,
        "killed",
        3,
        Duration::from_secs(2),
        backend,
    );
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(limiter.acquire().await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(held);
}

/// Holds the one slot of `frozen` (its id in `frozen:slot`) until `frozen:thawed` is set and a
/// renewal has found the slot gone, then drops the grant and says how many leases it lost.
async fn freeze_worker(url: &str, backend: Backend) {
    let mut conn = multiplexed(url).await;
    let limiter = limiter(
        conn.clone(),
        "frozen",
        1,
        Duration::from_millis(600),
        backend,
    );
    let grant = limiter.acquire().await.unwrap();
    let id = grant.slot().unwrap();
    let _: () = redis::cmd("SET")
        .arg("frozen:slot")
        .arg(id)
        .query_async(&mut conn)
        .await
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    while Instant::now() < give_up && limiter.metrics().in_flight.leases_lost == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(grant);
    // Let the keeping task see the grant go (it sends nothing: the slot is gone).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = limiter.metrics();
    println!(
        "\nLOST {} held {} trips {}",
        m.in_flight.leases_lost, m.in_flight.held, m.round_trips
    );
}

fn spawn_worker(
    role: &str,
    server: &Server,
    backend: Backend,
    extra: &[(&str, String)],
) -> ChildTest {
    let mut env = vec![
        (ROLE, role.to_owned()),
        (URL, server.url()),
        (BACKEND, backend.name().to_owned()),
    ];
    env.extend(extra.iter().cloned());
    ChildTest::spawn("worker_process", &env)
}

fn never_more_than_the_cap_in_flight(flavor: Flavor) {
    let server = Server::start(flavor);
    let backend = backend_on(flavor);
    let supplier = Supplier::start(TOTAL);
    let deadline = std::time::Instant::now() + WORKER_DEADLINE;
    let mut workers: Vec<_> = (0..PROCESSES)
        .map(|p| {
            spawn_worker(
                "fleet",
                &server,
                backend,
                &[(SUPPLIER, supplier.addr.clone()), (SEED, p.to_string())],
            )
        })
        .collect();
    let (mut waits, mut round_trips) = (0, 0);
    for worker in &mut workers {
        let out = worker.finish_ok(deadline);
        let line = out.lines().find(|l| l.starts_with("DONE")).unwrap();
        println!("{line}");
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[1], (CALLERS * CALLS_EACH).to_string(), "{line}");
        assert_eq!(words[5], "0", "no lease ran out: {line}");
        waits += words[3].parse::<u64>().unwrap();
        round_trips += words[8].parse::<u64>().unwrap();
    }
    let (open, most, served) = supplier.counts();
    println!(
        "{flavor} {backend:?}: {served} calls, at most {most} open at once (cap {CAP}), \
         {waits} waits for a slot, {:.2} round trips per call (renewals and releases included)",
        round_trips as f64 / served as f64
    );
    assert_eq!(served, TOTAL as u64, "every call reached the supplier");
    assert_eq!(open, 0);
    assert!(
        most <= CAP,
        "{most} calls open at once, above the cap of {CAP}"
    );
    assert_eq!(most, CAP, "200 callers fill the cap");
    assert!(waits > 0, "callers waited for a slot");
    // Every slot released: none left for its lease to free.
    assert_eq!(slots(&server, "fleet"), (0, 0));
}

fn a_killed_holders_slots_free_when_their_leases_end(flavor: Flavor) {
    let server = Server::start(flavor);
    let backend = backend_on(flavor);
    let mut holder = spawn_worker("hold", &server, backend, &[]);
    let held = poll(Duration::from_secs(60), || {
        (slots(&server, "killed").0 == 3).then_some(())
    });
    assert!(held.is_some(), "the holder took its 3 slots");
    runtime().block_on(async {
        let limiter = limiter(
            multiplexed(&server.url()).await,
            "killed",
            3,
            Duration::from_secs(2),
            backend,
        );
        assert!(matches!(
            limiter.try_acquire().await.unwrap(),
            TryAcquire::Denied { .. }
        ));
        let start = Instant::now();
        holder.kill();
        let (held, first_ms) = slots(&server, "killed");
        assert_eq!(held, 3, "a dead holder frees nothing");
        let grant = limiter.acquire().await.unwrap();
        let waited = start.elapsed();
        println!("{flavor}: the first lease ended in {first_ms} ms; granted after {waited:?}");
        assert!(
            waited + Duration::from_millis(1) >= Duration::from_millis(first_ms),
            "granted after {waited:?}, before the first lease ended ({first_ms} ms)"
        );
        assert!(
            waited <= Duration::from_millis(first_ms) + LOOSE,
            "granted {waited:?} after the kill, the lease ended in {first_ms} ms"
        );
        assert!(grant.slot().is_some());
    });
}

fn a_frozen_holders_late_calls_never_touch_a_newer_slot(flavor: Flavor) {
    let server = Server::start(flavor);
    let backend = backend_on(flavor);
    let mut holder = spawn_worker("freeze", &server, backend, &[]);
    let child_slot: u64 = poll(Duration::from_secs(60), || {
        redis::cmd("GET")
            .arg("frozen:slot")
            .query::<Option<u64>>(&mut server.conn())
            .unwrap()
    })
    .expect("the holder took its slot");
    holder.freeze();
    runtime().block_on(async {
        let limiter = limiter(
            multiplexed(&server.url()).await,
            "frozen",
            1,
            Duration::from_millis(600),
            backend,
        );
        let grant = limiter.acquire().await.unwrap();
        let ours = grant.slot().unwrap();
        assert_ne!(ours, child_slot, "ids are never given twice");
        // The frozen holder's release, late: it frees nothing of ours.
        let released: u64 = redis::cmd("THROTTLE.RELEASE")
            .arg("frozen")
            .arg(1_000)
            .arg(1_000)
            .arg(child_slot)
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(released, 0);
        holder.thaw();
        let out = holder.finish_ok(std::time::Instant::now() + WORKER_DEADLINE);
        let line = out.lines().find(|l| l.starts_with("LOST")).unwrap();
        assert!(line.starts_with("LOST 1 held 0"), "{line}");
        // Ours is still held, and renewed: held for three of its leases more.
        tokio::time::sleep(Duration::from_millis(1_800)).await;
        assert_eq!(slots(&server, "frozen").0, 1, "our slot is still held");
        assert_eq!(limiter.metrics().in_flight.leases_lost, 0);
        drop(grant);
        within_async("our release", Duration::from_secs(10), || {
            (slots(&server, "frozen") == (0, 0)).then_some(())
        })
        .await;
    });
}

/// The three limiters on `url`, each capped at 1 with a lease of 5 s, and the tables of their
/// slots (the `MultiLimiter`'s first key's, the partitioned quota's own `{name}:inflight`).
async fn capped_at_one(
    url: &str,
    backend: Backend,
) -> (
    Limiter<MultiplexedConnection>,
    MultiLimiter<MultiplexedConnection>,
    PartitionedLimiter<MultiplexedConnection>,
) {
    let lease = Duration::from_secs(5);
    let multi = MultiLimiter::builder()
        .limit("{m}:first", Quota::new(1_000, 1_000u64).unwrap(), 1)
        .limit("{m}:second", Quota::new(1_000, 1_000u64).unwrap(), 1)
        .backend(backend)
        .max_in_flight(1)
        .slot_lease(lease)
        .build(multiplexed(url).await)
        .unwrap();
    let quota = PartitionedQuota::builder("p", Quota::new(1_000, 1_000u64).unwrap())
        .partitions(2)
        .lease(Duration::from_secs(2))
        .build()
        .unwrap();
    let partitioned = PartitionedLimiter::builder(quota)
        .backend(backend)
        .max_in_flight(1)
        .slot_lease(lease)
        .build(multiplexed(url).await)
        .unwrap();
    let single = limiter(multiplexed(url).await, "single", 1, lease, backend);
    (single, multi, partitioned)
}

fn table<'a>(server: &'a Server, key: &'a str) -> Table<'a> {
    Table {
        server,
        key,
        capacity: 1_000,
        rate: 1_000,
    }
}

/// Each limiter holds its slot in its table (a `MultiLimiter`'s in its first limit's bucket,
/// taken with every limit's tokens: the same from the module, the library and the script),
/// and releases it there.
fn a_slot_is_held_in_its_table_and_released_there(flavor: Flavor) {
    let server = Server::start(flavor);
    runtime().block_on(async {
        let (single, multi, partitioned) = capped_at_one(&server.url(), backend_on(flavor)).await;
        let (first, second) = (table(&server, "{m}:first"), table(&server, "{m}:second"));
        contract::a_slot_is_held_in_its_table_and_released_there(
            &single,
            &table(&server, "single"),
            &[],
            flavor,
        )
        .await;
        contract::a_slot_is_held_in_its_table_and_released_there(&multi, &first, &[second], flavor)
            .await;
        contract::a_slot_is_held_in_its_table_and_released_there(
            &partitioned,
            &table(&server, "{p}:inflight"),
            &[],
            flavor,
        )
        .await;
        partitioned.shutdown().await.unwrap();
    });
}

fn a_cancelled_wait_holds_nothing(flavor: Flavor) {
    let server = Server::start(flavor);
    runtime().block_on(async {
        let (single, multi, partitioned) = capped_at_one(&server.url(), backend_on(flavor)).await;
        contract::a_cancelled_wait_holds_nothing(&single, &table(&server, "single"), flavor).await;
        contract::a_cancelled_wait_holds_nothing(&multi, &table(&server, "{m}:first"), flavor)
            .await;
        contract::a_cancelled_wait_holds_nothing(
            &partitioned,
            &table(&server, "{p}:inflight"),
            flavor,
        )
        .await;
        partitioned.shutdown().await.unwrap();
    });
}

/// Two processes (each its connection; the waiter its subscription): the waiter, in the
/// server's line for the one slot, hears the holder's release hand it over and goes ahead with
/// no take of its own. The first lease ends in 10 s and a listening waiter looks on its own
/// only to keep its place (every 5 s).
fn a_release_in_another_process_wakes_a_listening_waiter(flavor: Flavor) {
    let server = Server::start(flavor);
    let backend = backend_on(flavor);
    let url = server.url();
    runtime().block_on(async {
        let (holder, waiter, announcements) =
            listening(&url, "heard", backend, redis_throttle::DEFAULT_MAX_WAIT).await;
        contract::a_release_elsewhere_wakes_a_listening_waiter(
            &holder,
            &waiter,
            1,
            &announcements,
            flavor,
        )
        .await;
    });
}

/// A waiter's call, refused throughout (`what` held its slot), gave up at its deadline, having
/// cost it `takes` takes: at most `most`.
fn gave_up_after_a_few_takes(
    result: Result<redis_throttle::Grant, redis_throttle::Error>,
    takes: u64,
    most: u64,
    what: &str,
    flavor: Flavor,
) {
    assert!(
        matches!(result, Err(redis_throttle::Error::DeadlineExceeded { .. })),
        "{flavor}: {what}: {result:?}"
    );
    println!("{flavor}: {what} cost the waiter {takes} takes");
    assert!(takes <= most, "{flavor}: {what}: {takes} takes");
}

/// Anyone with publish rights on a quota's channel can send `freed`: 200 of them, 5 ms apart,
/// to a waiter whose slot is held for 10 s cost it a few takes (each wake that finds no slot
/// makes the next one count only after a longer gap, up to 50 ms), not one take each.
fn forged_releases_cost_a_waiter_a_few_takes(flavor: Flavor) {
    let server = Server::start(flavor);
    let backend = backend_on(flavor);
    let url = server.url();
    runtime().block_on(async {
        let (holder, waiter, announcements) =
            listening(&url, "flood", backend, Duration::from_secs(2)).await;
        assert!(
            announcements.ready(Duration::from_secs(10)).await,
            "{flavor}: subscribed"
        );
        waiter.peek().await.unwrap();
        let _held = holder.acquire().await.unwrap();
        let before = waiter.metrics().round_trips;
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.acquire().await })
        };
        let mut admin = multiplexed(&url).await;
        for _ in 0..200 {
            let _: i64 = redis::cmd("SPUBLISH")
                .arg("throttle:pause:{flood}")
                .arg("freed")
                .query_async(&mut admin)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let result = waiting.await.unwrap();
        let takes = waiter.metrics().round_trips - before;
        // 1 s of messages and 2 s of wait: at most about 40 wakes at 50 ms apart, and a look
        // a second; 200 before.
        gave_up_after_a_few_takes(result, takes, 60, "200 forged releases", flavor);
    });
}

/// A slot table that can issue no id (its next id at the largest, 2^53: a forged state) refuses
/// every take with a wait of 0: a waiter looks again as a poll does, doubling to 50 ms, and
/// does not spin.
fn a_table_that_names_no_wait_is_not_spun_on(flavor: Flavor) {
    let server = Server::start(flavor);
    let backend = backend_on(flavor);
    let url = server.url();
    runtime().block_on(async {
        let now_ns = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap();
        let last_id: u64 = 1 << 53;
        // The 32-byte form (full now, no pause, no cut), the next id, one slot for 10 minutes.
        let mut state = Vec::new();
        state.extend_from_slice(&now_ns.to_le_bytes());
        state.extend_from_slice(&[0; 24]);
        state.extend_from_slice(&last_id.to_le_bytes());
        state.extend_from_slice(&(last_id - 1).to_le_bytes());
        state.extend_from_slice(&(now_ns + 600_000_000_000).to_le_bytes());
        let _: () = redis::cmd("SET")
            .arg("forged-table")
            .arg(&state)
            .query(&mut server.conn())
            .unwrap();
        let waiter = Limiter::builder("forged-table", Quota::new(1_000, 1_000u64).unwrap())
            .backend(backend)
            .max_in_flight(2)
            .max_wait(Duration::from_secs(1))
            .build(multiplexed(&url).await)
            .unwrap();
        waiter.peek().await.unwrap();
        let before = waiter.metrics().round_trips;
        let result = waiter.acquire().await;
        let takes = waiter.metrics().round_trips - before;
        // 2, 4, 8, 16, 32 ms, then every 50 ms: about 25 in a second.
        gave_up_after_a_few_takes(result, takes, 40, "a table with no id left", flavor);
    });
}

/// Two partitioned limiters (two processes, as far as the server can tell) under one cap of 3:
/// 40 calls of 1 to 20 ms at once never hold more than 3 grants at a time, every one served;
/// the slots live in the quota's own bucket, `{name}:inflight`, and are all released after.
fn a_partitioned_limiters_cap_holds_across_processes(flavor: Flavor) {
    let server = Server::start(flavor);
    let backend = backend_on(flavor);
    let url = server.url();
    runtime().block_on(async {
        let quota = PartitionedQuota::builder("pq", Quota::new(40, 400u64).unwrap())
            .partitions(4)
            .lease(Duration::from_secs(2))
            .build()
            .unwrap();
        let mut limiters = Vec::new();
        for _ in 0..2 {
            limiters.push(
                PartitionedLimiter::builder(quota.clone())
                    .backend(backend)
                    .max_in_flight(3)
                    .slot_lease(Duration::from_secs(5))
                    .build(multiplexed(&url).await)
                    .unwrap(),
            );
        }
        let most = most_held_at_once(&limiters, 40, |i| Duration::from_millis(1 + i % 20)).await;
        let waits: u64 = limiters.iter().map(|l| l.metrics().in_flight.waits).sum();
        println!("{flavor}: partitioned, 40 calls, at most {most} held at once, {waits} waits");
        assert!(
            (1..=3).contains(&most),
            "{flavor}: {most} held at once over a cap of 3"
        );
        assert!(waits > 0, "{flavor}: 40 calls at once on 3 slots wait");
        within_async("every slot released", Duration::from_secs(10), || {
            let held: (u64, u64) = redis::cmd("THROTTLE.SLOTS")
                .arg("{pq}:inflight")
                .arg(40)
                .arg(400)
                .query(&mut server.conn())
                .unwrap();
            (held == (0, 0)).then_some(())
        })
        .await;
        for limiter in &limiters {
            limiter.shutdown().await.unwrap();
        }
    });
}

/// A failover: two slots taken on the primary and acknowledged by its replica (`WAIT 1`), the
/// primary SIGKILLed and the replica promoted (`REPLICAOF NO ONE`). The promoted replica has
/// both slots: a call there is refused while their leases run (no slot granted twice), and
/// granted once they have run out, since their holder's renewals went to the dead primary.
fn a_promoted_replica_keeps_the_acknowledged_slots(flavor: Flavor) {
    let mut primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(&primary).start();
    replica.wait_replica_synced(&primary);
    let backend = backend_on(flavor);
    let lease = Duration::from_secs(3);
    runtime().block_on(async {
        let mut conn = multiplexed(&primary.url()).await;
        let holder = limiter(conn.clone(), "failover", 2, lease, backend);
        let sent = Instant::now();
        let held = [holder.acquire().await.unwrap(), holder.acquire().await.unwrap()];
        // On the connection that sent the takes: WAIT counts the replicas that have this
        // client's writes (on a fresh connection, with none, it answers at once).
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(acked, 1, "{flavor}: the replica acknowledged the slots");
        primary.kill();
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query(&mut replica.conn())
            .unwrap();
        let promoted = Instant::now();

        let caller = limiter(multiplexed(&replica.url()).await, "failover", 2, lease, backend);
        let refused = caller.try_acquire().await.unwrap();
        let asked = Instant::now();
        // The leases end at `sent + lease` at the earliest (later if a renewal reached the
        // primary before the kill): a refusal is asserted only where they cannot have ended.
        if asked < sent + lease {
            assert!(
                matches!(refused, TryAcquire::Denied { .. }),
                "{flavor}: both slots are held on the promoted replica: {refused:?}"
            );
        }
        let grant = caller
            .acquire_with(Demand::call().within(Duration::from_secs(30)))
            .await
            .unwrap();
        let granted = Instant::now();
        println!(
            "{flavor}: promoted {:?} after the takes, granted there {:?} after them (lease {lease:?})",
            promoted - sent,
            granted - sent
        );
        // The server's ms clock: its lease end is rounded to the ms.
        assert!(
            granted + Duration::from_millis(2) >= sent + lease,
            "{flavor}: granted {:?} after the takes, before their lease of {lease:?} ended",
            granted - sent
        );
        assert!(grant.slot().is_some());
        drop(held);
    });
}

throttle_e2e::per_server!(
    forged_releases_cost_a_waiter_a_few_takes,
    a_table_that_names_no_wait_is_not_spun_on,
    a_promoted_replica_keeps_the_acknowledged_slots,
    a_partitioned_limiters_cap_holds_across_processes,
    a_release_in_another_process_wakes_a_listening_waiter,
    a_slot_is_held_in_its_table_and_released_there,
    never_more_than_the_cap_in_flight,
    a_killed_holders_slots_free_when_their_leases_end,
    a_frozen_holders_late_calls_never_touch_a_newer_slot,
    a_cancelled_wait_holds_nothing,
);
