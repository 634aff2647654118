//! One partitioned quota (20 partitions) shared by a fleet of worker processes on a real
//! 3-master cluster with a replica per master, for 30 s, with workers joining, leaving
//! gracefully, SIGKILLed, and SIGSTOPped for longer than their lease.
//!
//! Checked (see `throttle_e2e::partitioned::check`): no two holds of a partition overlap; a frozen
//! worker carries at most its callers' grants across the freeze; every other grant stays in
//! every window within `burst + rate x window` (plus the bunching the measured lateness
//! between a grant's decision and its return can make). Utilisation is printed.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test partitioned_fleet -- --nocapture
//! ```

use std::time::Duration;

use throttle_e2e::partitioned::{check, finish_workers, worker, worker_env, Freeze, Spec};
use throttle_e2e::wall::{now_ns, NS_PER_S};
use throttle_testkit::{ChildTest, Flavor, ReplicatedCluster};

const SPEC: Spec = Spec::FLEET;
const RUN_S: i128 = 30;
/// Below this the fleet did not keep the quota busy enough for the check to mean much.
const MIN_UTILISATION: f64 = 0.6;

/// A worker process's job; as a normal test it does nothing.
#[test]
fn partitioned_worker() {
    worker();
}

/// What happens to the fleet when, in seconds after the start.
enum Step {
    Join(usize),
    Freeze(usize),
    Thaw(usize),
    Kill(usize),
}

#[test]
fn a_fleet_stays_within_the_quota_through_joins_kills_and_freezes() {
    let cluster = ReplicatedCluster::start_with(Flavor::Redis70, 3, 1, false);
    let urls = cluster.urls();
    let go = now_ns() + 2 * NS_PER_S;
    let end = go + RUN_S * NS_PER_S;
    // Worker 3 leaves at 17 s (a graceful stop releases its leases).
    let end_of = |worker: usize| if worker == 3 { go + 17 * NS_PER_S } else { end };
    let spawn = |worker: usize, at: i128| {
        ChildTest::spawn(
            "partitioned_worker",
            &worker_env(&urls, SPEC, at, end_of(worker)),
        )
    };
    let mut workers: Vec<Option<ChildTest>> = (0..4).map(|w| Some(spawn(w, go))).collect();
    let plan = [
        (4.0, Step::Join(4)),
        (7.0, Step::Join(5)),
        (9.0, Step::Freeze(1)),
        (12.0, Step::Thaw(1)),
        (14.0, Step::Kill(2)),
        (19.0, Step::Freeze(0)),
        (21.5, Step::Thaw(0)),
        (23.0, Step::Join(6)),
    ];
    let mut freezes: Vec<Freeze> = Vec::new();
    let mut killed = Vec::new();
    for (at_s, step) in plan {
        let at = go + (at_s * 1e9) as i128;
        let wait = (at - now_ns()).max(0);
        std::thread::sleep(Duration::from_nanos(wait as u64));
        match step {
            Step::Join(w) => {
                assert_eq!(workers.len(), w);
                workers.push(Some(spawn(w, now_ns())));
            }
            Step::Freeze(w) => {
                let frozen = now_ns();
                workers[w].as_ref().expect("running").freeze();
                freezes.push(Freeze {
                    worker: w,
                    frozen,
                    thawed: 0,
                });
            }
            Step::Thaw(w) => {
                let thawed = now_ns();
                workers[w].as_ref().expect("running").thaw();
                let f = freezes.iter_mut().rfind(|f| f.worker == w).expect("frozen");
                f.thawed = thawed;
            }
            Step::Kill(w) => {
                workers[w].as_mut().expect("running").kill();
                killed.push(w);
            }
        }
    }
    let outputs = finish_workers(
        workers
            .iter_mut()
            .map(|child| child.as_mut().expect("a worker")),
        end,
        &killed,
    );
    // A worker that ran to its end counted in its METRICS every grant it printed.
    for (w, parsed) in outputs.iter().enumerate() {
        if !killed.contains(&w) {
            let metrics = parsed.metrics.as_deref().unwrap_or("(none)");
            assert!(
                metrics.contains(&format!("granted: {}", parsed.grants.len())),
                "worker {w}: {} GRANT lines, {metrics}",
                parsed.grants.len()
            );
        }
    }
    drop(workers);

    let found = check(&outputs, &freezes, SPEC);
    let w = &found.windows;
    println!(
        "partitioned fleet: {} partitions, burst {} at {}/s, {} workers over {RUN_S} s (joins at \
         4, 7, 23 s; worker 3 leaves at 17 s; worker 2 SIGKILLed at 14 s; workers 1 and 0 \
         SIGSTOPped for 3 s and 2.5 s, leases of {} ms)\n  grants per worker {:?}; {} lease \
         confirmations, smallest handover gap {:.1} ms; grants carried across each freeze {:?} \
         (bound: {} callers); all grants, carried ones included: worst window {:+.3} tokens\n  \
         {w}\n  worst window {:+.3} tokens at {:.3}-{:.3} s ({} grants)",
        SPEC.partitions,
        SPEC.burst,
        SPEC.rate,
        outputs.len(),
        SPEC.lease_ms,
        found.per_worker,
        found.leases,
        found.smallest_handover_ms,
        found.carried,
        SPEC.tasks,
        found.worst_all,
        w.worst_window,
        w.worst_at.0 as f64 / 1e9,
        w.worst_at.1 as f64 / 1e9,
        w.worst_at.2,
    );
    assert!(
        w.utilisation >= MIN_UTILISATION,
        "the fleet used {:.3} of the quota",
        w.utilisation
    );
    assert!(
        found.per_worker.iter().filter(|&&n| n > 0).count() >= 6,
        "{:?}",
        found.per_worker
    );
}
