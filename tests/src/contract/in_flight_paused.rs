//! A cap on calls in flight on paused tokio time, against the in-memory server that runs the
//! module's own arithmetic: the scenarios every capped limiter (`Limiter`, `MultiLimiter`,
//! `PartitionedLimiter`) must pass. Each takes a [`Capped`]: how to build the limiter (on one
//! fake), the [`SlotTable`] where its slots live, so that what the server holds is checked,
//! not only what the limiter says, and the numbers its own code decides ([`Decided`]), checked
//! exactly. A limiter's test file runs them with one line,
//! [`in_flight_paused!`](crate::in_flight_paused).

use std::time::Duration;

use redis_throttle::prelude::*;
use redis_throttle::{Error, QuotaError, TryAcquire};
use tokio::time::Instant;

use super::Capable;
use crate::fake::FakeServer;

/// The slot lease every limiter of these scenarios is built with.
pub const LEASE: Duration = Duration::from_secs(3);

/// Where a limiter's slots live: the bucket `key` of `capacity` at `rate` on `server`.
#[derive(Clone)]
pub struct SlotTable {
    pub server: FakeServer,
    pub key: &'static str,
    pub capacity: u64,
    pub rate: u64,
}

impl SlotTable {
    /// `THROTTLE.SLOTS` as the server sees it: slots held, ms until the first lease ends.
    pub async fn slots(&self) -> (u64, u64) {
        let mut conn = self.server.clone();
        redis::cmd("THROTTLE.SLOTS")
            .arg(self.key)
            .arg(self.capacity)
            .arg(self.rate)
            .query_async::<(u64, u64)>(&mut conn)
            .await
            .unwrap()
    }
}

/// Lets the limiter's background tasks (renewals, releases) run on paused time.
pub async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

/// A capped limiter under test.
pub struct Capped<B> {
    /// Builds a limiter with a cap and a slot lease, every one on the same fake.
    pub build: B,
    /// Where its slots live.
    pub table: SlotTable,
    pub decided: Decided,
}

/// The numbers a limiter's own code decides (its round trips, its hint), asserted exactly.
#[derive(Clone, Copy, Debug)]
pub struct Decided {
    /// Round trips of a take that finds its slot and its tokens at once.
    pub take_trips: u32,
    /// The limiter's round trips once it has held one grant for 10.5 s: the take, the slot's
    /// 10 renewals, and any of its own (a partition keeper's).
    pub held_trips: u64,
    /// The slots held when a call waits for one to be released in its process.
    pub cap: u64,
    /// That waiting call's round trips: refused, its looks until 700 ms, granted.
    pub waiter_trips: u32,
    /// A call waiting for a slot released by another limiter at 1 s: when it finds it, and in
    /// how many round trips.
    pub found_elsewhere: (Duration, u64),
    /// What a denied `try_acquire` names, 300 ms into the one slot's lease.
    pub retry_after: Duration,
}

impl Decided {
    /// What a limiter decides whose slot comes with its tokens, in one take on the server
    /// (`Limiter`, `MultiLimiter`), renewed there.
    pub fn taken_with_the_tokens(cap: u64) -> Decided {
        Decided {
            take_trips: 1,
            // 1 take and a renewal at 1, 2, ... 10 s.
            held_trips: 1 + 10,
            cap,
            // Refused at 0, looks at 2, 6, 14, 30, 62 ms and every 50 ms to 662 ms, granted
            // at 700.
            waiter_trips: 1 + 5 + 12 + 1,
            // Refused at 0 (the line free: no second look at once), then looks at 2, 6, 14,
            // 30, 62 ms and every 50 ms from there: 112, ..., 962, 1012 ms, where it is found.
            found_elsewhere: (ms(1_012), 1 + 5 + 19),
            // Denied 300 ms into the slot's 3 s lease: told to look again when it ends.
            retry_after: ms(2_700),
        }
    }

