//! The children's HTTP client to a demo's mock (the upstream, the database): loopback only,
//! its keep-alive connections opened before the start, so that no handshake lands in the
//! timed part.

use std::time::Duration;

/// Bound on one HTTP call, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A client to the mock at `base` (`what` in the errors: "the upstream") with `connections`
/// keep-alive connections, opened at once on the mock's free `/health`.
pub async fn warm_client(
    base: &str,
    what: &str,
    connections: usize,
) -> Result<reqwest::Client, String> {
    let client = reqwest::Client::builder()
        // Loopback only: a proxy from the environment must not get in between.
        .no_proxy()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .pool_max_idle_per_host(connections)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let health = format!("{}/health", base.trim_end_matches('/'));
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (client, health) = (client.clone(), health.clone());
        tasks.push(tokio::spawn(async move {
            let response = client.get(&health).send().await?;
            // Read to the end, so the connection goes back to the pool.
            response.bytes().await.map(drop)
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot reach {what} at {health}: {e}"))?;
    }
    Ok(client)
}
