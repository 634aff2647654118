//! A connection that fails in about 200 ms when Redis cannot be reached, instead of redis-rs's
//! defaults (a 1 s connection timeout and six reconnection tries with backoff, seconds for
//! each call while Redis is down).

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::{Announcements, Error};

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

/// A reconnecting connection to `url` with [`connection_config`] (it fails in about 200 ms
/// when nothing answers there), carrying the process's subscription to the pause
/// announcements: every limiter built over it (or a clone) listens to its buckets'
/// announcements ([`Announcements`]), so a reserved call learns of a pause another process set
/// without asking the server after its sleep. Call it once per process and clone the
/// connection; a builder's `without_listening()` opts a limiter out.
///
/// ```no_run
/// # async fn run() -> Result<(), redis_throttle::Error> {
/// let conn = redis_throttle::connect("redis://127.0.0.1:6379").await?;
/// # let _ = conn;
/// # Ok(())
/// # }
/// ```
pub async fn connect(url: &str) -> Result<Connection, Error> {
    let client = redis::Client::open(url).map_err(Error::Connection)?;
    let manager = ConnectionManager::new_with_config(client.clone(), connection_config())
        .await
        .map_err(Error::Connection)?;
    let announcements = Announcements::new(client)?;
    Ok(Connection {
        manager,
        announcements,
    })
}

/// What [`connect`] returns: a reconnecting connection ([`ConnectionManager`]) and the
/// process's subscription to the pause announcements, which the limiters built over it use.
/// A clone shares both.
#[derive(Clone)]
pub struct Connection {
    manager: ConnectionManager,
    announcements: Announcements,
}

impl Connection {
    /// The subscription the limiters built over this connection listen with.
    pub fn announcements(&self) -> &Announcements {
        &self.announcements
    }

    /// The reconnecting connection alone, for other commands of the application's own.
    pub fn manager(&self) -> &ConnectionManager {
        &self.manager
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.manager.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.manager.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.manager.get_db()
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("announcements", &self.announcements)
            .finish_non_exhaustive()
    }
}
