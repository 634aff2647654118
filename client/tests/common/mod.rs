//! Helpers shared by the client's integration tests. Each test binary uses some of them.
#![allow(dead_code)]

pub mod fake;

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::AsyncConnectionConfig;

/// Connection and response timeouts of the test connections: generous on a loaded machine,
/// short enough that a hang fails the test.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A reconnecting connection with explicit timeouts.
pub fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(200))
}

pub async fn manager(url: &str) -> ConnectionManager {
    let client = redis::Client::open(url).expect("a valid URL");
    ConnectionManager::new_with_config(client, manager_config())
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// A plain multiplexed connection (no reconnection).
pub async fn multiplexed(url: &str) -> MultiplexedConnection {
    let client = redis::Client::open(url).expect("a valid URL");
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// How many times the server has run THROTTLE.TAKE (`INFO commandstats`).
pub fn throttle_take_calls(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO commandstats");
    throttle_testkit::command_stat(&info, "throttle.take", "calls").unwrap_or(0)
}

/// Checks that grants at these offsets from the moment the bucket was full (and nothing had
/// been taken) never exceed the bucket: the k-th grant (from 1) at time t needs
/// `k <= capacity + rate * t`. Returns the smallest margin (how much later than the earliest
/// allowed instant a grant came), for the test's output.
pub fn assert_within_bucket(grants: &[Duration], capacity: u64, rate_per_s: u64) -> Duration {
    let mut sorted = grants.to_vec();
    sorted.sort();
    let mut least = Duration::MAX;
    for (index, at) in sorted.iter().enumerate() {
        let k = index as u64 + 1;
        // The earliest instant the k-th token can be there.
        let earliest =
            Duration::from_secs_f64(k.saturating_sub(capacity) as f64 / rate_per_s as f64);
        let earliest_ns =
            (k.saturating_sub(capacity) as u128 * 1_000_000_000).div_ceil(rate_per_s as u128);
        assert!(
            at.as_nanos() >= earliest_ns,
            "grant {k} came at {at:?}, before the bucket allows ({earliest:?}); all grants: {sorted:?}"
        );
        least = least.min(*at - Duration::from_nanos(earliest_ns as u64));
    }
    least
}

// --- Real-server helpers for the backend, give-back, multi-limit and pause tests ----------

/// `calls` of `command` in `INFO commandstats` (`evalsha`, `throttle.give`, `script|load`);
/// 0 while the command has not run.
pub fn command_calls(con: &mut redis::Connection, command: &str) -> u64 {
    command_stat(con, command, "calls")
}

/// `failed_calls` of `command` (the call ran and replied an error, such as `NOSCRIPT`).
pub fn command_failed_calls(con: &mut redis::Connection, command: &str) -> u64 {
    command_stat(con, command, "failed_calls")
}

fn command_stat(con: &mut redis::Connection, command: &str, stat: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO commandstats");
    throttle_testkit::command_stat(&info, command, stat).unwrap_or(0)
}

/// Error replies with this code (`ERR`, `NOSCRIPT`) the server has sent (`INFO errorstats`).
/// An unknown command is an `ERR` that no `commandstats` line counts.
pub fn error_replies(con: &mut redis::Connection, code: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(con)
        .expect("INFO errorstats");
    throttle_testkit::info_field(&info, &format!("errorstat_{code}"))
        .and_then(|value| value.strip_prefix("count="))
        .map_or(0, |count| count.parse().expect("a count"))
}

/// The stored state of a bucket (`GET key`): `None` while the key does not exist.
pub fn stored(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).expect("GET")
}

/// Timing tests in one binary take this lock, so they do not run at once on a shared machine.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A multi-threaded tokio runtime for a synchronous `#[test]` (as `per_server!` makes them).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Now, in ns since the Unix epoch: the clock every process on the machine and the server
/// share.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as i128
}

pub const NS_PER_MS: i128 = 1_000_000;
pub const NS_PER_S: i128 = 1_000_000_000;

