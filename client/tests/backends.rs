//! The three backends on all four servers: the module's commands and their Lua twin (the
//! function library, and the script for servers that refuse FUNCTION, for servers that cannot
//! load modules) give a fleet the same grants, `Auto` picks one with a single probe, the
//! library survives `FUNCTION FLUSH` and the script `SCRIPT FLUSH` mid-run, and a key written
//! by one backend is read correctly by the others.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test backends -- --nocapture   # prints every figure
//! ```
//!
//! The fleet: 2 OS processes (this binary run again) on one bucket of capacity 8, 9 per
//! second. What the server decides is checked exactly (40 grants, 40 commands, which
//! command); what the machine decides (when a grant returns) against the bucket's bound
//! strictly (never early) and against a late bound measured in the run itself (see
//! [`fleet`]).

use redis_throttle::prelude::*;
use std::time::Duration;

use redis_throttle::{Backend, Limiter, Quota, TryAcquire};
use throttle_e2e::wall::{now_ns, NS_PER_MS, NS_PER_S};
use throttle_e2e::{
    backend_named, calls, check_windows, clock_lag_ns, command_stat_of, error_replies, manager,
    multiplexed, runtime, serial, server_for, stored_state, worker_env, worker_number, Report,
};
use throttle_testkit::{ChildTest, Flavor};

const CAPACITY: u64 = 8;
const RATE: u64 = 9;
const PROCESSES: usize = 2;
/// The workers start together this long after they are spawned.
const GO_DELAY: Duration = Duration::from_millis(1500);
/// Longest a worker may run after its start: the fleet needs 3.6 s.
const WORKER_TIMEOUT: Duration = Duration::from_secs(60);

fn quota() -> Quota {
    Quota::new(CAPACITY, RATE).unwrap()
}

// --- The worker process ----------------------------------------------------------------

mod worker_samples;

const WORKER_URL: &str = "THROTTLE_BACKENDS_WORKER_URL";
const WORKER_KEY: &str = "THROTTLE_BACKENDS_WORKER_KEY";
const WORKER_BACKEND: &str = "THROTTLE_BACKENDS_WORKER_BACKEND";
const WORKER_GO_AT: &str = "THROTTLE_BACKENDS_WORKER_GO_AT_NS";
const WORKER_TASKS: &str = "THROTTLE_BACKENDS_WORKER_TASKS";
const WORKER_CALLS: &str = "THROTTLE_BACKENDS_WORKER_CALLS";

/// In a worker process (the parent sets the env vars): `tasks` tasks each acquire `calls`
/// times in a row, then print `START <ns>` (just before the first request), a `SAMPLE` line
/// per grant and the limiter's counters. Without the env vars, as a normal test, it does
/// nothing.
#[test]
fn backend_worker() {
    let Ok(url) = std::env::var(WORKER_URL) else {
        return;
    };
    let key = worker_env(WORKER_KEY);
    let backend = backend_named(&worker_env(WORKER_BACKEND));
    let go_at: i128 = worker_number(WORKER_GO_AT);
    let tasks: usize = worker_number(WORKER_TASKS);
    let calls: usize = worker_number(WORKER_CALLS);
    runtime().block_on(async {
        let work = async {
            // The commands are counted exactly on the server: no look before sending.
            let limiter = Limiter::builder(key, quota())
                .backend(backend)
                .pause_check(false)
                .build(manager(&url).await)
                .unwrap();
            worker_samples::acquire_and_report(
                limiter,
                go_at,
                tasks,
                calls,
                |_| true,
                // One, or more for the call that checked or loaded the library or the
                // script: the parent counts them against the server's.
                |grant| assert!(grant.round_trips >= 1, "{grant:?}"),
            )
            .await;
        };
        tokio::time::timeout(WORKER_TIMEOUT, work)
            .await
            .expect("the worker ran past its bound");
    });
}

// --- The fleet -------------------------------------------------------------------------

/// What the server counted during a run.
#[derive(Debug, Default)]
struct Commands {
    take: u64,
    evalsha: u64,
    evalsha_failed: u64,
    script_load: u64,
    noscript: u64,
    fcall: u64,
    fcall_failed: u64,
    function_load: u64,
    function_list: u64,
}

fn commands(con: &mut redis::Connection) -> Commands {
    Commands {
        take: calls(con, "throttle.take"),
        evalsha: calls(con, "evalsha"),
        evalsha_failed: command_stat_of(con, "evalsha", "failed_calls"),
        script_load: calls(con, "script|load"),
        noscript: error_replies(con, "NOSCRIPT"),
        fcall: calls(con, "fcall"),
        fcall_failed: command_stat_of(con, "fcall", "failed_calls"),
        function_load: calls(con, "function|load"),
        function_list: calls(con, "function|list"),
    }
}