    /// What a limiter decides that waits for its slot in the server's line (`Limiter`,
    /// `MultiLimiter`, and a `PartitionedLimiter`'s slots), where nothing announces a hand-off
    /// (the fake publishes nothing): it looks as its progress in line says (`line_look`). A
    /// look of several buckets' call that finds its slot handed takes their tokens with it.
    pub fn in_the_servers_line(cap: u64) -> Decided {
        Decided {
            // Joined the line at 0, looked at 50, 100, 200, 400 and 650 ms (its place never
            // moved: as long again, at most 250 ms), and at 700 ms, woken by the release here:
            // handed over.
            waiter_trips: 1 + 5 + 1,
            // Joined at 0, looked at 50, 100, 200, 400, 650, 900 and 1150 ms, where the slot
            // released at 1 s was handed to it.
            found_elsewhere: (ms(1_150), 1 + 7),
            ..Decided::taken_with_the_tokens(cap)
        }
    }
}

/// Builds a limiter with a cap and a slot lease.
pub trait Build<T>: Fn(u64, Duration) -> Result<T, Error> {}
impl<T, B: Fn(u64, Duration) -> Result<T, Error>> Build<T> for B {}

impl<B> Capped<B> {
    /// A limiter of `cap` with the slot lease [`LEASE`].
    fn limiter<T>(&self, cap: u64) -> T
    where
        B: Build<T>,
    {
        (self.build)(cap, LEASE).unwrap()
    }
}

