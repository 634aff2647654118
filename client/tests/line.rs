//! The server's line for a slot, end to end on the four servers (each with one of the three
//! backends): callers in different processes (each limiter its own connection and
//! subscription, as `redis_throttle::connect` gives a process), some listening and some not,
//! are granted in the order they joined, each told its place; a caller that is dropped while
//! in line leaves it, so the next one is served at the release, not after its place or a lease
//! runs out; a waiter whose process is killed (SIGKILL) holds up the one behind it for no more
//! than the slot lease of the slot handed to it.
//!
//! Timing on a shared machine: the order is the server's and checked exactly; how soon a
//! waiter goes ahead after a release, loosely.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_throttle::{
    Backend, Connection, Error, Grant, InFlightMetrics, Limiter, MultiLimiter, Quota, Throttle,
};
use throttle_e2e::{backend_named, backend_on, runtime, within, within_async, Flavor, Server};
use throttle_testkit::ChildTest;
use tokio::task::JoinHandle;
use tokio::time::Instant;

throttle_e2e::per_server!(
    callers_are_served_in_the_order_they_joined,
    callers_of_several_buckets_wait_in_the_same_line,
    a_caller_dropped_in_line_leaves_it,
    a_killed_waiter_holds_up_the_next_for_a_lease_at_most
);

/// The slot lease of every process here: what a slot handed to a dead waiter is held for.
const LEASE: Duration = Duration::from_secs(5);
/// How late past the server's instant a listening waiter may be served on a loaded machine.
const LOOSE: Duration = Duration::from_secs(3);

const URL: &str = "THROTTLE_LINE_URL";
const BACKEND: &str = "THROTTLE_LINE_BACKEND";

/// `$builder` (a `Limiter`'s or a `MultiLimiter`'s: they share no trait) with `$backend`,
/// capped at one call in flight with [`LEASE`], listening (the default over `connect`'s
/// connection) or not, built over a connection to `$url`.
macro_rules! capped_at_one {
    ($builder:expr, $url:expr, $backend:expr, $listening:expr) => {{
        let mut builder = $builder
            .backend($backend)
            .max_in_flight(1)
            .slot_lease(LEASE);
        if !$listening {
            builder = builder.without_listening();
        }
        builder
            .build(redis_throttle::connect($url).await.unwrap())
            .unwrap()
    }};
}

/// A process's limiter on `key`, capped at one call in flight: listening or not.
async fn process(url: &str, key: &str, backend: Backend, listening: bool) -> Limiter<Connection> {
    let builder = Limiter::builder(key, Quota::new(1_000, 1_000u64).unwrap());
    capped_at_one!(builder, url, backend, listening)
}

/// Until `limiter`'s call has joined the line (its own count), at most 10 s.
async fn joined(limiter: &Limiter<Connection>, what: &str) {
    joined_by(|| limiter.metrics().in_flight, what).await;
}

/// Until the caller whose counts `in_flight` reads has joined the line, at most 10 s.
async fn joined_by(in_flight: impl Fn() -> InFlightMetrics, what: &str) {
    within_async(what, Duration::from_secs(10), || {
        (in_flight().joined_line > 0).then_some(())
    })
    .await;
}

/// A listening process that takes the one slot on `key`: its limiter, and the grant that
/// holds the slot.
async fn hold_the_slot(url: &str, key: &str, backend: Backend) -> (Limiter<Connection>, Grant) {
    let holder = process(url, key, backend, true).await;
    let held = holder.acquire().await.unwrap();
    (holder, held)
}

/// A listening process whose call on `key` waits in line, on a task of its own: its limiter
/// and the call, once it has joined.
async fn waiting_in_line(
    url: &str,
    key: &str,
    backend: Backend,
    what: &str,
) -> (Limiter<Connection>, JoinHandle<Result<Grant, Error>>) {
    let limiter = process(url, key, backend, true).await;
    let waiting = limiter.clone();
    let call = tokio::spawn(async move { waiting.acquire().await });
    joined(&limiter, what).await;
    (limiter, call)
}

/// Until every caller was served, a minute at most.
async fn all_served(callers: Vec<JoinHandle<()>>) {
    for caller in callers {
        tokio::time::timeout(Duration::from_secs(60), caller)
            .await
            .expect("every caller served within a minute")
            .unwrap();
    }
}

fn callers_are_served_in_the_order_they_joined(flavor: Flavor) {
    let server = Server::start(flavor);
    let (url, backend) = (server.url(), backend_on(flavor));
    runtime().block_on(async {
        let (_holder, held) = hold_the_slot(&url, "ordered", backend).await;
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut callers = Vec::new();
        // Six processes join one after another, every other one not listening.
        let mut limiters = Vec::new();
        for caller in 0..6u64 {
            let limiter = process(&url, "ordered", backend, caller % 2 == 0).await;
            callers.push(tokio::spawn(serve(
                limiter.clone(),
                caller,
                Arc::clone(&served),
            )));
            joined(&limiter, &format!("caller {caller} in line")).await;
            let told = limiter.metrics().in_flight;
            assert_eq!((told.in_line, told.last_place), (1, caller + 1));
            limiters.push(limiter);
        }
        drop(held);
        all_served(callers).await;
        assert_eq!(*served.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
        for limiter in limiters {
            assert_eq!(
                limiter.metrics().in_flight.in_line,
                0,
                "out of line once served"
            );
        }
    });
}

/// A process's `MultiLimiter` on `key` (the cap's slots are its bucket's) and a second bucket
/// of its own, capped at one call in flight, listening or not.
async fn several(
    url: &str,
    key: &str,
    backend: Backend,
    listening: bool,
) -> MultiLimiter<Connection> {
    let builder = MultiLimiter::builder()
        .limit(key, Quota::new(1_000, 1_000u64).unwrap(), 1)
        .limit(
            format!("{key}:minute"),
            Quota::new(1_000, 100u64).unwrap(),
            1,
        );
    capped_at_one!(builder, url, backend, listening)
}

/// Calls `limiter` once as caller `caller`, saying when it was served, and holds the grant
/// 20 ms.
async fn serve<T: Throttle + 'static>(limiter: T, caller: u64, served: Arc<Mutex<Vec<u64>>>) {
    let grant = limiter.acquire().await.unwrap();
    served.lock().unwrap().push(caller);
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(grant);
}