impl Commands {
    fn since(&self, before: &Commands) -> Commands {
        Commands {
            take: self.take - before.take,
            evalsha: self.evalsha - before.evalsha,
            evalsha_failed: self.evalsha_failed - before.evalsha_failed,
            script_load: self.script_load - before.script_load,
            noscript: self.noscript - before.noscript,
            fcall: self.fcall - before.fcall,
            fcall_failed: self.fcall_failed - before.fcall_failed,
            function_load: self.function_load - before.function_load,
            function_list: self.function_list - before.function_list,
        }
    }
}

/// 2 processes x `tasks` tasks x `calls` calls in a row on a fresh bucket (capacity 8, 9/s),
/// with `SCRIPT FLUSH` (the script) or `FUNCTION FLUSH` (the library) sent `flush_after` into
/// the run if given. Checks:
/// - exactly: every call granted, each in one round trip (the client's count), each process's
///   counters, and the server's command counts (one `THROTTLE.TAKE`, one successful `FCALL`
///   or one successful `EVALSHA` per grant, the others never);
/// - strictly: no grant earlier than the bucket allows from its first request (so the last
///   of 40 no earlier than 32/9 s = 3.556 s), no window over the bucket beyond the bunching
///   of late grants ([`check_windows`]);
/// - against a measured bound: the last grant no later than the bucket's last slot allows,
///   computed from when the requests reached the server at the latest, plus the largest
///   lateness measured, 1 ms of rounding and the server's clock lag `g`.
///
/// Returns the server's command counts.
fn fleet(
    flavor: Flavor,
    backend: Backend,
    tasks: usize,
    calls: usize,
    flush_after: Option<Duration>,
) -> Commands {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let mut con = server.conn();
    // Loaded before the run, so each grant is exactly one EVALSHA or FCALL; the flush cases
    // show what a server that forgot the script or the library costs.
    match backend {
        Backend::Script => {
            let _: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(redis_throttle::script::SOURCE)
                .query(&mut con)
                .unwrap();
        }
        Backend::Library => {
            let _: String = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg(redis_throttle::script::LIBRARY)
                .query(&mut con)
                .unwrap();
        }
        _ => {}
    }
    let before = commands(&mut con);
    let key = format!("backends:fleet:{}", backend.name());
    let go_at = now_ns() + GO_DELAY.as_nanos() as i128;
    let env = [
        (WORKER_URL, server.url()),
        (WORKER_KEY, key.clone()),
        (WORKER_BACKEND, backend.name().to_owned()),
        (WORKER_GO_AT, go_at.to_string()),
        (WORKER_TASKS, tasks.to_string()),
        (WORKER_CALLS, calls.to_string()),
    ];
    let mut workers: Vec<ChildTest> = (0..PROCESSES)
        .map(|_| ChildTest::spawn("backend_worker", &env))
        .collect();

    let mut flushed_at = None;
    if let Some(after) = flush_after {
        let at = go_at + after.as_nanos() as i128;
        std::thread::sleep(Duration::from_nanos((at - now_ns()).max(0) as u64));
        let flush = if backend == Backend::Library {
            "FUNCTION"
        } else {
            "SCRIPT"
        };
        let _: () = redis::cmd(flush).arg("FLUSH").query(&mut con).unwrap();
        flushed_at = Some(now_ns());
    }

    let deadline = std::time::Instant::now() + GO_DELAY + WORKER_TIMEOUT;
    let mut starts = Vec::new();
    let mut samples = Vec::new();
    let mut round_trips = 0;
    for worker in &mut workers {
        let report = Report::parse(&worker.finish_ok(deadline));
        let (counts, trips) = report
            .metrics
            .split_once(" round_trips=")
            .and_then(|(counts, rest)| Some((counts, rest.split_once(' ')?)))
            .map(|(counts, (trips, backend))| (format!("{counts} {backend}"), trips))
            .unwrap_or_else(|| panic!("no round_trips in {:?}", report.metrics));
        let expected = format!(
            "granted={n} errors=0 gave_up=0 backend={}",
            backend.name(),
            n = tasks * calls
        );
        assert_eq!(counts, expected, "{flavor} {backend:?}");
        round_trips += trips.parse::<u64>().expect("a count");
        assert_eq!(report.samples.len(), tasks * calls, "{flavor} {backend:?}");
        starts.push(report.start);
        samples.extend(report.samples);
    }
    drop(workers);
    assert_eq!(starts.len(), PROCESSES, "{flavor} {backend:?}");

    let grants = (PROCESSES * tasks * calls) as u64;
    assert_eq!(samples.len() as u64, grants);
    let counted = commands(&mut con).since(&before);
    // The round trips the limiters counted are the commands the server saw from them: each
    // take, and each check or load of the library or the script.
    let sent = counted.take
        + counted.evalsha
        + counted.script_load
        + counted.fcall
        + counted.function_load
        + counted.function_list;
    assert_eq!(round_trips, sent, "{flavor} {backend:?}: {counted:?}");
    match backend {
        Backend::Module => {
            assert_eq!(
                counted.take, grants,
                "{flavor}: one THROTTLE.TAKE per grant"
            );
            assert_eq!(
                counted.evalsha + counted.fcall,
                0,
                "{flavor}: the module backend ran Lua"
            );
        }
        Backend::Library => {
            assert_eq!(
                counted.take + counted.evalsha,
                0,
                "{flavor}: the library backend ran the module or the script"
            );
            assert_eq!(
                counted.fcall - counted.fcall_failed,
                grants,
                "{flavor}: one successful FCALL per grant: {counted:?}"
            );
            // Each failed FCALL is a server that forgot the library: loaded again, once.
            assert_eq!(counted.function_load, counted.fcall_failed, "{counted:?}");
        }
        _ => {
            assert_eq!(
                counted.take, 0,
                "{flavor}: the script backend ran the module"
            );
            assert_eq!(
                counted.evalsha - counted.evalsha_failed,
                grants,
                "{flavor}: one successful EVALSHA per grant: {counted:?}"
            );
            assert_eq!(counted.evalsha_failed, counted.noscript, "{counted:?}");
            assert_eq!(counted.script_load, counted.noscript, "{counted:?}");
        }
    }

    // The bucket was full before the first request of either process.
    let t0 = *starts.iter().min().unwrap();
    let g = clock_lag_ns(flavor, backend);
    let windows = check_windows(&samples, t0, g, CAPACITY, RATE);

    // The latest each request can have reached the server: before its reply, which came
    // `slept + lateness` before the grant returned. The k-th earliest reading is at most
    // the k-th earliest of these, and the GCRA puts the last slot's token at
    // max over k of (reading_k + (n - capacity + 1 - k) / rate), or the last reading.
    let mut reached: Vec<i128> = samples.iter().map(|s| s.done - s.slept).collect();
    reached.sort_unstable();
    let n = reached.len() as i128;
    let slot = |k: i128| {
        let rate = RATE as i128;
        ((n - CAPACITY as i128 + 1 - k) * NS_PER_S + rate - 1) / rate
    };
    let last_slot = reached
        .iter()
        .enumerate()
        .map(|(index, at)| at + slot(index as i128 + 1))
        .chain([*reached.last().unwrap()])
        .max()
        .unwrap();
    let bound = last_slot - t0 + windows.max_lateness + NS_PER_MS + g;
    let last = samples.iter().map(|s| s.done).max().unwrap() - t0;
    let ideal = (n - CAPACITY as i128) * NS_PER_S / RATE as i128;
    let ms = |ns: i128| ns as f64 / 1e6;
    println!(
        "{flavor} {backend:?} fleet, {PROCESSES} processes x {tasks} tasks x {calls} calls{}: \
         {grants} grants, {} THROTTLE.TAKE, {} EVALSHA ({} NOSCRIPT, {} SCRIPT LOAD); last \
         grant at {:.3} ms (ideal {:.3} ms, {:+.2} %; measured bound {:.3} ms; within 3 %: {}); \
         {windows}",
        flushed_at.map_or(String::new(), |at| format!(
            ", SCRIPT FLUSH at {:.3} ms",
            ms(at - t0)
        )),
        counted.take,
        counted.evalsha,
        counted.noscript,
        counted.script_load,
        ms(last),
        ms(ideal),
        (last - ideal) as f64 / ideal as f64 * 100.0,
        ms(bound),
        if last * 100 <= ideal * 103 {
            "yes"
        } else {
            "no"
        },
    );
    assert!(
        last + g >= ideal,
        "{flavor} {backend:?}: the last grant at {last} ns, before {ideal}"
    );
    assert!(
        last <= bound,
        "{flavor} {backend:?}: the last grant at {:.3} ms, later than the bucket's last slot \
         allows with the lateness measured ({:.3} ms)",
        ms(last),
        ms(bound)
    );
    if let Some(at) = flushed_at {
        let after_flush = samples.iter().filter(|s| s.start > at).count();
        assert!(
            after_flush > 0,
            "{flavor}: no call was sent after the flush"
        );
    }
    counted
}