/// Runs the contract's scenarios for one limiter, each a `#[tokio::test]` on paused time named
/// after it: `in_flight_paused!(capped)` every one on `capped()` (a [`Capped`]),
/// `in_flight_paused!(capped; scenario, ...)` those named.
#[macro_export]
macro_rules! in_flight_paused {
    ($capped:path) => {
        $crate::in_flight_paused!(
            $capped;
            a_grant_holds_its_slot_until_dropped_and_renews_it_meanwhile,
            a_call_that_finds_every_slot_held_goes_the_instant_one_is_released_here,
            a_slot_released_elsewhere_is_found_by_looking_again,
            a_waiting_call_gives_up_at_its_deadline_and_a_cancelled_one_holds_nothing,
            try_acquire_needs_a_slot_free_now_and_a_dropped_wait_holds_none,
            caps_and_leases_out_of_range_are_refused_at_build,
        );
    };
    ($capped:path; $($scenario:ident),+ $(,)?) => {
        $(
            #[tokio::test(start_paused = true)]
            async fn $scenario() {
                $crate::contract::in_flight_paused::$scenario($capped()).await;
            }
        )+
    };
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A grant holds its slot until dropped, renewed every third of its lease meanwhile: after
/// 10.5 s (three leases and more) it is still held, its lease renewed at 10 s; dropped, it is
/// released (one RELEASE, answered), with the round trips the limiter decides ([`Decided`]).
pub async fn a_grant_holds_its_slot_until_dropped_and_renews_it_meanwhile<T: Capable>(
    capped: Capped<impl Build<T>>,
) {
    let limiter = capped.limiter(2);
    let start = Instant::now();
    let grant = limiter.acquire().await.unwrap();
    assert!(grant.slot().is_some(), "a capped grant holds a slot");
    assert_eq!(
        grant.round_trips, capped.decided.take_trips,
        "the slot comes with the take"
    );
    let lease_left = LEASE - start.elapsed();
    assert_eq!(
        capped.table.slots().await,
        (1, lease_left.as_millis() as u64)
    );
    assert_eq!(limiter.metrics().in_flight.held, 1);

    // Ten seconds in flight: renewed every second (a third of the lease), so it never ends.
    tokio::time::sleep_until(start + ms(10_500)).await;
    settle().await;
    assert_eq!(
        capped.table.slots().await,
        (1, 2_500),
        "still held after three leases, renewed at 10 s"
    );
    assert_eq!(limiter.metrics().round_trips, capped.decided.held_trips);

    drop(grant);
    settle().await;
    assert_eq!(
        capped.table.slots().await,
        (0, 0),
        "released when the grant goes"
    );
    let metrics = limiter.metrics();
    assert_eq!(
        metrics.round_trips,
        capped.decided.held_trips + 1,
        "one RELEASE"
    );
    assert_eq!(metrics.in_flight.held, 0);
    assert_eq!(metrics.in_flight.leases_lost, 0);
    assert_eq!(metrics.in_flight.released, 1, "its RELEASE answered");
}

/// A call that finds every one of the cap's slots held waits, and goes the instant one is
/// released in its process (700 ms on), not at its next look: a slot of its own, the cap held
/// again; every slot released at the end.
pub async fn a_call_that_finds_every_slot_held_goes_the_instant_one_is_released_here<T: Capable>(
    capped: Capped<impl Build<T>>,
) {
    let limiter = capped.limiter(capped.decided.cap);
    let mut held = Vec::new();
    for _ in 0..capped.decided.cap {
        held.push(limiter.acquire().await.unwrap());
    }
    let start = Instant::now();
    let waiting = {
        let limiter = limiter.clone();
        tokio::spawn(async move { (limiter.acquire().await, Instant::now()) })
    };
    tokio::time::sleep(ms(700)).await;
    assert!(!waiting.is_finished(), "every slot is held");
    assert_eq!(limiter.metrics().in_flight.waits, 1, "it waits for a slot");
    drop(held.remove(0));
    let (granted, at) = waiting.await.unwrap();
    let granted = granted.unwrap();
    assert_eq!(at - start, ms(700), "woken by the release, not by a look");
    assert!(granted.slot().is_some());
    assert!(
        held.iter().all(|other| other.slot() != granted.slot()),
        "a slot of its own"
    );
    assert_eq!(granted.round_trips, capped.decided.waiter_trips);
    settle().await;
    let metrics = limiter.metrics();
    assert_eq!(
        (
            metrics.granted,
            metrics.in_flight.waits,
            metrics.in_flight.held
        ),
        (capped.decided.cap + 1, 1, capped.decided.cap),
        "{metrics:?}"
    );
    assert_eq!(
        metrics.in_flight.released, 1,
        "the first's RELEASE answered"
    );
    assert_eq!(capped.table.slots().await.0, capped.decided.cap);

    drop((granted, held));
    settle().await;
    assert_eq!(capped.table.slots().await, (0, 0), "every slot released");
    let in_flight = limiter.metrics().in_flight;
    assert_eq!(
        (in_flight.held, in_flight.released),
        (0, capped.decided.cap + 1)
    );
}

/// A slot released by another limiter (another process, as far as the server can tell) is
/// found by looking again, when and in as many round trips as the limiter decides.
pub async fn a_slot_released_elsewhere_is_found_by_looking_again<T: Capable>(
    capped: Capped<impl Build<T>>,
) {
    let here = capped.limiter(1);
    let elsewhere = capped.limiter(1);
    let held = elsewhere.acquire().await.unwrap();
    let start = Instant::now();
    let waiting = tokio::spawn(async move { (here.acquire().await, Instant::now(), here) });
    tokio::time::sleep(ms(1_000)).await;
    drop(held);
    let (granted, at, here) = waiting.await.unwrap();
    let granted = granted.unwrap();
    assert!(granted.slot().is_some());
    let (found, found_trips) = capped.decided.found_elsewhere;
    assert_eq!(at - start, found);
    let trips = here.metrics().round_trips;
    assert_eq!(trips, found_trips, "{trips} round trips");
    assert_eq!(
        u64::from(granted.round_trips),
        trips,
        "all of them the waiting call's"
    );
    assert_eq!(here.metrics().in_flight.waits, 1);
    assert_eq!(capped.table.slots().await.0, 1);
}

/// A call that finds no slot gives up at its deadline (400 ms, to the ms) holding nothing, and
/// a call cancelled while waiting in line holds nothing either: once the one grant goes, no
/// slot is held, and `try_acquire` takes the slot (and holds it: a second is denied).
pub async fn a_waiting_call_gives_up_at_its_deadline_and_a_cancelled_one_holds_nothing<
    T: Capable,
>(
    capped: Capped<impl Build<T>>,
) {
    let limiter = capped.limiter(1);
    let held = limiter.acquire().await.unwrap();
    let start = Instant::now();
    let err = limiter
        .acquire_with(Demand::call().within(ms(400)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::DeadlineExceeded { .. }),
        "gave up: {err}"
    );
    assert_eq!(start.elapsed(), ms(400), "at its deadline");
    assert_eq!(limiter.metrics().gave_up, 1);

    // Cancelled while waiting in line: nothing taken, nothing left behind.
    let cancelled = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.acquire().await })
    };
    tokio::time::sleep(ms(100)).await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    drop(held);
    settle().await;
    assert_eq!(capped.table.slots().await, (0, 0));
    let TryAcquire::Granted(grant) = limiter.try_acquire().await.unwrap() else {
        panic!("the slot is free again");
    };
    assert!(grant.slot().is_some(), "try_acquire takes a slot too");
    assert_eq!(capped.table.slots().await.0, 1);
    let TryAcquire::Denied { .. } = limiter.try_acquire().await.unwrap() else {
        panic!("and holds it");
    };
    drop(grant);
    settle().await;
    assert_eq!(
        capped.table.slots().await,
        (0, 0),
        "the try's grant released"
    );
}

