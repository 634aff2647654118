//! Calls in flight on Redis Cluster: 3 masters, and a capped bucket on a master other than the
//! one the subscription was seeded with. The slot travels with the token to the bucket's
//! master, a release there is announced on its shard channel, and a waiter in another
//! limiter (another process, as far as the server can tell) hears it through
//! `Announcements::cluster`: refused once, then granted, two takes in all. Then 40 calls of
//! two limiters on the cap never hold more than its slots at once.

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Announcements, Limiter, LimiterBuilder, Quota};
use throttle_e2e::at_once::most_held_at_once;
use throttle_e2e::*;
use throttle_testkit::ReplicatedCluster;

throttle_e2e::per_server!(a_slot_freed_on_another_shard_is_heard);

const CAP: u64 = 2;
const LEASE: Duration = Duration::from_secs(10);

/// A thousand tokens a second: the slots, not the tokens, hold calls back here.
fn capped(key: &str) -> LimiterBuilder {
    Limiter::builder(key, Quota::new(1_000, 1_000u64).unwrap())
        .max_in_flight(CAP)
        .slot_lease(LEASE)
}

fn a_slot_freed_on_another_shard_is_heard(flavor: Flavor) {
    let nodes = ReplicatedCluster::start(flavor, 3, 0).into_masters();
    let mut first = nodes[0].server.conn();
    let tag = (0..1000)
        .map(|i| format!("cl:slots:{i}"))
        .find(|tag| !nodes[0].node.owns(keyslot(&mut first, tag)))
        .expect("a slot on another master");
    let key = format!("{{{tag}}}:quota");
    runtime().block_on(async {
        let conn = cluster(nodes.iter().map(|n| n.server.url())).await;
        // Seeded with the first master alone: the subscription finds the bucket's master.
        let announcements = Announcements::cluster([nodes[0].server.url()]).unwrap();
        let holder = capped(&key).build(conn.clone()).unwrap();
        let waiter = capped(&key)
            .listen(&announcements)
            .build(conn.clone())
            .unwrap();
        // In line once, then granted on hearing the release hand it a slot: one take in all.
        contract::in_flight::a_release_elsewhere_wakes_a_listening_waiter(
            &holder,
            &waiter,
            CAP,
            &announcements,
            flavor,
        )
        .await;

        // 40 calls of 5 ms from both limiters: the grants held at once, counted while held.
        let limiters = [holder.clone(), waiter.clone()];
        let most = most_held_at_once(&limiters, 40, |_| Duration::from_millis(5)).await;
        assert!(
            (1..=CAP).contains(&most),
            "{flavor}: {most} grants held at once, above the cap of {CAP}"
        );
        let waits = holder.metrics().in_flight.waits + waiter.metrics().in_flight.waits;
        println!("{flavor}: 40 calls, at most {most} held at once, {waits} waits for a slot");
    });
}