/// The fleet test of issue 11 (2 processes x 20 calls, all reserving at once) on the script.
fn fleet_on_the_script(flavor: Flavor) {
    let counted = fleet(flavor, Backend::Script, 20, 1, None);
    assert_eq!(counted.evalsha, 40, "{flavor}: 40 grants in 40 EVALSHA");
    assert_eq!(counted.noscript, 0);
}

/// The same on the function library.
fn fleet_on_the_library(flavor: Flavor) {
    let counted = fleet(flavor, Backend::Library, 20, 1, None);
    assert_eq!(counted.fcall, 40, "{flavor}: 40 grants in 40 FCALL");
    assert_eq!(counted.function_load, 0, "{flavor}: loaded before the run");
}

/// `FUNCTION FLUSH` while the fleet runs, as `SCRIPT FLUSH` below: no call sees an error,
/// the grants stay within the bucket, and the server forgot the library: some FCALL answered
/// "function not found", at most one per task, and the library was loaded again as often.
fn function_flush_mid_run(flavor: Flavor) {
    flush_mid_run(flavor, Backend::Library, |c| c.fcall_failed, |c| c.fcall);
}

/// The same on the module.
fn fleet_on_the_module(flavor: Flavor) {
    let counted = fleet(flavor, Backend::Module, 20, 1, None);
    assert_eq!(counted.take, 40, "{flavor}: 40 grants in 40 THROTTLE.TAKE");
}

