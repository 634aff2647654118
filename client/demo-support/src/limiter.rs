//! A child's limiter on the shared bucket, as both demos build it: its counters reported to
//! Redis for the operator's tool (`throttle-ctl status`), its one subscription to the
//! bucket's announcements, and a dry run before the start.

use std::time::Duration;

use redis_throttle::redis::aio::ConnectionManager;
use redis_throttle::redis::Client;
use redis_throttle::report::FleetReport;
use redis_throttle::{Announcements, Limiter, LimiterBuilder, Throttle};

use crate::redis_server::connect_async;

/// How long the subscription to the announcements may take to come up.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// `builder`'s limiter on `url`, its counters reported every second (the runs are short; off
/// the call path, on a connection of its own). With `listen`, it hears the bucket's pauses
/// and hand-overs on a subscription of its own, waited for: until it is up the calls ask, and
/// the run's round trips would not be those of a process up a while (`listen` is what to do
/// when it does not come up). Checked with one PEEK, which writes nothing: a backend without
/// the module, a script the server refuses, fail here rather than mid-run.
pub async fn checked_limiter(
    url: &str,
    builder: LimiterBuilder,
    listen: Option<&str>,
) -> Result<Limiter<ConnectionManager>, String> {
    let conn = connect_async(url).await?;
    let fleet =
        FleetReport::every(conn.clone(), Duration::from_secs(1)).map_err(|e| e.to_string())?;
    let mut builder = builder.report(&fleet);
    if let Some(otherwise) = listen {
        let client = Client::open(url).map_err(|e| format!("bad Redis URL {url}: {e}"))?;
        let announcements = Announcements::new(client).map_err(|e| e.to_string())?;
        if !announcements.ready(SUBSCRIBE_TIMEOUT).await {
            return Err(format!(
                "no subscription to the pause announcements on {url} within \
                 {SUBSCRIBE_TIMEOUT:?}{otherwise}"
            ));
        }
        builder = builder.listen(&announcements);
    }
    let limiter = builder.build(conn).map_err(|e| e.to_string())?;
    limiter.peek().await.map_err(|e| e.to_string())?;
    Ok(limiter)
}
