//! A cap on calls in flight end to end, on a real server: the scenarios every capped limiter
//! (`Limiter`, `MultiLimiter`, `PartitionedLimiter`) must pass, whatever its connection (a
//! server, a cluster). Each takes limiters built with the cap it names, and the [`Table`]
//! where their slots live, so that what the server holds is checked, not only what the
//! limiter says. Timing on a shared machine: what the server decides is checked exactly; how
//! soon after a slot is free a waiter gets it, loosely.

use std::time::Duration;

use redis_throttle::prelude::*;
use redis_throttle::{Announcements, Grant, TryAcquire};
use throttle_testkit::{Flavor, Server};
use tokio::time::Instant;

use super::Capable;
use crate::wait::within_async;

/// Where a limiter's slots live: the bucket `key` of `capacity` at `rate` on `server`.
pub struct Table<'a> {
    pub server: &'a Server,
    pub key: &'a str,
    pub capacity: u64,
    pub rate: u64,
}

impl Table<'_> {
    /// `THROTTLE.SLOTS` as the server sees it: slots held, ms until the first lease ends.
    pub fn slots(&self) -> (u64, u64) {
        redis::cmd("THROTTLE.SLOTS")
            .arg(self.key)
            .arg(self.capacity)
            .arg(self.rate)
            .query(&mut self.server.conn())
            .unwrap()
    }

    /// Waits until no slot is held (the last release is a task of its own).
    pub async fn all_released(&self, what: &str) {
        within_async(what, Duration::from_secs(10), || {
            (self.slots() == (0, 0)).then_some(())
        })
        .await;
    }

    /// Drops `held`, `limiter`'s one grant: no slot is held once it goes, and the next call
    /// takes one at once, in one round trip.
    async fn free_again<T: Throttle>(&self, limiter: &T, held: Grant, flavor: Flavor) {
        drop(held);
        self.all_released("nothing held once the grant went").await;
        let grant = limiter.acquire().await.unwrap();
        assert_eq!(grant.round_trips, 1, "{flavor}: the slot is free at once");
    }
}

/// `limiter`, capped at 1, holds its slot in `table` and in none of `untouched` (its other
/// buckets): a second call is denied while it is held; released there when the grant goes,
/// and the next call takes it at once, in one round trip.
pub async fn a_slot_is_held_in_its_table_and_released_there<T: Throttle>(
    limiter: &T,
    table: &Table<'_>,
    untouched: &[Table<'_>],
    flavor: Flavor,
) {
    let held = limiter.acquire().await.unwrap();
    assert!(held.slot().is_some(), "{flavor}: a slot");
    assert_eq!(table.slots().0, 1, "{flavor}: held in {}", table.key);
    for other in untouched {
        assert_eq!(other.slots(), (0, 0), "{flavor}: none in {}", other.key);
    }
    let refused = limiter.try_acquire().await.unwrap();
    assert!(
        matches!(refused, TryAcquire::Denied { .. }),
        "{flavor}: the one slot is held: {refused:?}"
    );
    table.free_again(limiter, held, flavor).await;
}

/// `limiter`, capped at 1 with a lease far longer than the test: a call waiting for the one
/// slot, cancelled, holds nothing: once the held grant goes, no slot is held, and the next
/// call takes one at once.
pub async fn a_cancelled_wait_holds_nothing<T: Capable>(
    limiter: &T,
    table: &Table<'_>,
    flavor: Flavor,
) {
    let held = limiter.acquire().await.unwrap();
    let waiting = {
        let limiter = limiter.clone();
        tokio::spawn(async move { limiter.acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "{flavor}: the one slot is held");
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(limiter.metrics().in_flight.waits, 1, "{flavor}");
    table.free_again(limiter, held, flavor).await;
}

/// Two limiters on one capped key (two processes, as far as the server can tell; `waiter`
/// listens through `announcements`): the waiter, finding every one of the `cap` slots `holder`
/// holds, joins the server's line, and goes ahead when it hears the release hand it a slot:
/// one take in all (its join), where a waiter that does not listen looks again. The leases
/// must outlast the test and a listening waiter look on its own no sooner than seconds on, so
/// that a second take would mean the hand-off was never heard.
pub async fn a_release_elsewhere_wakes_a_listening_waiter<T: Capable>(
    holder: &T,
    waiter: &T,
    cap: u64,
    announcements: &Announcements,
    flavor: Flavor,
) {
    assert!(
        announcements.ready(Duration::from_secs(10)).await,
        "{flavor}: subscribed to the bucket's channel"
    );
    // The waiter's backend settled first (a library is checked once, a round trip).
    waiter.peek().await.unwrap();
    let mut held = Vec::new();
    for _ in 0..cap {
        held.push(holder.acquire().await.unwrap());
    }
    assert!(
        held.iter().all(|grant| grant.slot().is_some()),
        "{flavor}: each grant holds a slot"
    );
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            let grant = waiter.acquire().await;
            (grant, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "{flavor}: every slot is held");
    let released = Instant::now();
    drop(held);
    let (grant, granted) = waiting.await.unwrap();
    let grant = grant.unwrap();
    println!(
        "{flavor}: granted {:?} after the release was sent, in {} takes",
        granted - released,
        grant.round_trips
    );
    assert_eq!(
        grant.round_trips, 1,
        "{flavor}: joined the line, then heard its slot handed over"
    );
    let in_flight = waiter.metrics().in_flight;
    assert_eq!(
        (
            in_flight.waits,
            in_flight.joined_line,
            in_flight.heard_handed
        ),
        (1, 1, 1),
        "{flavor}"
    );
}