/// `SCRIPT FLUSH` while the fleet runs: 2 processes x 5 tasks x 4 calls in a row, so calls
/// are sent until about 2.4 s; the flush at 1.2 s. No call sees an error (each process's
/// counters say 20 granted, 0 errors), the grants stay within the bucket, and the server
/// forgot the script: some EVALSHA answered NOSCRIPT, at most one per task (each task's
/// next call after the flush), and the script was loaded again as often.
fn script_flush_mid_run(flavor: Flavor) {
    flush_mid_run(flavor, Backend::Script, |c| c.noscript, |c| c.evalsha);
}

/// The flush mid-run of either: of the commands counted, `felt` (1 to 10) found the code
/// gone, and `sent` is the 40 grants' and those.
fn flush_mid_run(
    flavor: Flavor,
    backend: Backend,
    felt: fn(&Commands) -> u64,
    sent: fn(&Commands) -> u64,
) {
    let counted = fleet(flavor, backend, 5, 4, Some(Duration::from_millis(1200)));
    let felt = felt(&counted);
    assert!(
        (1..=10).contains(&felt),
        "{flavor}: the flush was felt by 1 to 10 calls: {counted:?}"
    );
    assert_eq!(sent(&counted), 40 + felt, "{counted:?}");
}

// --- Auto ------------------------------------------------------------------------------

/// Sequential calls on a fresh `Auto` limiter against a server without the module: the
/// first call probes the module (one `ERR unknown command`, which the caller does not see),
/// then reads the server's library (`FUNCTION LIST ... WITHCODE`: none on a fresh server, no
/// error) and loads it, and every call is one `FCALL`. The limiter, its clones and its metrics
/// say `Library` from the first answer on. A second limiter probes once too (one probe per
/// limiter), and finds its own library there: one more `FUNCTION LIST`, no more loads.
fn auto_without_the_module_settles_on_the_library(flavor: Flavor) {
    auto_settles(flavor, Backend::Library);
}

/// The same against a server without the module that refuses FUNCTION (here: its FCALL,
/// FCALL_RO and FUNCTION renamed away, as some managed services do): the library's check
/// (`FUNCTION LIST`) answers "unknown command" too, and every call is one `EVALSHA`.
fn auto_without_functions_settles_on_the_script(flavor: Flavor) {
    auto_settles(flavor, Backend::Script);
}

