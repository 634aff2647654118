//! A connection that fails in about 200 ms when Redis cannot be reached, instead of redis-rs's
//! defaults (a 1 s connection timeout and six reconnection tries with backoff, seconds for
//! each call while Redis is down).

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::Error;

/// How long a connection attempt, and an answer to one call, may take.
pub const FAIL_FAST: Duration = Duration::from_millis(200);

/// A [`ConnectionManager`] configuration for a limiter: a connection attempt and each call's
/// answer within [`FAIL_FAST`] (200 ms), and one reconnection try, so that a call fails in
/// about 200 ms while Redis is unreachable; the manager reconnects on the next call once it is
/// back. A healthy Redis answers a THROTTLE call in well under a millisecond; raise the
/// timeouts (`set_response_timeout`) for a server far away or heavily loaded.
///
/// ```
/// use std::time::Duration;
///
/// let config = redis_throttle::connection_config()
///     .set_response_timeout(Some(Duration::from_millis(500)));
/// # let _ = config;
/// ```
pub fn connection_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(FAIL_FAST))
        .set_response_timeout(Some(FAIL_FAST))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(100))
}

/// A reconnecting connection to `url` with [`connection_config`]: fails in about 200 ms when
/// nothing answers there.
///
/// ```no_run
/// # async fn run() -> Result<(), redis_throttle::Error> {
/// let conn = redis_throttle::connect("redis://127.0.0.1:6379").await?;
/// # let _ = conn;
/// # Ok(())
/// # }
/// ```
pub async fn connect(url: &str) -> Result<ConnectionManager, Error> {
    let client = redis::Client::open(url).map_err(Error::Connection)?;
    ConnectionManager::new_with_config(client, connection_config())
        .await
        .map_err(Error::Connection)
}
