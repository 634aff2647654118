//! A partitioned quota through a slot migration and a master failover, on a real 3-master
//! cluster with a replica per master: 3 worker processes for 16 s; at 3 s the slot of a
//! partition leased at that moment moves to the master of partition 13's key (`SETSLOT
//! IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT NODE`), at 7 s that master is SIGKILLed and its
//! replica takes over (then the old master comes back as a replica).
//!
//! The same checks as the fleet test: no two holds of a partition overlap, every window
//! within `burst + rate x window`. Then, what the servers decide, exactly: every hold of the
//! moved partition that was usable at the move was renewed on the new master (the key went
//! with its owner token and expiry; the renewal followed `MOVED`), or given back by its
//! holder first; none lapsed or was lost before that. And what the workers' demand decides,
//! within bounds measured on a busy machine: the moved partition was leased after the move
//! (its holder's next renewal is due within a third of a lease), and at least one of the
//! killed master's partitions, whose leases all lapse while no master serves them, was
//! leased again after the failover (over 14 runs here, 6 to 8 of its 8, the first within
//! 1.7 s).
//!
//! Which partitions are leased again after the failover is the workers' choice (a process
//! leases more, at random among the free ones, only while its calls wait), so no single
//! partition is required to be: a renewal keeps a hold's first instant, so the line that
//! shows a new lease is the next acquire, by whoever happens to pick it.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test partitioned_failover -- --nocapture
//! ```

use std::time::Duration;

use redis_throttle::partitioned::PartitionedQuota;
use throttle_e2e::partitioned::{check, finish_workers, worker, worker_env, End, Output, Spec};
use throttle_e2e::stored;
use throttle_e2e::wall::{now_ns, NS_PER_S};
use throttle_testkit::{ChildTest, Flavor, ReplicatedCluster};

const SPEC: Spec = Spec::FLEET;
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

/// The slot of partition `index`'s key, as the cluster computes it (its first node, asked
/// before any node is killed).
fn slot(cluster: &ReplicatedCluster, quota: &PartitionedQuota, index: u32) -> u16 {
    let mut con = cluster.servers()[0].conn();
    throttle_e2e::keyslot(&mut con, quota.key(index).expect("a partition"))
}

/// A partition whose key exists now (a worker leases it) and whose master (by partition,
/// in `masters`) is not `target`.
fn leased_partition(
    cluster: &ReplicatedCluster,
    quota: &PartitionedQuota,
    masters: &[usize],
    target: usize,
) -> Option<u32> {
    (0..quota.partitions()).find(|&i| {
        masters[i as usize] != target
            && stored(
                &mut cluster.servers()[masters[i as usize]].conn(),
                quota.key(i).expect("a partition"),
            )
            .is_some()
    })
}

/// `(from, until)` of a worker's confirmations of `partition` whose write was sent after
/// `after`: a confirmation is usable for at most a lease after its write was sent.
fn sent_after(
    out: &Output,
    partition: u32,
    after: i128,
) -> impl Iterator<Item = (i128, i128)> + '_ {
    let lease = i128::from(SPEC.lease_ms) * 1_000_000;
    out.leases
        .iter()
        .filter(move |&&(p, _, until)| p == partition && until > after + lease)
        .map(|&(_, from, until)| (from, until))
}