fn auto_settles(flavor: Flavor, expected: Backend) {
    let _serial = serial();
    let server = if expected == Backend::Script {
        server_without_functions(flavor)
    } else {
        server_for(flavor, expected)
    };
    let mut con = server.conn();
    // What serves one call, as INFO commandstats counts it.
    let served = |con: &mut redis::Connection| match expected {
        Backend::Script => calls(con, "evalsha"),
        _ => calls(con, "fcall"),
    };
    runtime().block_on(async {
        let conn = multiplexed(&server.url()).await;
        let limiter = Limiter::new(
            conn.clone(),
            "backends:auto",
            Quota::new(10, "0.001").unwrap(),
        );
        assert_eq!(
            limiter.backend(),
            Backend::Auto,
            "{flavor}: nothing sent yet"
        );
        let (errors, noscript) = (
            error_replies(&mut con, "ERR"),
            error_replies(&mut con, "NOSCRIPT"),
        );

        let first = limiter.try_acquire().await.unwrap();
        assert!(first.is_granted(), "{flavor}: {first:?}");
        // The probe is counted: the module's refusal, the library's check (and load), the
        // call; or, without FUNCTION, the module, the check, EVALSHA, SCRIPT LOAD, EVALSHA.
        let first_trips = if expected == Backend::Script { 5 } else { 4 };
        assert_eq!(
            first.granted().map(|g| g.round_trips),
            Some(first_trips),
            "{flavor}"
        );
        assert_eq!(limiter.backend(), expected, "{flavor}");
        assert_eq!(limiter.metrics().backend, Some(expected), "{flavor}");
        // The module's "unknown command", then, on a server without FUNCTION, the library
        // check's "unknown command" (on a fresh server with FUNCTION, the check finds no
        // library: no error).
        let per_probe = if expected == Backend::Script { 2 } else { 1 };
        assert_eq!(
            error_replies(&mut con, "ERR") - errors,
            per_probe,
            "{flavor}: the probes"
        );
        match expected {
            // The fresh server had never seen the script: one NOSCRIPT, one load, one retry.
            Backend::Script => {
                assert_eq!(error_replies(&mut con, "NOSCRIPT") - noscript, 1);
                assert_eq!(served(&mut con), 2, "{flavor}");
            }
            // The library was read, found missing and loaded before the call, once.
            _ => {
                assert_eq!(calls(&mut con, "function|list"), 1, "{flavor}");
                assert_eq!(calls(&mut con, "function|load"), 1, "{flavor}");
                assert_eq!(served(&mut con), 1, "{flavor}");
            }
        }
        let first_served = served(&mut con);

        let clone = limiter.clone();
        assert_eq!(clone.backend(), expected, "{flavor}: clones share it");
        for n in 2..=6u64 {
            assert!(clone.try_acquire().await.unwrap().is_granted(), "{flavor}");
            assert_eq!(served(&mut con), first_served + n - 1, "{flavor}");
        }
        let grant = limiter.acquire().await.unwrap();
        assert_eq!((grant.round_trips, grant.remaining), (1, 3), "{flavor}");
        assert_eq!(
            error_replies(&mut con, "ERR") - errors,
            per_probe,
            "{flavor}: no more probes"
        );
        assert_eq!(calls(&mut con, "throttle.take"), 0);
        let m = limiter.metrics();
        assert_eq!(
            (m.granted, m.errors, m.round_trips, m.backend),
            (7, 0, 6 + u64::from(first_trips), Some(expected)),
            "{flavor}: the limiter counts the probe's round trips, then one per call: {m:?}"
        );

        // Another limiter has its own probe: the module's, and then the library's check
        // finds it there (or FUNCTION missing again).
        let other = Limiter::new(
            conn.clone(),
            "backends:auto",
            Quota::new(10, "0.001").unwrap(),
        );
        assert!(other.try_acquire().await.unwrap().is_granted());
        assert_eq!(other.backend(), expected);
        let probes = 2 * per_probe;
        assert_eq!(error_replies(&mut con, "ERR") - errors, probes, "{flavor}");
        if expected == Backend::Library {
            // Checked again (its own probe), found this client's, not loaded again.
            assert_eq!(calls(&mut con, "function|list"), 2, "{flavor}");
            assert_eq!(calls(&mut con, "function|load"), 1, "{flavor}");
        }

        // Concurrent first calls of a fresh limiter: one probes, the others wait for its
        // answer.
        let fresh = Limiter::new(
            conn,
            "backends:auto:concurrent",
            Quota::new(10, "0.001").unwrap(),
        );
        let before = error_replies(&mut con, "ERR");
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let fresh = fresh.clone();
                tokio::spawn(async move { fresh.try_acquire().await.unwrap().is_granted() })
            })
            .collect();
        for call in calls {
            assert!(call.await.unwrap());
        }
        let errors = error_replies(&mut con, "ERR") - before;
        assert_eq!(
            errors, per_probe,
            "{flavor}: one probe for 8 concurrent first calls"
        );
        assert_eq!(fresh.backend(), expected);
        println!(
            "{flavor} Auto on a server without the module settles on {expected:?}: 1 probe for \
             7 sequential calls on one limiter (and its clone), 1 more for a second limiter; 8 \
             concurrent first calls of a fresh limiter made 1 probe"
        );
    });
}

