//! Redis Cluster: 3 masters on loopback made into a cluster by `redis-cli --cluster create`
//! (Debian's redis-tools); the client's cluster connection acquires on 200 keys spread over
//! all three; a slot is migrated by hand under a bucket, and the same connection follows
//! the MOVED to the bucket's new node, with the bucket's state.

use redis_throttle::prelude::*;
use std::time::{Duration, Instant};

use redis_throttle::{Limiter, Quota, TryAcquire};
use throttle_e2e::*;
use throttle_testkit::ReplicatedCluster;

throttle_e2e::per_server!(keys_on_every_master_and_a_moved_slot);

const KEYS: usize = 200;
/// Capacity 3, one token every 100 s: nothing refills during the test.
const CAPACITY: u64 = 3;
const RATE: f64 = 0.01;

/// `rejected_calls` of THROTTLE.TAKE in `INFO commandstats` (0 if none or absent).
fn rejected_takes(con: &mut Connection) -> u64 {
    command_stat(
        &info(con, "commandstats"),
        "throttle.take",
        "rejected_calls",
    )
    .unwrap_or(0)
}

fn quota() -> Quota {
    Quota::new(CAPACITY, RATE).unwrap()
}

/// 200 keys over all three masters: each one's first `capacity` acquires through the
/// cluster connection are granted at once, the next is denied, and each bucket lives on
/// the node that serves its slot. Then a slot holding an emptied bucket (and a half-used
/// one beside it, same hash tag) moves to another master by hand (SETSLOT IMPORTING /
/// MIGRATING, MIGRATE, SETSLOT NODE on all three): the same connection follows the MOVED,
/// and the buckets moved with their keys.
fn keys_on_every_master_and_a_moved_slot(flavor: Flavor) {
    let started = Instant::now();
    let nodes = ReplicatedCluster::start(flavor, 3, 0).into_masters();
    let cluster_up = started.elapsed();
    let mut cons: Vec<Connection> = nodes.iter().map(|n| n.server.conn()).collect();

    let keys: Vec<String> = (0..KEYS).map(|i| format!("cl:bucket:{i}")).collect();
    let owner: Vec<usize> = keys
        .iter()
        .map(|key| {
            let slot = keyslot(&mut cons[0], key);
            nodes.iter().position(|n| n.node.owns(slot)).unwrap()
        })
        .collect();
    let per_node: Vec<usize> = (0..3)
        .map(|n| owner.iter().filter(|&&o| o == n).count())
        .collect();
    assert!(
        per_node.iter().all(|&n| n > 0),
        "the keys do not reach every master: {per_node:?}"
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let conn = runtime.block_on(cluster(nodes.iter().map(|n| n.server.url())));

    // Every key at once, one task each.
    runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for key in &keys {
            let limiter = Limiter::new(conn.clone(), key.clone(), quota());
            tasks.spawn(async move {
                for k in 1..=CAPACITY {
                    let grant = limiter
                        .acquire()
                        .await
                        .unwrap_or_else(|e| panic!("{}: acquire {k}: {e}", limiter.key()));
                    assert_eq!(
                        grant.slept,
                        Duration::ZERO,
                        "{}: take {k} waited",
                        limiter.key()
                    );
                    assert_eq!(grant.remaining, CAPACITY - k, "{}", limiter.key());
                }
                let next = limiter.try_acquire().await.unwrap();
                assert!(
                    !next.is_granted(),
                    "{}: capacity + 1 granted",
                    limiter.key()
                );
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("a key's task panicked");
        }
    });
    // Each bucket is on the node that serves its slot, and nowhere else.
    for (key, &o) in keys.iter().zip(&owner) {
        assert!(exists(&mut cons[o], key), "{key} is not on its node");
    }
    for (n, con) in cons.iter_mut().enumerate() {
        let size: usize = query(con, &redis::cmd("DBSIZE"));
        assert_eq!(size, per_node[n], "node {n} holds other keys");
    }

    // The slot of the first key of node 0 moves to node 1.
    let (src, dst, other) = (0, 1, 2);
    let key = keys[owner.iter().position(|&o| o == src).unwrap()].clone();
    let partial = format!("{{{key}}}:half");
    let slot = keyslot(&mut cons[src], &key);
    assert_eq!(keyslot(&mut cons[src], &partial), slot);
    let (empty, half) = (
        Limiter::new(conn.clone(), key.clone(), quota()),
        Limiter::new(conn.clone(), partial.clone(), quota()),
    );
    runtime.block_on(async {
        assert_eq!(half.acquire().await.unwrap().remaining, CAPACITY - 1);
        assert_eq!(empty.peek().await.unwrap().remaining, 0);
    });
    let before = (
        state(&mut cons[src], &key),
        pexpiretime(&mut cons[src], &key),
    );
    let rejected_before = rejected_takes(&mut cons[src]);

    let set_slot = |con: &mut Connection, how: &str, id: &str| {
        let _: () = query(
            con,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(how)
                .arg(id),
        );
    };
    set_slot(&mut cons[dst], "IMPORTING", &nodes[src].node.id);
    set_slot(&mut cons[src], "MIGRATING", &nodes[dst].node.id);
    let in_slot: Vec<String> = query(
        &mut cons[src],
        redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(1000),
    );
    assert!(
        in_slot.contains(&key) && in_slot.contains(&partial),
        "{in_slot:?}"
    );
    let migrating = Instant::now();
    let _: () = query(
        &mut cons[src],
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(nodes[dst].server.port())
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(&in_slot),
    );
    set_slot(&mut cons[dst], "NODE", &nodes[dst].node.id);
    set_slot(&mut cons[src], "NODE", &nodes[dst].node.id);
    set_slot(&mut cons[other], "NODE", &nodes[dst].node.id);

    // The old node redirects; the new one holds the bucket as it was.
    let moved = send(&mut cons[src], redis::cmd("GET").arg(&key));
    let want = format!("MOVED {slot} 127.0.0.1:{}", nodes[dst].server.port());
    assert!(
        moved.as_ref().is_err_and(|e| e.starts_with(&want)),
        "GET on the old node: {moved:?}"
    );
    // The state is the same integer. MIGRATE carries the TTL as ms left (RESTORE's ttl),
    // so the expiry can land up to the transfer time later (seen: 1 ms on Valkey 9.1),
    // never earlier: a key kept a little longer is still a full bucket once its state has
    // passed.
    let migrate_ms = slack_ms(migrating);
    assert_eq!(
        state(&mut cons[dst], &key),
        before.0,
        "the moved bucket's state"
    );
    let expire_at = pexpiretime(&mut cons[dst], &key);
    assert!(
        (before.1..=before.1 + migrate_ms).contains(&expire_at),
        "the moved bucket expires at {expire_at}, {} ms after it did on the old node \
         (the migration took at most {migrate_ms} ms)",
        expire_at - before.1
    );

    // Through the same cluster connection: the emptied bucket is still empty, the half-used
    // one has its last 2 tokens.
    runtime.block_on(async {
        match empty.try_acquire().await {
            Ok(TryAcquire::Denied { retry_after }) => {
                assert!(retry_after > Duration::from_secs(90), "{retry_after:?}")
            }
            other => panic!("{key} after the move: {other:?}"),
        }
        let peek = empty.peek().await.expect("TOKENS 0 after the move");
        assert_eq!(peek.remaining, 0, "{peek:?}");
        for left in (0..CAPACITY - 1).rev() {
            match half.try_acquire().await {
                Ok(TryAcquire::Granted(grant)) => assert_eq!(grant.remaining, left),
                other => panic!("{partial} after the move: {other:?}"),
            }
        }
        assert!(!half.try_acquire().await.unwrap().is_granted());
    });
    let rejected = rejected_takes(&mut cons[src]) - rejected_before;
    assert!(
        rejected >= 1,
        "the old node never answered THROTTLE.TAKE with MOVED: the test did not test it"
    );
    assert_eq!(
        state(&mut cons[dst], &key),
        before.0,
        "a denial wrote on the new node"
    );
    println!(
        "{flavor}: cluster up in {cluster_up:?} (ports {:?}); {KEYS} buckets over 3 masters {per_node:?}; \
         slot {slot} moved, {rejected} THROTTLE.TAKE answered MOVED by the old node; whole \
         test {:?}",
        nodes.iter().map(|n| n.server.port()).collect::<Vec<_>>(),
        started.elapsed()
    );
}
