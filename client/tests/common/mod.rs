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