/// A server without the module whose FCALL, FCALL_RO and FUNCTION are renamed away: as a
/// managed server that allows neither modules nor functions.
fn server_without_functions(flavor: Flavor) -> throttle_testkit::Server {
    throttle_testkit::Server::builder(flavor)
        .module(false)
        .arg("rename-command", "FCALL fcall-refused-here")
        .arg("rename-command", "FCALL_RO fcall-ro-refused-here")
        .arg("rename-command", "FUNCTION function-refused-here")
        .start()
}

/// `Auto` against a server with the module: the module serves every call (INFO commandstats
/// counts one THROTTLE.TAKE per call, no EVALSHA, no error).
fn auto_with_the_module_uses_the_module(flavor: Flavor) {
    let _serial = serial();
    let server = server_for(flavor, Backend::Auto);
    let mut con = server.conn();
    runtime().block_on(async {
        let limiter = Limiter::new(
            manager(&server.url()).await,
            "backends:auto",
            Quota::new(10, "0.001").unwrap(),
        );
        assert_eq!(limiter.backend(), Backend::Auto);
        let errors = error_replies(&mut con, "ERR");
        for n in 1..=6u64 {
            assert!(
                limiter.try_acquire().await.unwrap().is_granted(),
                "{flavor}"
            );
            assert_eq!(calls(&mut con, "throttle.take"), n, "{flavor}");
            assert_eq!(limiter.backend(), Backend::Module, "{flavor}");
        }
        let grant = limiter.acquire().await.unwrap();
        assert_eq!((grant.round_trips, grant.remaining), (1, 3), "{flavor}");
        assert_eq!(calls(&mut con, "throttle.take"), 7, "{flavor}");
        assert_eq!(calls(&mut con, "evalsha"), 0, "{flavor}");
        assert_eq!(calls(&mut con, "eval"), 0, "{flavor}");
        assert_eq!(error_replies(&mut con, "ERR"), errors, "{flavor}");
        let m = limiter.metrics();
        assert_eq!(
            (m.granted, m.errors, m.round_trips, m.backend),
            (7, 0, 7, Some(Backend::Module)),
            "{flavor}: {m:?}"
        );
    });
}

// --- One key, both backends -------------------------------------------------------------