/// Callers of one bucket and of several (a `MultiLimiter` whose first key is the bucket) wait
/// in one line and are served in the order they joined, each told its place.
fn callers_of_several_buckets_wait_in_the_same_line(flavor: Flavor) {
    let server = Server::start(flavor);
    let (url, backend) = (server.url(), backend_on(flavor));
    runtime().block_on(async {
        let (_holder, held) = hold_the_slot(&url, "mixed", backend).await;
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut callers = Vec::new();
        for caller in 0..4u64 {
            let listening = caller < 2;
            let served = Arc::clone(&served);
            let in_flight: Box<dyn Fn() -> InFlightMetrics> = if caller % 2 == 0 {
                let limiter = several(&url, "mixed", backend, listening).await;
                callers.push(tokio::spawn(serve(limiter.clone(), caller, served)));
                Box::new(move || limiter.metrics().in_flight)
            } else {
                let limiter = process(&url, "mixed", backend, listening).await;
                callers.push(tokio::spawn(serve(limiter.clone(), caller, served)));
                Box::new(move || limiter.metrics().in_flight)
            };
            joined_by(&in_flight, &format!("caller {caller} in line")).await;
            assert_eq!(in_flight().last_place, caller + 1);
        }
        drop(held);
        all_served(callers).await;
        assert_eq!(*served.lock().unwrap(), [0, 1, 2, 3]);
    });
}

fn a_caller_dropped_in_line_leaves_it(flavor: Flavor) {
    let server = Server::start(flavor);
    let (url, backend) = (server.url(), backend_on(flavor));
    runtime().block_on(async {
        let (_holder, held) = hold_the_slot(&url, "left", backend).await;
        let (first, dropped) =
            waiting_in_line(&url, "left", backend, "the first caller in line").await;
        let (_second, next) =
            waiting_in_line(&url, "left", backend, "the second caller in line").await;
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
        assert_eq!(
            first.metrics().in_flight.in_line,
            0,
            "the dropped call left"
        );
    });
}

/// Run as a worker process by the test below (the server and backend in its environment):
/// one call joins the line on `killed`, says so in `killed:joined`, and waits there until the
/// process is killed (a minute at most).
#[test]
fn waiter_process() {
    let (Ok(url), Ok(backend)) = (std::env::var(URL), std::env::var(BACKEND)) else {
        return;
    };
    let backend = backend_named(&backend);
    runtime().block_on(async {
        let (_limiter, call) =
            waiting_in_line(&url, "killed", backend, "the waiter process in line").await;
        let mut conn = redis_throttle::connect(&url).await.unwrap();
        let _: () = redis::cmd("SET")
            .arg("killed:joined")
            .arg(1)
            .query_async(&mut conn)
            .await
            .unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(60), call).await;
    });
}

fn a_killed_waiter_holds_up_the_next_for_a_lease_at_most(flavor: Flavor) {
    let server = Server::start(flavor);
    let (url, backend) = (server.url(), backend_on(flavor));
    runtime().block_on(async {
        let (_holder, held) = hold_the_slot(&url, "killed", backend).await;
        // Started once the slot is held, so that its call waits in line.
        let mut waiter = ChildTest::spawn(
            "waiter_process",
            &[(URL, url.clone()), (BACKEND, backend.name().to_owned())],
        );
        within(
            "the waiter process in line",
            Duration::from_secs(30),
            || {
                let joined: Option<u64> = redis::cmd("GET")
                    .arg("killed:joined")
                    .query(&mut server.conn())
                    .unwrap();
                joined
            },
        );
        let (behind, next) = waiting_in_line(
            &url,
            "killed",
            backend,
            "the caller behind the waiter process",
        )
        .await;
        assert_eq!(
            behind.metrics().in_flight.last_place,
            2,
            "behind the killed waiter"
        );
        waiter.kill();
        // The release hands the slot to the dead waiter, still first in line: the caller
        // behind it is served when that slot's lease runs out, not at its own place's end.
        let released = Instant::now();
        drop(held);
        let grant = tokio::time::timeout(LEASE + LOOSE + LOOSE, next)
            .await
            .expect("the caller behind is served once the dead waiter's slot lease runs out")
            .unwrap()
            .unwrap();
        let waited = released.elapsed();
        println!(
            "{flavor}: the caller behind the killed waiter went ahead {waited:?} after the release"
        );
        assert!(
            waited + Duration::from_millis(1) >= LEASE,
            "served {waited:?} after the release, before the dead waiter's lease ran out"
        );
        assert!(
            waited <= LEASE + LOOSE,
            "served {waited:?} after the release, its lease is {LEASE:?}"
        );
        assert!(grant.slot().is_some());
    });
}