/// How far a server's clock reading can trail the true time, ns: the module on Redis 7.0
/// reads a monotonic clock anchored once to the wall clock, counted as 1 ms; every other
/// reading (the module's cached µs, the script's `TIME`) is in whole µs.
pub fn clock_lag_ns(flavor: throttle_testkit::Flavor, backend: redis_throttle::Backend) -> i128 {
    if backend != redis_throttle::Backend::Script && !flavor.has_cached_micros() {
        NS_PER_MS
    } else {
        1_000
    }
}

/// The backend by its metrics name (`module`, `script`, `auto`).
pub fn backend_named(name: &str) -> redis_throttle::Backend {
    use redis_throttle::Backend;
    [Backend::Module, Backend::Script, Backend::Auto]
        .into_iter()
        .find(|b| b.name() == name)
        .unwrap_or_else(|| panic!("no backend named {name:?}"))
}

/// The server a backend runs against: the module loaded for `Module` and `Auto`; none for
/// `Script`, as on a managed server that refuses `MODULE LOAD`.
pub fn server_for(
    flavor: throttle_testkit::Flavor,
    backend: redis_throttle::Backend,
) -> throttle_testkit::Server {
    throttle_testkit::Server::builder(flavor)
        .module(backend != redis_throttle::Backend::Script)
        .start()
}

/// This test binary run again as a child process (`--exact <test> --nocapture`), with env
/// vars that make that test do a worker's job. Both pipes are drained while it runs;
/// dropping it kills it.
pub struct Worker {
    child: std::process::Child,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Worker {
    pub fn spawn(test: &str, env: &[(&str, String)]) -> Worker {
        use std::io::Read;
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().expect("the test binary");
        let mut child = Command::new(exe)
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a worker process");
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                String::from_utf8_lossy(&bytes).into_owned()
            })
        };
        let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
        let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
        Worker {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Waits until the worker exits (killing it at `deadline`) and returns its stdout;
    /// panics with both outputs if it failed.
    pub fn finish(&mut self, deadline: std::time::Instant) -> String {
        let failure = loop {
            match self.child.try_wait().expect("wait for a worker") {
                Some(status) if status.success() => break None,
                Some(status) => break Some(format!("exited with {status}")),
                None if std::time::Instant::now() > deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break Some("ran past its deadline and was killed".to_owned());
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let join = |handle: Option<std::thread::JoinHandle<String>>| {
            handle
                .map(|h| h.join().unwrap_or_default())
                .unwrap_or_default()
        };
        let (stdout, stderr) = (join(self.stdout.take()), join(self.stderr.take()));
        if let Some(failure) = failure {
            panic!("a worker {failure}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
        }
        stdout
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One grant, ns since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Just before the call was sent.
    pub start: i128,
    /// When it returned: the caller may act.
    pub done: i128,
    /// The wait the server asked for, which the client slept.
    pub slept: i128,
}

impl Sample {
    /// How much later than `start + slept` the call returned: round trip, timer, scheduling.
    pub fn lateness(&self) -> i128 {
        self.done - self.start - self.slept
    }

    /// `SAMPLE <start> <done> <slept>`, as a worker prints it.
    pub fn line(&self) -> String {
        format!("SAMPLE {} {} {}", self.start, self.done, self.slept)
    }

    /// The numbers after `SAMPLE` in [`Sample::line`].
    pub fn parse(words: &[&str]) -> Sample {
        let number = |text: &str| -> i128 { text.parse().expect("a number") };
        match words {
            [start, done, slept] => Sample {
                start: number(start),
                done: number(done),
                slept: number(slept),
            },
            other => panic!("not a sample: {other:?}"),
        }
    }
}

/// What [`check_windows`] measured, in tokens and ns.
#[derive(Clone, Debug)]
pub struct Windows {
    pub grants: usize,
    /// From `t0` to the last grant.
    pub duration: i128,
    /// Grants / (capacity + rate * duration).
    pub utilisation: f64,
    /// Largest `grants - (capacity + rate * (t1 - t0))` over every window, tokens.
    pub worst_window: f64,
    /// Smallest `capacity + rate * (c_k - t0 + g) - k`, tokens (never negative).
    pub cumulative_margin: f64,
    pub max_lateness: i128,
    pub median_lateness: i128,
    /// `rate * (max lateness + 1 ms + g)`, tokens.
    pub tolerance: f64,
}

impl std::fmt::Display for Windows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} grants in {:.3} s, utilisation {:.3}; worst window {:+.3} tokens over \
             capacity + rate * window (tolerance {:.3}); smallest margin from the full bucket \
             {:.3} tokens; lateness median {:.3} ms, max {:.3} ms",
            self.grants,
            self.duration as f64 / 1e9,
            self.utilisation,
            self.worst_window,
            self.tolerance,
            self.cumulative_margin,
            self.median_lateness as f64 / 1e6,
            self.max_lateness as f64 / 1e6,
        )
    }
}