/// `try_acquire` needs a slot free now: with the one slot held (300 ms on) it is denied, told
/// to look again in the `retry_after` the limiter decides; a waiting call whose future is
/// dropped (a timeout) holds nothing afterwards, and a granted try's grant, dropped at once,
/// leaves no slot held.
pub async fn try_acquire_needs_a_slot_free_now_and_a_dropped_wait_holds_none<T: Capable>(
    capped: Capped<impl Build<T>>,
) {
    let limiter = capped.limiter(1);
    let held = limiter.acquire().await.unwrap();
    tokio::time::sleep(ms(300)).await;
    match limiter.try_acquire().await.unwrap() {
        TryAcquire::Denied { retry_after: told } => assert_eq!(told, capped.decided.retry_after),
        TryAcquire::Granted(grant) => panic!("granted past the cap: {grant:?}"),
    }
    let dropped = tokio::time::timeout(ms(50), limiter.acquire()).await;
    assert!(dropped.is_err(), "still waiting for the slot");
    drop(held);
    settle().await;
    assert_eq!(capped.table.slots().await, (0, 0));
    match limiter.try_acquire().await.unwrap() {
        TryAcquire::Granted(grant) => assert!(grant.slot().is_some()),
        TryAcquire::Denied { retry_after } => panic!("denied for {retry_after:?}"),
    }
    settle().await;
    assert_eq!(
        capped.table.slots().await,
        (0, 0),
        "the try's grant dropped at once"
    );
    assert_eq!(limiter.metrics().in_flight.held, 0);
}

/// Caps from 1 to 1024 are built; 0 and 1025 are refused, naming the cap; so is a slot lease
/// under 300 ms, naming the lease.
pub async fn caps_and_leases_out_of_range_are_refused_at_build<T>(capped: Capped<impl Build<T>>) {
    let refused = |cap: u64, lease: Duration| (capped.build)(cap, lease).err();
    assert!(refused(1, LEASE).is_none());
    assert!(refused(1024, LEASE).is_none());
    assert!(matches!(
        refused(0, LEASE),
        Some(Error::InvalidQuota(QuotaError::InFlight { cap: 0 }))
    ));
    assert!(matches!(
        refused(1025, LEASE),
        Some(Error::InvalidQuota(QuotaError::InFlight { cap: 1025 }))
    ));
    for short in [ms(10), ms(100), ms(299)] {
        let err = refused(4, short).unwrap();
        assert!(
            matches!(err, Error::InvalidQuota(QuotaError::Lease { lease }) if lease == short),
            "{err}"
        );
        assert!(err.to_string().contains("from 300 ms"), "{err}");
    }
    assert!(refused(4, ms(300)).is_none());
}
