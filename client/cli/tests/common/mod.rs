//! What the CLI's test files share.

use std::time::Duration;

use redis_throttle::report::{report_key, Report};
use throttle_testkit::{Flavor, Server};
use tokio::time::Instant;

/// The report `process` writes of the limiter on `key`, once one is stored that `ready`
/// accepts (reports are written off the call path, every period); fails after `bound`.
pub async fn report_when(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    process: &str,
    bound: Duration,
    ready: impl Fn(&Report) -> bool,
) -> Report {
    let report = report_key(key, process);
    let start = Instant::now();
    loop {
        let line: Option<String> = redis::cmd("GET")
            .arg(&report)
            .query_async(con)
            .await
            .unwrap();
        if let Some(found) = line.as_deref().and_then(Report::parse).filter(&ready) {
            return found;
        }
        assert!(
            start.elapsed() < bound,
            "no report of {key} within {bound:?}: {line:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A server of `flavor` with the module, its URL and a connection to it.
pub async fn started(flavor: Flavor) -> (Server, String, redis::aio::MultiplexedConnection) {
    let server = Server::builder(flavor).start();
    let url = server.url();
    let con = connect(&url).await;
    (server, url, con)
}

/// Writes `value` under `key`, bytes as they are (what any report writer may do).
pub async fn set_raw(con: &mut redis::aio::MultiplexedConnection, key: &[u8], value: &[u8]) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(con)
        .await
        .unwrap();
}