/// The bucket's bound on grant instants (the argument is in tests/tests/soak_overshoot.rs):
/// from `t0`, when the bucket held `capacity` tokens and nothing had been taken, the k-th
/// grant (from 1) at `c_k` needs `k <= capacity + rate * (c_k - t0 + g)`, strictly; and every
/// window `[c_i, c_j]` holds at most `capacity + rate * (c_j - c_i)` grants plus a
/// tolerance of `rate * (max lateness + 1 ms + g)`, the bunching that late grants can make.
/// `g`: how far the server's clock reading can trail the true time. Panics on a breach.
pub fn check_windows(samples: &[Sample], t0: i128, g: i128, capacity: u64, rate: u64) -> Windows {
    assert!(!samples.is_empty(), "no grants");
    let (capacity, rate) = (i128::from(capacity), i128::from(rate));
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(|s| s.done);
    for s in &sorted {
        assert!(
            s.lateness() >= 0,
            "a grant returned {} ns before the wait the server asked for: {s:?}",
            -s.lateness()
        );
    }
    let mut lateness: Vec<i128> = sorted.iter().map(Sample::lateness).collect();
    lateness.sort_unstable();
    let max_lateness = *lateness.last().unwrap();

    let mut cumulative_margin = i128::MAX;
    for (index, s) in sorted.iter().enumerate() {
        let k = index as i128 + 1;
        let margin = capacity * NS_PER_S + rate * (s.done - t0 + g) - k * NS_PER_S;
        assert!(
            margin >= 0,
            "grant {k} came {:.3} ms after the bucket was full, before it allows ({capacity} + \
             {rate}/s); the grants before it: {:?}",
            (s.done - t0) as f64 / 1e6,
            &sorted[index.saturating_sub(5)..=index]
        );
        cumulative_margin = cumulative_margin.min(margin);
    }

    // With A_k = k * 10^9 - rate * c_k, a window [c_i, c_j] is over by A_j - A_i + 10^9 -
    // capacity * 10^9: the worst window ending at j starts at the smallest A_i, i <= j.
    let tolerance = rate * (max_lateness + NS_PER_MS + g);
    let mut worst = i128::MIN;
    let mut min_a = (i128::MAX, 0usize);
    for (j, s) in sorted.iter().enumerate() {
        let a_j = j as i128 * NS_PER_S - rate * s.done;
        if a_j < min_a.0 {
            min_a = (a_j, j);
        }
        let excess = a_j - min_a.0 + NS_PER_S - capacity * NS_PER_S;
        worst = worst.max(excess);
        let i = min_a.1;
        assert!(
            excess <= tolerance,
            "{} grants in the {:.3} ms from {:.3} ms: {:.3} tokens over capacity {capacity} + \
             {rate}/s * window, tolerance {:.3} (max lateness {:.3} ms); grants: {:?}",
            j - i + 1,
            (s.done - sorted[i].done) as f64 / 1e6,
            (sorted[i].done - t0) as f64 / 1e6,
            excess as f64 / 1e9,
            tolerance as f64 / 1e9,
            max_lateness as f64 / 1e6,
            &sorted[i..=j.min(i + 40)]
        );
    }
    let duration = sorted.last().unwrap().done - t0;
    let allowed = (capacity * NS_PER_S + rate * duration) as f64 / 1e9;
    Windows {
        grants: sorted.len(),
        duration,
        utilisation: sorted.len() as f64 / allowed,
        worst_window: worst as f64 / 1e9,
        cumulative_margin: cumulative_margin as f64 / 1e9,
        max_lateness,
        median_lateness: lateness[(lateness.len() - 1) / 2],
        tolerance: tolerance as f64 / 1e9,
    }
}
