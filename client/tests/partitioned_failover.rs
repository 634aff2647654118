//! A partitioned quota through a slot migration and a master failover, on a real 3-master
//! cluster with a replica per master: 3 worker processes for 16 s; at 3 s the slot of
//! partition 0's key moves to another master (`SETSLOT IMPORTING/MIGRATING`, `MIGRATE`,
//! `SETSLOT NODE`), at 7 s the master of partition 13's key is SIGKILLed and its replica
//! takes over (then the old master comes back as a replica).
//!
//! The same checks as the fleet test: no two holds of a partition overlap, every window
//! within `burst + rate x window`; and both moved partitions are leased again afterwards.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test partitioned_failover -- --nocapture
//! ```

mod partitioned_support;

use std::time::{Duration, Instant};

use partitioned_support::{check, now_ns, worker, worker_env, Output, Spec, NS_PER_S};
use redis_throttle::partitioned::key_slot;
use throttle_testkit::{Flavor, ReplicatedCluster, SignalledChild};

const SPEC: Spec = Spec {
    partitions: 20,
    burst: 40,
    rate: 200,
    lease_ms: 1000,
    tasks: 4,
};
const WORKERS: usize = 3;
const RUN_S: i128 = 16;
const MIN_UTILISATION: f64 = 0.5;

/// A worker process's job; as a normal test it does nothing.
#[test]
fn partitioned_worker() {
    worker();
}

fn wait_until(at: i128) {
    let wait = (at - now_ns()).max(0);
    std::thread::sleep(Duration::from_nanos(wait as u64));
}

#[test]
fn leases_stay_exclusive_through_a_slot_migration_and_a_failover() {
    let mut cluster = ReplicatedCluster::start_with(Flavor::Redis70, 3, 1, false);
    let urls = cluster.urls();
    let quota = SPEC.quota();
    let go = now_ns() + 2 * NS_PER_S;
    let end = go + RUN_S * NS_PER_S;
    let mut workers: Vec<SignalledChild> = (0..WORKERS)
        .map(|_| SignalledChild::spawn("partitioned_worker", &worker_env(&urls, SPEC, go, end)))
        .collect();

    // 3 s: partition 0's slot moves to the master that serves partition 13.
    let migrated = key_slot(quota.key(0).expect("partition 0").as_bytes());
    let failing = key_slot(quota.key(13).expect("partition 13").as_bytes());
    wait_until(go + 3 * NS_PER_S);
    let target = cluster.master_of(failing);
    let keys = cluster.migrate_slot(migrated, target);
    let migrated_at = now_ns();

    // 7 s: that master dies; its replica takes over, then it comes back as a replica.
    wait_until(go + 7 * NS_PER_S);
    let master = cluster.master_of(failing);
    let replica = cluster.replica_of(master);
    let gap = cluster.kill_master_and_fail_over(master, replica);
    let failed_over_at = now_ns();
    cluster.restart(master);
    assert_eq!(cluster.master_of(failing), replica);
    assert_eq!(
        cluster.master_of(migrated),
        replica,
        "the migrated slot moved with it"
    );

    let deadline = Instant::now()
        + Duration::from_nanos((end - now_ns()).max(0) as u64)
        + Duration::from_secs(30);
    let mut outputs = Vec::new();
    for (w, child) in workers.iter_mut().enumerate() {
        let out = child.finish(deadline);
        assert!(
            out.failure.is_none(),
            "worker {w} {:?}\n{}\n{}",
            out.failure,
            out.stdout
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .join("\n"),
            out.stderr
        );
        let parsed = Output::parse(&out.stdout);
        println!(
            "worker {w}: {}",
            parsed.metrics.as_deref().unwrap_or("(none)")
        );
        outputs.push(parsed);
    }
    drop(workers);

    let found = check(&outputs, &[], SPEC);
    // Both partitions were leased again after their key moved.
    let leased_after = |partition: u32, after: i128| {
        outputs
            .iter()
            .flat_map(|o| &o.leases)
            .any(|&(p, from, _)| p == partition && from > after)
    };
    assert!(
        leased_after(0, migrated_at),
        "partition 0 after its migration"
    );
    assert!(
        leased_after(13, failed_over_at),
        "partition 13 after the failover"
    );
    let w = &found.windows;
    println!(
        "migration and failover: slot {migrated} ({keys} keys) moved at 3 s; master of slot \
         {failing} SIGKILLed at 7 s, replica in charge {:.2} s later\n  grants per worker {:?}; \
         {} lease confirmations, smallest handover gap {:.1} ms\n  {w}",
        gap.as_secs_f64(),
        found.per_worker,
        found.leases,
        found.smallest_handover_ms,
    );
    assert!(
        w.utilisation >= MIN_UTILISATION,
        "the fleet used {:.3} of the quota",
        w.utilisation
    );
}