#[test]
fn leases_stay_exclusive_through_a_slot_migration_and_a_failover() {
    let mut cluster = ReplicatedCluster::start_with(Flavor::Redis70, 3, 1, false);
    let urls = cluster.urls();
    let quota = SPEC.quota();
    let masters: Vec<usize> = (0..SPEC.partitions)
        .map(|i| cluster.master_of(slot(&cluster, &quota, i)))
        .collect();
    let go = now_ns() + 2 * NS_PER_S;
    let end = go + RUN_S * NS_PER_S;
    let mut workers: Vec<ChildTest> = (0..WORKERS)
        .map(|_| ChildTest::spawn("partitioned_worker", &worker_env(&urls, SPEC, go, end)))
        .collect();

    // 3 s: the slot of a partition leased now moves to the master that serves partition 13.
    let failing = slot(&cluster, &quota, 13);
    let target = masters[13];
    wait_until(go + 3 * NS_PER_S);
    let moved = leased_partition(&cluster, &quota, &masters, target)
        .expect("a partition leased at 3 s on a master other than partition 13's");
    let migrated = slot(&cluster, &quota, moved);
    let keys = cluster.migrate_slot(migrated, target);
    let migrated_at = now_ns();

    // 7 s: that master dies; its replica takes over, then it comes back as a replica.
    wait_until(go + 7 * NS_PER_S);
    let master = cluster.master_of(failing);
    assert_eq!(master, target);
    let on_failed: Vec<u32> = (0..SPEC.partitions)
        .filter(|&i| cluster.master_of(slot(&cluster, &quota, i)) == master)
        .collect();
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

    let outputs = finish_workers(&mut workers, end, &[]);
    drop(workers);

    let found = check(&outputs, &[], SPEC);
    let secs = |at: i128| (at - go) as f64 / 1e9;

    // The move, as the servers decide it: every hold of the moved partition usable at the
    // move (begun before it, confirmed past it) was confirmed again by a write sent after
    // it, to the new master, or was given back by its holder first. A renewal that the new
    // master refused (`lost`) or that never got there (`lapsed`) fails here.
    let mut crossed = 0;
    for (w, out) in outputs.iter().enumerate() {
        let mut holds: Vec<i128> = out
            .leases
            .iter()
            .filter(|&&(p, from, until)| p == moved && from <= migrated_at && until > migrated_at)
            .map(|&(_, from, _)| from)
            .collect();
        holds.sort_unstable();
        holds.dedup_by(|a, b| *a - *b < 1_000_000);
        for from in holds {
            crossed += 1;
            let same_hold = |f: i128| (f - from).abs() < 1_000_000;
            let renewed = sent_after(out, moved, migrated_at).any(|(f, _)| same_hold(f));
            // How this hold ended, if it did: its worker's first end of the partition since.
            let ended = out
                .ends
                .iter()
                .filter(|&&(p, at, _)| p == moved && at >= from)
                .min_by_key(|&&(_, at, _)| at);
            let given_back = matches!(ended, Some(&(_, _, End::Released)));
            assert!(
                renewed || given_back,
                "worker {w} held partition {moved} from {:.3} s across its move at {:.3} s, \
                 but no renewal sent after the move confirmed it, and it ended {ended:?}; its \
                 lines: {:?}, ends {:?}",
                secs(from),
                secs(migrated_at),
                out.leases
                    .iter()
                    .filter(|l| l.0 == moved)
                    .map(|l| (secs(l.1), secs(l.2)))
                    .collect::<Vec<_>>(),
                out.ends.iter().filter(|e| e.0 == moved).collect::<Vec<_>>(),
            );
        }
    }
    // The earliest confirmation of `partition` sent after `after`, as the instant its write
    // was sent at the earliest (its end less a lease).
    let first_after = |partition: u32, after: i128| {
        outputs
            .iter()
            .flat_map(|o| sent_after(o, partition, after))
            .map(|(_, until)| until - i128::from(SPEC.lease_ms) * 1_000_000)
            .min()
    };
    // The workers' choice, bounded: the partition was leased when the move began, so its
    // holder renews it within a third of a lease unless it gives it up first, and then
    // another may lease it.
    let moved_again = first_after(moved, migrated_at);
    assert!(
        moved_again.is_some(),
        "partition {moved} was not leased after its move at {:.3} s ({crossed} holds crossed it)",
        secs(migrated_at)
    );
    // The failover: every lease on the killed master lapses (no master serves it for longer
    // than a lease); the promoted replica then serves lease writes again.
    let again: Vec<(u32, f64)> = on_failed
        .iter()
        .filter_map(|&p| first_after(p, failed_over_at).map(|at| (p, secs(at))))
        .collect();
    assert!(
        !again.is_empty(),
        "none of partitions {on_failed:?} (the killed master's) was leased after the failover \
         at {:.3} s; the run ends at {:.3} s",
        secs(failed_over_at),
        secs(end)
    );
    let w = &found.windows;
    println!(
        "migration and failover: partition {moved}'s slot {migrated} ({keys} keys) moved at \
         {:.3} s, {crossed} hold(s) crossed it, leased on the new master (a write sent at or \
         after {:.3} s); master of slot {failing} SIGKILLed at 7 s, replica in charge {:.2} s \
         later; of its partitions {on_failed:?}, leased again (s): {again:?}\n  grants per \
         worker {:?}; {} lease confirmations, smallest handover gap {:.1} ms\n  {w}",
        secs(migrated_at),
        moved_again.map_or(f64::NAN, secs),
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
