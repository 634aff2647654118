//! Async connections for the tests that drive the client: timeouts generous on a loaded
//! machine, short enough that a hang fails the test.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::AsyncConnectionConfig;

/// Connection and response timeouts of the test connections.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A reconnecting connection with explicit timeouts.
pub fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(200))
}

/// A reconnecting connection to `url` with [`manager_config`].
pub async fn manager(url: &str) -> ConnectionManager {
    manager_with(url, manager_config()).await
}

/// A reconnecting connection to `url` with the test's own config (shorter timeouts for a
/// test that kills its server).
pub async fn manager_with(url: &str, config: ConnectionManagerConfig) -> ConnectionManager {
    let client = redis::Client::open(url).expect("a valid URL");
    ConnectionManager::new_with_config(client, config)
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

/// A cluster client seeded with `urls`, with the test timeouts.
pub fn cluster_client(urls: impl IntoIterator<Item = String>) -> redis::cluster::ClusterClient {
    redis::cluster::ClusterClient::builder(urls)
        .connection_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
        .build()
        .expect("a cluster client")
}

/// An async connection to the cluster seeded with `urls`, with the test timeouts.
pub async fn cluster(
    urls: impl IntoIterator<Item = String>,
) -> redis::cluster_async::ClusterConnection {
    cluster_client(urls)
        .get_async_connection()
        .await
        .expect("a cluster connection")
}