/// A key written by the module is read and taken correctly by the script, and back. The
/// bucket refills one token per 1000 s, so nothing here depends on when the calls run: every
/// reply and every stored state is exact. The state is the instant the bucket is full
/// again, ns; each token taken moves it exactly 10^12 ns later, each given back as much
/// earlier.
fn one_key_both_backends(flavor: Flavor) {
    const T: i128 = 1_000 * NS_PER_S;
    let _serial = serial();
    let server = server_for(flavor, Backend::Module);
    let mut con = server.conn();
    runtime().block_on(async {
        let url = server.url();
        let quota = Quota::new(5, "0.001").unwrap();
        let key = "backends:shared";
        let on = |backend| {
            let quota = quota.clone();
            let url = url.clone();
            async move {
                Limiter::builder(key, quota)
                    .backend(backend)
                    .build(multiplexed(&url).await)
                    .unwrap()
            }
        };
        let module = on(Backend::Module).await;
        let script = on(Backend::Script).await;
        let state = |con: &mut redis::Connection| -> i128 {
            stored_state(con, key).expect("a stored state").into()
        };

        // The module takes 3 of 5.
        let TryAcquire::Granted(three) = module.try_acquire_with(Demand::tokens(3)).await.unwrap()
        else {
            panic!("{flavor}: a full bucket refused 3");
        };
        assert_eq!(three.remaining, 2, "{flavor}");
        let s1 = state(&mut con);

        // The script sees 2 left, and the bucket full again in 3 tokens' time.
        let peek = script.peek().await.unwrap();
        assert_eq!(
            peek.remaining, 2,
            "{flavor}: the script reads the module's state"
        );
        let full = Duration::from_secs(3000);
        assert!(
            peek.until_full <= full && peek.until_full > full - Duration::from_secs(60),
            "{flavor}: {peek:?}"
        );
        // The script takes 1: 1 left, the state exactly one token later.
        let TryAcquire::Granted(one) = script.try_acquire().await.unwrap() else {
            panic!("{flavor}: the script was refused a token the module left");
        };
        assert_eq!(one.remaining, 1, "{flavor}");
        assert_eq!(state(&mut con), s1 + T, "{flavor}");

        // The module reads the script's write: 1 left; it takes it, and the bucket is empty
        // for either.
        assert_eq!(module.peek().await.unwrap().remaining, 1, "{flavor}");
        let TryAcquire::Granted(last) = module.try_acquire().await.unwrap() else {
            panic!("{flavor}: the module was refused the token the script left");
        };
        assert_eq!(last.remaining, 0);
        assert_eq!(state(&mut con), s1 + 2 * T, "{flavor}");
        for limiter in [&module, &script] {
            match limiter.try_acquire().await.unwrap() {
                TryAcquire::Denied { retry_after } => assert!(
                    retry_after > Duration::from_secs(900)
                        && retry_after <= Duration::from_secs(1000),
                    "{flavor}: {retry_after:?}"
                ),
                granted => panic!("{flavor}: an empty bucket granted {granted:?}"),
            }
        }
        assert_eq!(
            state(&mut con),
            s1 + 2 * T,
            "{flavor}: a refusal writes nothing"
        );

        // Tickets cross over too. The script gives back the module's last token (nothing
        // was taken after it): the state moves back one token, exactly.
        assert_eq!(script.give_back(last).await.unwrap(), 1, "{flavor}");
        assert_eq!(state(&mut con), s1 + T, "{flavor}");
        // The module gives back the script's token: the state is back at its ticket, so
        // nothing counts as taken after it.
        assert_eq!(module.give_back(one).await.unwrap(), 1, "{flavor}");
        assert_eq!(state(&mut con), s1, "{flavor}");
        // The module's 3 were followed by nothing now: all 3 come back through the script.
        assert_eq!(script.give_back(three).await.unwrap(), 3, "{flavor}");
        // Full again, as the module reads it. On Redis 7.0 the module's clock (monotonic,
        // anchored to the wall clock's millisecond) may trail the script's `TIME` by under
        // 1 ms, so the state the script wrote at its "now" can still be that far ahead: a
        // lagging clock is only stricter.
        let peek = module.peek().await.unwrap();
        let lag = Duration::from_nanos(clock_lag_ns(flavor, Backend::Module) as u64);
        if flavor.has_cached_micros() {
            assert_eq!(
                (peek.remaining, peek.until_full),
                (5, Duration::ZERO),
                "{flavor}"
            );
        } else {
            assert!(
                peek.remaining >= 4 && peek.until_full <= lag,
                "{flavor}: full again but for the clock lag: {peek:?}"
            );
        }

        // A pause by one is seen by the other: the script pauses 1 h, the module's next
        // token is an hour away.
        let next = script.pause(Duration::from_secs(3600)).await.unwrap();
        assert_eq!(next, Duration::from_secs(3600), "{flavor}");
        match module.try_acquire().await.unwrap() {
            TryAcquire::Denied { retry_after } => assert!(
                retry_after > Duration::from_secs(3500)
                    && retry_after <= Duration::from_secs(3600) + lag,
                "{flavor}: {retry_after:?}"
            ),
            granted => panic!("{flavor}: granted during the script's pause: {granted:?}"),
        }
        println!("{flavor}: module and script read, take, give back and pause one key alike");
    });
}

throttle_testkit::per_server!(
    fleet_on_the_script,
    fleet_on_the_library,
    fleet_on_the_module,
    script_flush_mid_run,
    function_flush_mid_run,
    auto_without_the_module_settles_on_the_library,
    auto_without_functions_settles_on_the_script,
    auto_with_the_module_uses_the_module,
    one_key_both_backends,
);

/// `Limiter::peek` answers while writes are paused (`CLIENT PAUSE WRITE`, as in a failover),
/// since `THROTTLE.PEEK` and the script's `peek` (sent as `EVALSHA_RO`) never write.
#[test]
fn peek_answers_while_writes_are_paused() {
    let _serial = serial();
    for backend in [Backend::Module, Backend::Library, Backend::Script] {
        let server = server_for(Flavor::Redis82, backend);
        let mut con = server.conn();
        runtime().block_on(async {
            let limiter = Limiter::builder("backends:peek", Quota::new(5, 1u64).unwrap())
                .backend(backend)
                .build(multiplexed(&server.url()).await)
                .unwrap();
            // The script loaded (and the backend settled) before the pause.
            assert_eq!(limiter.peek().await.unwrap().remaining, 5);
            let _: () = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(3000)
                .arg("WRITE")
                .query(&mut con)
                .unwrap();
            let started = std::time::Instant::now();
            let peek = tokio::time::timeout(Duration::from_secs(1), limiter.peek()).await;
            let took = started.elapsed();
            let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut con).unwrap();
            assert!(
                matches!(peek, Ok(Ok(ref state)) if state.remaining == 5),
                "{backend:?}: peek during CLIENT PAUSE WRITE: {peek:?} after {took:?}"
            );
        });
    }
}

