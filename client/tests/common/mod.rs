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

/// A string key's value (`GET key`): `None` while the key does not exist.
pub fn stored(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).expect("GET")
}

/// The stored state of a bucket (`GET key`: ns since the epoch, 8 bytes little-endian):
/// `None` while the key does not exist.
pub fn stored_state(con: &mut redis::Connection, key: &str) -> Option<i64> {
    let raw: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(con).expect("GET");
    raw.map(|bytes| {
        let state: [u8; 8] = bytes
            .as_slice()
            .try_into()
            .unwrap_or_else(|_| panic!("the state of {key} is not 8 bytes: {bytes:?}"));
        i64::from_le_bytes(state)
    })
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

/// What a worker process of the fleet tests prints, and the parent reads back: `START <ns>`
/// (its first request), a `SAMPLE` line per grant, and its limiter's counters.
pub struct Report {
    pub start: i128,
    pub samples: Vec<throttle_testkit::Sample>,
    /// `granted=.. errors=.. gave_up=.. round_trips=.. backend=..`
    pub metrics: String,
}

impl Report {
    /// Prints the report on stdout (after libtest's "test name ... " without a newline).
    pub fn print(
        start: i128,
        samples: &[throttle_testkit::Sample],
        m: &redis_throttle::MetricsSnapshot,
    ) {
        let mut lines = vec![String::new(), format!("START {start}")];
        lines.extend(samples.iter().map(throttle_testkit::Sample::line));
        lines.push(format!(
            "METRICS granted={} errors={} gave_up={} round_trips={} backend={}",
            m.granted,
            m.errors,
            m.gave_up,
            m.round_trips,
            m.backend.name()
        ));
        println!("{}", lines.join("\n"));
    }

    /// Reads a worker's stdout; panics if its start or counters are missing.
    #[track_caller]
    pub fn parse(stdout: &str) -> Report {
        let (mut start, mut metrics, mut samples) = (None, None, Vec::new());
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["START", at] => start = Some(at.parse::<i128>().expect("a start instant")),
                ["SAMPLE", numbers @ ..] => samples.push(throttle_testkit::Sample::parse(numbers)),
                ["METRICS", fields @ ..] => metrics = Some(fields.join(" ")),
                _ => {}
            }
        }
        Report {
            start: start.unwrap_or_else(|| panic!("no START in the worker's output:\n{stdout}")),
            samples,
            metrics: metrics
                .unwrap_or_else(|| panic!("no METRICS in the worker's output:\n{stdout}")),
        }
    }
}