/// `Commands` sends a command by its arguments on every backend, and reads each reply back as
/// the call made it: a TAKE with TICKET and INFLIGHT (six integers), an MTAKE of one key with
/// INFLIGHT (five, as long as one with TICKET), a PAUSE (an integer), a PEEK.
#[test]
fn commands_read_their_own_replies_on_every_backend() {
    use redis_throttle::throttle_bucket::{
        Inflight, Limit, MTakeArgs, PauseArgs, PeekArgs, Quota as BucketQuota, TakeArgs,
    };
    use redis_throttle::Commands;

    let _serial = serial();
    for backend in [Backend::Module, Backend::Library, Backend::Script] {
        let server = server_for(Flavor::Redis82, backend);
        runtime().block_on(async {
            let commands = Commands::new(multiplexed(&server.url()).await, backend);
            let quota = BucketQuota::parse(b"5", b"0.001").unwrap();
            let inflight = Some(Inflight {
                cap: 2,
                lease_ms: 60_000,
            });
            let take = TakeArgs {
                quota,
                tokens: 2,
                max_wait_ms: 0,
                ticket: true,
                floor: None,
                inflight,
                line: None,
            };
            let taken = commands.call("backends:commands", &take).await.unwrap();
            assert!(taken.granted, "{backend:?}: {taken:?}");
            assert_eq!(taken.remaining, 3, "{backend:?}");
            assert!(taken.ticket.is_some_and(|t| t > 0), "{backend:?}");
            assert!(taken.slot.is_some_and(|id| id > 0), "{backend:?}");

            let mut mtake = MTakeArgs::new(
                &[Limit {
                    quota,
                    tokens: 1,
                    floor: None,
                }],
                0,
            )
            .unwrap();
            mtake.inflight = inflight;
            let multi = commands
                .call_keys(&["backends:commands"], &mtake)
                .await
                .unwrap();
            assert!(multi.granted, "{backend:?}: {multi:?}");
            assert_eq!((multi.buckets[0].0, multi.tickets), (2, None));
            assert!(multi.slot.is_some_and(|id| id > 0), "{backend:?}");

            let pause = PauseArgs {
                quota,
                pause_ms: 30_000,
            };
            let next_ms = commands.call("backends:commands", &pause).await.unwrap();
            assert!(next_ms >= 30_000, "{backend:?}: {next_ms}");
            let seen = commands
                .call("backends:commands", &PeekArgs { quota })
                .await
                .unwrap();
            assert!(seen.paused_ms > 29_000, "{backend:?}: {seen:?}");
            assert_eq!(commands.backend(), backend);

            // Many buckets in one pipeline, after the server forgot the Lua twin: loaded
            // again and the pipeline sent once more; a key that is not a bucket fails alone.
            let mut admin = server.conn();
            let _: () = redis::cmd("SET")
                .arg("backends:plain")
                .arg("x")
                .query(&mut admin)
                .unwrap();
            let _: () = redis::cmd(if backend == Backend::Library {
                "FUNCTION"
            } else {
                "SCRIPT"
            })
            .arg("FLUSH")
            .query(&mut admin)
            .unwrap();
            let peek = PeekArgs { quota };
            let each = commands
                .call_each(&[
                    ("backends:commands", peek),
                    ("backends:plain", peek),
                    ("backends:fresh", peek),
                ])
                .await
                .unwrap();
            assert_eq!(each.len(), 3, "{backend:?}");
            assert!(
                matches!(&each[0], Ok(seen) if seen.paused_ms > 28_000),
                "{backend:?}: {each:?}"
            );
            assert!(
                matches!(&each[1], Err(redis_throttle::Error::Rejected { message })
                    if message.contains("not a THROTTLE bucket")),
                "{backend:?}: {each:?}"
            );
            assert!(
                matches!(&each[2], Ok(seen) if seen.remaining == 5),
                "{backend:?}: {each:?}"
            );
        });
    }
}
